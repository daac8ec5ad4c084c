"""embedded install | show: the environment tritonbuild keeps for the embedded tritonserver's Python
side."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from tritonbuild import api
from tritonbuild.cli.app import app
from tritonbuild.cli.common import _json, json_option, main, triton_image_option

if TYPE_CHECKING:
    from tritonbuild.api import EmbeddedEnvironment


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
    if result.mirrored:
        out.print(
            f"  with what the models import, at your versions: {' '.join(result.mirrored)}"
            + (f" ({result.mirror_path})" if result.mirror_path else " (not installed yet)")
        )
    if result.not_installed_here:
        out.print(f"  imported, not installed here: {', '.join(result.not_installed_here)}")


for_option = click.option(
    "--for",
    "repository",
    metavar="REPOSITORY",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="A model repository (built or hand-written): on a Python other than tritonbuild's, the "
    "packages its Python models import are installed for that Python at the versions installed "
    "here; a built repository's recipes name its image when --triton-image does not.",
)


@embedded_group.command("install")
@triton_image_option
@for_option
@json_option
def embedded_install_command(
    triton_image: str | None, repository: Path | None, as_json: bool
) -> None:
    """Make the environment now (else the first verify, serve, infer or tune makes it): pip with
    its own index settings, plus TRITONBUILD_EMBEDDED_PACKAGES for your Python models; with
    --triton-image, the one for that image's Python; with --for, what a repository's models import
    (a CI step before verify)."""
    made = api.embedded_environment(
        make=True,
        progress=lambda line: app().err.print(line),
        serving=api.ServingTarget(triton_image=triton_image),
        repository=repository,
    )
    _render(made, as_json)


@embedded_group.command("show")
@triton_image_option
@for_option
@json_option
def embedded_show_command(triton_image: str | None, repository: Path | None, as_json: bool) -> None:
    """Where the environment is and what it holds (for that image's Python with --triton-image,
    with what a repository's models import with --for); makes nothing."""
    _render(
        api.embedded_environment(
            make=False, serving=api.ServingTarget(triton_image=triton_image), repository=repository
        ),
        as_json,
    )


@embedded_group.command("prune")
@click.option(
    "--unused-days",
    type=click.FloatRange(min=0),
    default=30,
    show_default=True,
    help="Remove the environments and installed imports (mirrors) not used for this many days.",
)
@click.option("--dry-run", is_flag=True, help="Only say what would be removed.")
@json_option
def embedded_prune_command(unused_days: float, dry_run: bool, as_json: bool) -> None:
    """Remove the embedded server's environments (one per Python minor and package set) and the
    models' imports installed for another Python that no verify, serve or install has used for
    --unused-days (they pile up as package versions change, in CI caches too); never one being
    made. The next use makes what it needs again."""
    result = api.embedded_prune(unused_days, dry_run=dry_run)
    if as_json:
        _json(result)
        return
    verb = "would remove" if dry_run else "removed"
    app().out.print(
        f"{verb} {len(result.removed)} from {result.envs_dir} ({result.freed_bytes} bytes)"
        + "".join(f"\n  {name}" for name in result.removed)
        + f"\nkept {result.kept}"
    )
