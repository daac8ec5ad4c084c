"""Which Python an NGC tritonserver image runs its Python backend on (the stub, and every model.py):
nvcr.io/nvidia/tritonserver:<tag>-py3 moved from Ubuntu 22.04 (Python 3.10) to Ubuntu 24.04 (3.12)
at 24.11, the -vllm-python-py3 images with it, the -trtllm-python-py3 images one release later.
Read from the package's facts/triton_image_pythons.json (core/facts.py; each row with its commit and
line: server's Python backend QA default per release branch, and the Python column of its release
compatibility matrix), which tests/contracts checks against upstream."""

from __future__ import annotations

import re

from tritonbuild.core import facts

NGC = "nvcr.io/nvidia/tritonserver"
FLAVOURS = ("py3", "vllm-python-py3", "trtllm-python-py3")
# The serving image release every default reads (recipe images, the Kubernetes stock image, deploy's
# --image); Dockerfile.triton and the CI templates are checked against it
# (tests/unit/triton/test_default_tag.py). A new image release changes it here.
DEFAULT_TAG = "25.12"
# An image reference or its tag alone: nvcr.io/nvidia/tritonserver:24.08-py3,
# tritonserver:24.08-py3, 24.08-py3, 24.08 (the plain -py3 image)
REFERENCE = re.compile(
    r"^(?:(?:nvcr\.io/)?nvidia/)?(?:tritonserver:)?"
    r"(?P<tag>\d\d\.\d\d)(?:-(?P<flavour>[a-z0-9-]+))?$"
)


def _minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


_FACTS = facts.load("triton_image_pythons")
# flavour → tag → the Python minor the image's Python backend runs on
PYTHONS = {
    "py3": {tag: row["python"] for tag, row in _FACTS["py3"]["releases"].items()},
    **{
        flavour: {tag: _minor(row["python"]) for tag, row in _FACTS[flavour]["images"].items()}
        for flavour in ("vllm-python-py3", "trtllm-python-py3")
    },
}


def image_python(reference: str) -> tuple[str, str] | None:
    """(the image's full name, the Python minor it runs) for an NGC tritonserver image this table
    records; None for any other image (another registry, flavour or tag)."""
    found = REFERENCE.match(reference.strip())
    if not found:
        return None
    tag, flavour = found.group("tag"), found.group("flavour") or "py3"
    minor = PYTHONS.get(flavour, {}).get(tag)
    return (f"{NGC}:{tag}-{flavour}", minor) if minor else None


def default_image(flavour: str) -> str:
    """The default serving image of a flavour (py3, vllm-python-py3, trtllm-python-py3)."""
    return f"{NGC}:{DEFAULT_TAG}-{flavour}"


def recorded() -> str:
    """The images the table records, for a message."""
    return "; ".join(
        f"{NGC}:<{min(tags)}..{max(tags)}>-{flavour}" for flavour, tags in PYTHONS.items()
    )
