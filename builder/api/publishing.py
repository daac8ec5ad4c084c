"""A verified repository published to a target, what a target holds and whether its objects are
whole, a live version rolled back, and the Kubernetes manifests that serve a built repository."""

from __future__ import annotations

from pathlib import Path

from tritonbuild.api.existing import publish_existing
from tritonbuild.api.options import Progress
from tritonbuild.core.location import Location
from tritonbuild.core.progress import SILENT, Reporter
from tritonbuild.errors import PublishError, UsageError, VerifyError
from tritonbuild.publish.inspect import TargetCheck, TargetListing
from tritonbuild.publish.inspect import list_target as _ls
from tritonbuild.publish.inspect import verify_target as _verify
from tritonbuild.publish.k8s import write
from tritonbuild.publish.k8s_fleet import STOCK_IMAGE, DeployOptions, node_selector
from tritonbuild.publish.k8s_pod import REQUIREMENTS_FILE, repository_url
from tritonbuild.publish.models import PublishReceipt
from tritonbuild.publish.notify import failures as notify_failures
from tritonbuild.publish.objects import target_url
from tritonbuild.publish.protocol import publish as _publish
from tritonbuild.publish.rollback import RollbackResult
from tritonbuild.publish.rollback import rollback as _rollback
from tritonbuild.repository.manifest import MANIFEST_NAME, read_repository

__all__ = [
    "REQUIREMENTS_FILE",
    "deploy_snippets",
    "list_target",
    "node_selector",
    "notify_failures",
    "publish",
    "rollback",
    "store_secret_keys",
    "target_url",
    "verify_target",
]


def publish(
    root: Path,
    target: Location | str,
    *,
    endpoint_url: str | None = None,
    skip_verify: bool = False,
    keep: int | None = None,
    notify: tuple[str, ...] = (),
    dry_run: bool = False,
    break_lock: bool = False,
    reverify: bool = False,
    require_reproducible: bool = False,
    reporter: Reporter = SILENT,
    progress: Progress | None = None,
) -> PublishReceipt:
    """Publish the repository at root to target (a Location, or a URL parsed with endpoint_url)
    without exposing half versions. A repository without our manifest (hand-written) is verified as
    Triton would judge it and published through a manifest made from what is there.

    endpoint_url: the S3-compatible endpoint of a URL target. skip_verify: publish without a
    passing verification (recorded at the target). keep: afterwards keep only the keep newest
    complete versions of each model (never the live one). notify: tritonservers (URL[#MODEL,...])
    asked to load the published models. dry_run: only say what would be uploaded, skipped,
    switched and pruned. break_lock: remove a lock a publish that died elsewhere left.
    reverify: run verify (goldens bit for bit) again right before publishing instead of trusting
    the report on disk; the fresh report is the one the gate reads. require_reproducible: refuse
    unless verify --rebuild found every artefact byte-identical. reporter: the transfer's progress
    (bars, lines). progress: verify's progress lines (reverify, a hand-written repository)."""
    if Path(root).is_dir() and not (Path(root) / MANIFEST_NAME).exists():
        return publish_existing(
            Path(root),
            target,
            endpoint_url=endpoint_url,
            skip_verify=skip_verify,
            keep=keep,
            notify=notify,
            dry_run=dry_run,
            break_lock=break_lock,
            reporter=reporter,
            require_reproducible=require_reproducible,
            progress=progress,
        )
    if reverify:
        _reverify(Path(root), skip_verify, require_reproducible, progress)
    return _publish(
        root,
        target,
        endpoint_url=endpoint_url,
        skip_verify=skip_verify,
        keep=keep,
        notify=notify,
        dry_run=dry_run,
        break_lock=break_lock,
        reporter=reporter,
        require_reproducible=require_reproducible,
    )


