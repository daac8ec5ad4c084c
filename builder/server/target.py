"""The image a repository is served by, as far as the embedded tritonserver's Python side goes: its
Python minor (triton/images.py), so the stub and every model.py run on the Python that image runs.

The target comes from `--triton-image` (verify, serve, embedded install; env
TRITONBUILD_TRITON_IMAGE), else from the repository's manifest: the serving image an LLM recipe
names (image.triton_image, kept as llm.serving_image). Either runs the embedded server's Python side
on that image's Python, in an environment that gets what the models import here at this
environment's versions (server/mirror.py). --triton-image is strict (enforced: no such Python is an
error); a recipe's image that cannot be had here falls back to the default environment and the
report says why (MISMATCH). Nothing named: no target, and the embedded server runs as before (this
interpreter when it is 3.10-3.12, server/interpreters.py)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tritonbuild.errors import UsageError, VerifyError
from tritonbuild.server import toolenv
from tritonbuild.triton.images import image_python, recorded


@dataclass(frozen=True)
class Target:
    image: str  # nvcr.io/nvidia/tritonserver:24.08-py3
    python: str  # the minor it runs: '3.10'
    source: str  # where the target came from: '--triton-image', or the model whose recipe named it
    # True for --triton-image: its Python not found here, or the models' packages not installable
    # on it, is an error. False for a recipe's image: the default environment runs instead, and
    # the report says why (server/launcher.py).
    enforced: bool = True

    def wanted(self) -> str:
        """Why this Python, for a message."""
        return f"the target image {self.image} ({self.source}) runs Python {self.python}"


def given_target(reference: str) -> Target:
    """--triton-image REFERENCE; a clear error for an image whose Python is not recorded here."""
    found = image_python(reference)
    if found is None:
        raise UsageError(
            f"--triton-image {reference}: not an NGC tritonserver image whose Python tritonbuild "
            f"knows (recorded: {recorded()})",
            hint="name the NGC image yours is built FROM (e.g. 24.08-py3 or "
            "nvcr.io/nvidia/tritonserver:25.01-vllm-python-py3), or leave out --triton-image "
            "and name the interpreter with TRITONBUILD_EMBEDDED_PYTHON=/path/to/python3.X",
        )
    return Target(found[0], found[1], "--triton-image")


def manifest_target(models) -> Target | None:
    """The target the repository's recipes name (an LLM recipe's image.triton_image); None when none
    names a recorded image. One tritonserver runs one image: recipes naming images of different
    Pythons are an error."""
    named = {}
    for model in models:
        image = (model.llm or {}).get("serving_image")
        found = image_python(image) if image else None
        if found:
            named.setdefault(found, model.name)
    minors = {python for _, python in named}
    if len(minors) > 1:
        listed = ", ".join(
            f"{name}: {image} (Python {python})" for (image, python), name in named.items()
        )
        raise VerifyError(
            f"the recipes name serving images of different Pythons ({listed}); one tritonserver "
            "runs one image",
            hint="pass --triton-image with the image this repository is served by",
        )
    if not named:
        return None
    (image, python), name = next(iter(named.items()))
    return Target(image, python, f"the recipe of {name!r}: image.triton_image", enforced=False)


def syntax_python(serving: ServingTarget) -> tuple[str, str] | None:
    """build --triton-image: (interpreter, minor) of the image's Python, which checks the Python
    files' syntax; None without an image (the build's own Python checks). That Python not on this
    machine is an error naming what to install, as for verify."""
    target = serving.image
    if target is None:
        return None
    python, minor, _ = toolenv.find_python(target.python, target.wanted())
    return python, minor


def target_for(given: str | None, manifest=None) -> Target | None:
    """--triton-image when given, else what the manifest's recipes name, else None."""
    return ServingTarget(triton_image=given).for_repository(manifest).target


@dataclass(frozen=True)
class ServingTarget:
    """What a repository is served by, as one object from the api's edge to verify, serve, tune,
    infer, build and the embedded environment: the tritonserver that runs (--tritonserver: a local
    binary, 'docker:IMAGE' or 'podman:IMAGE'; None: the embedded one, server/launcher.py) and the
    image the repository is served by (--triton-image: its Python runs the embedded server's Python
    side and checks the Python files' syntax at build; None: the image the recipes name, else
    none). Below the api it is the target for one repository (for_repository): the launcher and the
    report's python_side read the tritonserver and the image's Python from it."""

    tritonserver: str | None = None
    triton_image: str | None = None
    # the image a built repository's recipes name, where no --triton-image is (for_repository)
    recipes_image: Target | None = None

    @functools.cached_property
    def image(self) -> Target | None:
        """--triton-image resolved to its Python (given_target), once; an image whose Python is not
        recorded here is a UsageError, raised where the target is first asked for."""
        return given_target(self.triton_image) if self.triton_image else None

    @property
    def target(self) -> Target | None:
        """The image the repository is served by: the one given, else the one its recipes name
        (for_repository), else None."""
        return self.image or self.recipes_image

    def checked(self) -> ServingTarget:
        """Itself, with --triton-image resolved now: an unknown image is a usage error before any
        work that would need it."""
        _ = self.image
        return self

    def for_repository(self, manifest=None) -> ServingTarget:
        """This target for a built repository (manifest): where no image was given, the one its
        recipes name; itself for no manifest (a hand-written repository, or --server's own
        Python)."""
        if self.image is not None or manifest is None:
            return self
        return dataclasses.replace(self, recipes_image=manifest_target(manifest.models))


EMBEDDED = ServingTarget()  # the embedded tritonserver, no target image named


def python_side(
    ran: str | None,
    environment: str | None,
    target: Target | None,
    own: bool = False,
    why: str | None = None,
) -> dict:
    """What the verify report says about the Python the server's Python side ran on and the
    target's: ran is None where the server's own Python ran (own: a Triton install's, a container's,
    --server's) or where the embedded server's environment could not be had (nothing ran). why: a
    recipe's image whose Python could not run here, and so did not (server/launcher.py)."""
    return {
        "ran": ran,
        "own": own,
        "environment": environment,
        "target": target.python if target else None,
        "target_image": target.image if target else None,
        "target_from": target.source if target else None,
        "matches": None if ran is None or target is None else ran == target.python,
        "not_run": why,
    }


def environment_summary(
    *,
    make: bool = True,
    progress: Callable[[str], None] | None = None,
    serving: ServingTarget = EMBEDDED,
    repository: Path | None = None,
) -> dict:
    """`embedded install | show`: the environment for the target image's Python (--triton-image,
    else the image a built repository's recipes name), else the default one
    (server/toolenv.py:summary); with what repository's Python files import here (--for)."""
    manifest = None
    if repository is not None and not serving.triton_image:
        from tritonbuild.repository.manifest import MANIFEST_NAME, read_repository

        if (Path(repository) / MANIFEST_NAME).is_file():
            manifest = read_repository(Path(repository), VerifyError)
    target = serving.for_repository(manifest).target
    return toolenv.summary(
        make=make,
        progress=progress,
        minor=target.python if target else None,
        wanted=target.wanted() if target else "",
        sources=(Path(repository),) if repository is not None else (),
    ) | ({"target_image": target.image} if target else {})
