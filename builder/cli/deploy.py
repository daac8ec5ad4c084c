"""deploy-snippets: Kubernetes manifests for a built repository on the stock tritonserver image."""

from __future__ import annotations

from pathlib import Path

import click

from tritonbuild import api
from tritonbuild.cli.app import app
from tritonbuild.cli.common import _json, existing_dir, json_option, main


@main.command("deploy-snippets")
@click.argument("repository", type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--output",
    "output",
    type=click.Path(path_type=Path),
    default=Path("deploy"),
    show_default=True,
    help="Directory for the generated YAML.",
)
@click.option(
    "--name", default="tritonserver", show_default=True, help="Deployment/Service name (DNS label)."
)
@click.option(
    "--image",
    default=api.default_image("py3"),
    show_default=True,
    help="Serving image: the stock NGC tritonserver image (the flavour with your models' "
    "backends), or one built from Dockerfile.triton with the repository baked in (then leave "
    "--target out).",
)
@click.option(
    "--target",
    help=f"Publish target tritonserver reads itself ({api.url_prefixes(served=True)}); without it the "
    "image's own /models is served.",
)
@click.option(
    "--endpoint-url",
    "endpoint",
    metavar="URL",
    help="The S3 endpoint the pods reach --target at (e.g. http://minio.storage.svc:9000) "
    "[default: AWS S3, or AWS_ENDPOINT_URL when it is not this machine's own address].",
)
@click.option(
    "--gpu-node-selector",
    "gpu_node_selector",
    multiple=True,
    metavar="KEY=VALUE",
    help="Node label GPU pods must have (repeatable) [default: GPU feature discovery's labels "
    "for the GPU the models were planned for].",
)
@click.option(
    "--model-control-mode",
    "control",
    type=click.Choice(["poll", "explicit"]),
    default="poll",
    show_default=True,
    help="poll: the pods follow each publish to --target; explicit: they load what "
    "'publish --notify' names (a headless Service NAME-pods reaches each pod).",
)
@click.option(
    "--repository-poll-secs",
    "poll_secs",
    type=click.IntRange(1),
    default=15,
    show_default=True,
    help="With poll: how often tritonserver re-reads the target.",
)
@click.option(
    "--credentials-secret",
    "secret",
    help="Secret holding the store's credentials [default: NAME-store].",
)
@click.option(
    "--replicas", type=int, default=1, show_default=True, help="Pods, and the autoscaler's minimum."
)
@click.option(
    "--max-replicas", type=int, help="The autoscaler's maximum [default: 3 x --replicas]."
)
@click.option(
    "--queue-target",
    type=click.IntRange(1),
    default=8,
    show_default=True,
    help="Requests waiting in Triton's queues per pod the autoscaler aims at.",
)
@json_option
def deploy_snippets_command(
    repository: Path,
    output: Path,
    name: str,
    image: str,
    target: str | None,
    endpoint: str | None,
    gpu_node_selector: tuple[str, ...],
    control: str,
    poll_secs: int,
    secret: str | None,
    replicas: int,
    max_replicas: int | None,
    queue_target: int,
    as_json: bool,
) -> None:
    """Write Kubernetes manifests for REPOSITORY that run on the stock tritonserver image: a
    ConfigMap with the readiness probe (golden inference) and its goldens, Deployment, Service,
    autoscaler, disruption budget."""
    existing_dir(repository)
    path, budget, left_out, imports, notes = api.deploy_snippets(
        repository,
        output,
        name=name,
        image=image,
        target=target,
        endpoint=endpoint,
        gpu_node_selector=api.node_selector(gpu_node_selector),
        control=control,
        poll_secs=poll_secs,
        secret=secret,
        replicas=replicas,
        max_replicas=max_replicas,
        queue_target=queue_target,
    )
    secret = (secret or f"{name}-store") if target else None
    secret_keys = api.store_secret_keys(target, endpoint) if target else None
    if as_json:
        _json(
            {
                "path": str(path),
                "startup_budget_s": budget,
                "goldens_left_out": left_out,
                "model_imports": list(imports),
                "requirements": str(output / api.REQUIREMENTS_FILE) if imports else None,
                "secret": secret,
                "secret_keys": secret_keys,
                "notes": notes,
            }
        )
        return
    app().out.print(f"wrote {path} (startup budget {budget} s)")
    if target:
        app().out.print(f"create the Secret {secret} first, holding {secret_keys}")
    for note in notes:
        app().out.print(f"note: {note}", markup=False)
    _warn(image, output, imports, left_out)


def _warn(image: str, output: Path, imports: tuple[str, ...], left_out: list[str]) -> None:
    """What the pods will lack: the models' imports the image does not ship, goldens left out."""
    if imports:
        lacks = (
            f"what {image} does not ship (its Python backend has python3 and numpy < 2)"
            if api.image_python(image)
            else f"what {image} must have"
        )
        app().err.print(
            f"warning: the models import {lacks}: {' '.join(imports)}, the versions verified "
            f"here; {output / api.REQUIREMENTS_FILE} says how to build an image with them",
            markup=False,
        )
    if left_out:
        app().err.print(
            f"warning: the probe checks readiness only (no golden: over the ConfigMap's 1 MiB) for "
            f"{', '.join(left_out)}",
            markup=False,
        )
