"""A verified repository published to a target, what a target holds and whether its objects are
whole, a live version rolled back, and the Kubernetes manifests that serve a built repository."""

from __future__ import annotations

from pathlib import Path

from tritonbuild.api.existing import publish_existing
from tritonbuild.core.location import Location
from tritonbuild.errors import PublishError, UsageError, VerifyError
from tritonbuild.publish.inspect import TargetCheck, TargetListing
from tritonbuild.publish.inspect import list_target as _ls
from tritonbuild.publish.inspect import verify_target as _verify
from tritonbuild.publish.k8s import write
from tritonbuild.publish.k8s_fleet import node_selector
from tritonbuild.publish.k8s_pod import REQUIREMENTS_FILE, repository_url
from tritonbuild.publish.notify import failures as notify_failures
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
    "verify_target",
]


def publish(root: Path, target: Location | str, *, reverify: bool = False, **options):
    """reverify: run verify (goldens bit for bit) again right before publishing, instead of trusting
    the report on disk; the fresh report is the one the gate reads. A repository without our
    manifest (hand-written) is verified as Triton would judge it and published through a manifest
    made from what is there."""
    if Path(root).is_dir() and not (Path(root) / MANIFEST_NAME).exists():
        return publish_existing(Path(root), target, **options)
    if reverify:
        if options.get("skip_verify"):
            raise UsageError(
                "--reverify and --skip-verify contradict each other", hint="pass one of them"
            )
        # NOTE: imported here: only --reverify pays for verify's modules (numpy, the server)
        from tritonbuild.api.checking import verify_repository

        # NOTE: with --require-reproducible the fresh report carries a fresh rebuild check too
        report = verify_repository(
            Path(root),
            progress=options.get("progress"),
            rebuild=bool(options.get("require_reproducible")),
        )
        if not report.passed:
            raise PublishError(
                "--reverify: the repository fails verification now, whatever its report said",
                where=str(root),
                hint=f"see 'tritonbuild verify {root}'; fix, rebuild, publish",
            )
    options.pop("progress", None)
    return _publish(root, target, **options)


def list_target(target: Location | str, *, endpoint_url: str | None = None) -> TargetListing:
    return _ls(target, endpoint_url=endpoint_url)


def rollback(target: Location | str, model: str, to: int, **options) -> RollbackResult:
    return _rollback(target, model, to, **options)


def verify_target(target: Location | str, *, endpoint_url: str | None = None) -> TargetCheck:
    return _verify(target, endpoint_url=endpoint_url)


def deploy_snippets(
    repository: Path, out: Path, **options
) -> tuple[Path, int, list[str], tuple[str, ...], list[str]]:
    """Kubernetes YAML for a built repository: (path, startup budget s, models the probe has no
    golden of, what the models import that the image must add: OUT/requirements-models.txt, what
    the operator must know: the ConfigMap's lifecycle, the store's endpoint, drains, root, GPUs)."""
    return write(Path(repository), read_repository(repository, VerifyError), out, **options)


def store_secret_keys(target: str, endpoint: str | None = None) -> str:
    """What the pods' Secret must hold for deploy-snippets --target (its store's credentials, as the
    store's driver names them)."""
    return repository_url(target, endpoint)[0].secret_keys
