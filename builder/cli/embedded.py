"""embedded install | show: the environment tritonbuild keeps for the embedded tritonserver's Python
side."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tritonbuild.cli.app import app
from tritonbuild.cli.common import _json, json_option, main, triton_image_option

if TYPE_CHECKING:
    from tritonbuild.api.maintenance import EmbeddedEnvironment


@main.group("embedded")
def embedded_group() -> None:
    """The embedded tritonserver's own Python environment (nvidia-pytriton, numpy < 2), kept apart
    from yours."""


def _render(result: EmbeddedEnvironment, as_json: bool) -> None:
    if as_json:
        _json(result)
        return
    out = app().out
    if result.path is None:
        out.print(
            f"not made yet (it would go under {result.envs_dir}); "
            "'tritonbuild embedded install' makes it"
        )
        return
    versions = ", ".join(f"{name} {version}" for name, version in result.versions.items())
    out.print(
        f"{'made' if result.made else 'ready'}: {result.path} (Python {result.python_minor}, "
        f"{versions}"
        + (f"; packages {' '.join(result.packages)}" if result.packages else "")
        + ")"
        + (f" for {result.target_image}" if result.target_image else "")
    )


@embedded_group.command("install")
@triton_image_option
@json_option
def embedded_install_command(triton_image: str | None, as_json: bool) -> None:
    """Make the environment now (else the first verify, serve, infer or tune makes it): pip with
    its own index settings, plus TRITONBUILD_EMBEDDED_PACKAGES for your Python models; with
    --triton-image, the one for that image's Python."""
    from tritonbuild.api import maintenance

    made = maintenance.embedded_environment(
        make=True, progress=lambda line: app().err.print(line), triton_image=triton_image
    )
    _render(made, as_json)


@embedded_group.command("show")
@triton_image_option
@json_option
def embedded_show_command(triton_image: str | None, as_json: bool) -> None:
    """Where the environment is and what it holds (for that image's Python with --triton-image);
    makes nothing."""
    from tritonbuild.api import maintenance

    _render(maintenance.embedded_environment(make=False, triton_image=triton_image), as_json)