def _reverify(
    root: Path, skip_verify: bool, require_reproducible: bool, progress: Progress | None
) -> None:
    """publish --reverify: verify again now; a failure refuses the publish."""
    if skip_verify:
        raise UsageError(
            "--reverify and --skip-verify contradict each other", hint="pass one of them"
        )
    # NOTE: imported here: only --reverify pays for verify's modules (numpy, the server)
    from tritonbuild.api.checking import verify_repository

    # NOTE: with --require-reproducible the fresh report carries a fresh rebuild check too
    report = verify_repository(root, progress=progress, rebuild=require_reproducible)
    if not report.passed:
        raise PublishError(
            "--reverify: the repository fails verification now, whatever its report said",
            where=str(root),
            hint=f"see 'tritonbuild verify {root}'; fix, rebuild, publish",
        )


def list_target(target: Location | str, *, endpoint_url: str | None = None) -> TargetListing:
    """The models at a publish target: versions present and complete, the live one, notes on
    interrupted publishes, the lock; endpoint_url: the S3-compatible endpoint of a URL target."""
    return _ls(target, endpoint_url=endpoint_url)


def rollback(
    target: Location | str,
    model: str,
    to: int,
    *,
    also: dict[str, int] | None = None,
    endpoint_url: str | None = None,
    break_lock: bool = False,
    notify: tuple[str, ...] = (),
) -> RollbackResult:
    """Make the complete version to of model live again at target, with the config it was verified
    with. also: other models switched in the same rollback (name → version: an ensemble with its
    steps); endpoint_url: the S3-compatible endpoint of a URL target; break_lock: remove a lock a
    publish that died elsewhere left; notify: tritonservers asked to load the model after the
    switch."""
    return _rollback(
        target,
        model,
        to,
        also=also,
        endpoint_url=endpoint_url,
        break_lock=break_lock,
        notify=notify,
    )


def verify_target(target: Location | str, *, endpoint_url: str | None = None) -> TargetCheck:
    """Every object a target's manifest lists: present, its size, its sha256; endpoint_url: the
    S3-compatible endpoint of a URL target."""
    return _verify(target, endpoint_url=endpoint_url)


def deploy_snippets(
    repository: Path,
    out: Path,
    *,
    name: str = "tritonserver",
    image: str = STOCK_IMAGE,
    target: str | None = None,
    endpoint: str | None = None,
    gpu_node_selector: dict[str, str] | None = None,
    control: str = "poll",
    poll_secs: int = 15,
    secret: str | None = None,
    replicas: int = 1,
    max_replicas: int | None = None,
    queue_target: int = 8,
) -> tuple[Path, int, list[str], tuple[str, ...], list[str]]:
    """Kubernetes YAML for a built repository at out/NAME.yaml: (its path, the startup budget in
    seconds, models the probe has no golden of, what the models import that the image must add:
    out/requirements-models.txt, what the operator must know: the ConfigMap's lifecycle, the
    store's endpoint, drains, root, GPUs).

    name: the Deployment's and Service's name (a DNS label). image: the serving image (the stock
    NGC one, or one with the repository baked in). target: the publish target the pods' tritonserver
    reads (None: the image's own /models). endpoint: the S3 endpoint the pods reach target at.
    gpu_node_selector: node labels GPU pods must have (None: GPU feature discovery's for the planned
    GPU). control: 'poll' (follow each publish) or 'explicit' (load what publish --notify names).
    poll_secs: how often a polling tritonserver re-reads target. secret: the Secret holding the
    store's credentials (None: NAME-store). replicas: pods, and the autoscaler's minimum.
    max_replicas: the autoscaler's maximum (None: 3 × replicas). queue_target: requests waiting
    in Triton's queues per pod the autoscaler aims at."""
    options = DeployOptions(
        name=name,
        image=image,
        target=target,
        endpoint=endpoint,
        gpu_node_selector=gpu_node_selector,
        control=control,
        poll_secs=poll_secs,
        secret=secret,
        replicas=replicas,
        max_replicas=max_replicas,
        queue_target=queue_target,
    )
    return write(Path(repository), read_repository(repository, VerifyError), out, options)


def store_secret_keys(target: str, endpoint: str | None = None) -> str:
    """What the pods' Secret must hold for deploy-snippets --target (its store's credentials, as the
    store's driver names them)."""
    return repository_url(target, endpoint)[0].secret_keys
