"""NGC serving images and what they ship: tritonserver:<tag>-trtllm-python-py3 → TensorRT-LLM,
TensorRT, CUDA; tritonserver:<tag>-vllm-python-py3 → vLLM. From Triton's Release Compatibility
Matrix (server docs/introduction/compatibility.md, recorded with commit and lines in
tests/contracts/facts/triton_images.json, which a test keeps equal to these tables). A TensorRT
engine loads only under the TensorRT-LLM (and TensorRT) that built it, so a recipe's image and its
trtllm_version must agree."""

from __future__ import annotations

import re

# tag: (TensorRT-LLM, TensorRT, CUDA); the matrix at r26.08 lists no 26.08 trtllm-python-py3 image
TRTLLM_IMAGES = {
    "26.07": ("1.2.1", "10.14.1.48", "13.1.0.036"),
    "26.06": ("1.2.1", "10.14.1.48", "13.1.0.036"),
    "26.05": ("1.2.1", "10.14.1.48", "13.1.0.036"),
    "26.04": ("1.2.1", "10.14.1.48", "13.1.0.036"),
    "26.03": ("1.2.0", "10.14.1.48", "13.1.0.036"),
    "26.02": ("1.1.0", "10.13.3.9", "13.0.2.006"),
    "26.01": ("1.1.0", "10.13.3.9", "13.0.2.006"),
    "25.12": ("1.1.0", "10.13.3.9", "13.0.2.006"),
    "25.11": ("1.0.3.2510", "10.13.3.9", "13.0.2.006"),
    "25.10": ("1.0.0", "10.11.0.33", "12.9.1.010"),
    "25.09": ("1.0.0", "10.11.0.33", "12.9.1.010"),
    "25.08": ("0.21.0", "10.11.0.33", "12.9.0.043"),
    "25.07": ("0.20.0", "10.10.0.31", "12.9.0.036"),
    "25.06": ("0.20.0", "10.10.0.31", "12.9.0.036"),
    "25.05": ("0.19.0", "10.9.0.34", "12.8.1.012"),
    "25.04": ("0.18.2", "10.9.0.34", "12.8.1.012"),
    "25.03": ("0.18.0", "10.9.0.34", "12.8.1.012"),
    "25.02": ("0.17.0.post1", "10.8.0.43", "12.8.0.038"),
    "25.01": ("0.17.0", "10.8.0.43", "12.8.0.038"),
    "24.12": ("0.16.0", "10.7.0", "12.6.3"),
}
# tag: vLLM (the *-vllm-python-py3 images)
VLLM_IMAGES = {
    "26.08": "0.27.1",
    "26.07": "0.24.0",
    "26.06": "0.22.1",
    "26.05": "0.19.0",
    "26.04": "0.19.0",
    "26.03": "0.17.1",
    "26.02": "0.15.1",
    "26.01": "0.13.0",
    "25.12": "0.11.1",
    "25.11": "0.11.0",
    "25.10": "0.10.2",
    "25.09": "0.10.1.1",
    "25.08": "0.9.2",
    "25.07": "0.9.0rc1",
    "25.06": "0.9.0rc1",
    "25.05": "0.8.4",
    "25.04": "0.8.1",
    "25.03": "0.7.3",
    "25.02": "0.7.0",
    "25.01": "0.6.3.post1",
    "24.12": "0.5.5",
}
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
