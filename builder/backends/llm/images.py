"""NGC serving images and what they ship: tritonserver:<tag>-trtllm-python-py3 → TensorRT-LLM,
TensorRT, CUDA; tritonserver:<tag>-vllm-python-py3 → vLLM. From Triton's Release Compatibility
Matrix (server docs/introduction/compatibility.md), read from the package's facts/triton_images.json
(core/facts.py; each row with its commit and line, checked against upstream by tests/contracts). A TensorRT
engine loads only under the TensorRT-LLM (and TensorRT) that built it, so a recipe's image and its
trtllm_version must agree."""

from __future__ import annotations

import re

from tritonbuild.core import facts

_FACTS = facts.load("triton_images")
# tag: (TensorRT-LLM, TensorRT, CUDA); the matrix at r26.08 lists no 26.08 trtllm-python-py3 image
TRTLLM_IMAGES = {
    tag: (row["trtllm"], row["tensorrt"], row["cuda"]) for tag, row in _FACTS["images"].items()
}
# tag: vLLM (the *-vllm-python-py3 images)
VLLM_IMAGES = {tag: row["vllm"] for tag, row in _FACTS["vllm_images"].items()}
NGC_TRTLLM_IMAGE = re.compile(r"^nvcr\.io/nvidia/tritonserver:(\d+\.\d+)-trtllm-python-py3$")
MATRIX = "Triton's Release Compatibility Matrix (server docs/introduction/compatibility.md)"


def image_problem(image) -> tuple[str, str] | None:
    """(message, hint) when the recipe's image (an Image: triton_image, trtllm_version, ships)
    cannot serve an engine built with its trtllm_version; None when it can, or when the image is not
    an NGC trtllm tag."""
    tag = NGC_TRTLLM_IMAGE.match(image.triton_image)
    if not tag:
        return None
    known = TRTLLM_IMAGES.get(tag.group(1))
    declared = image.ships.tensorrt_llm if image.ships else None
    if known and declared and declared != known[0]:
        return (
            f"image.ships declares TensorRT-LLM {declared} for {image.triton_image}, which ships "
            f"{known[0]} per {MATRIX}",
            "remove image.ships: tritonbuild knows this tag",
        )
    ships = known[0] if known else declared
    if ships is None:
        oldest, newest = min(TRTLLM_IMAGES), max(TRTLLM_IMAGES)
        when = "newer than" if tag.group(1) > newest else "not in"
        return (
            f"{image.triton_image} is {when} tritonbuild's image table ({oldest}-{newest}): which "
            "TensorRT-LLM it ships is not known",
            f"declare what it ships, from {MATRIX}: image: {{ships: {{tensorrt_llm: X, tensorrt: "
            f"Y, cuda: Z}}}} with trtllm_version: X, or use a tag from the table",
        )
    if ships != image.trtllm_version:
        return (
            f"{image.triton_image} ships TensorRT-LLM {ships}, the recipe builds with "
            f"{image.trtllm_version}: the engine would not load there",
            f'set image.trtllm_version: "{ships}"',
        )
    return None


def image_versions(image) -> dict[str, str]:
    """What the serving image ships, as far as tritonbuild knows (for the plan)."""
    tag = NGC_TRTLLM_IMAGE.match(image.triton_image)
    if tag and tag.group(1) in TRTLLM_IMAGES:
        return dict(
            zip(("tensorrt_llm", "tensorrt", "cuda"), TRTLLM_IMAGES[tag.group(1)], strict=True)
        )
    if image.ships:
        return {k: v for k, v in image.ships.model_dump().items() if v}
    return {"tensorrt_llm": image.trtllm_version}
