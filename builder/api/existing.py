"""publish of a hand-written repository (no tritonbuild manifest): verified as Triton would judge
it, then published from a linked copy holding a manifest made from its files; nothing is written
into the repository itself."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from tritonbuild.api.options import Progress
from tritonbuild.backends import REGISTRY
from tritonbuild.core.fsutil import write_atomic
from tritonbuild.core.hashing import pretty_json
from tritonbuild.core.location import Location
from tritonbuild.core.progress import SILENT, Reporter
from tritonbuild.errors import PublishError
from tritonbuild.publish.models import PublishReceipt
from tritonbuild.publish.protocol import publish
from tritonbuild.repository.manifest import MANIFEST_NAME, NOT_IN_MANIFEST, REPORT_NAME
from tritonbuild.verify.models import VerificationReport


def publish_existing(
    root: Path,
    target: Location | str,
    *,
    endpoint_url: str | None = None,
    skip_verify: bool = False,
    keep: int | None = None,
    notify: tuple[str, ...] = (),
    dry_run: bool = False,
    break_lock: bool = False,
    reporter: Reporter = SILENT,
    require_reproducible: bool = False,
    progress: Progress | None = None,
) -> PublishReceipt:
    """Verify (Triton's rules, Triton's core, hand-written Python models loaded) unless
    skip_verify, then publish a linked copy holding a manifest made from the files and the report
    for it. progress: the verification's progress lines; the other keywords are api.publish's,
    given to the publish itself."""
    # NOTE: verify's and the assembler's modules imported where a hand-written repository is
    # published: publish, ls and rollback of built ones do not pay for them (0.16 s, measured)
    from tritonbuild.verify.static import model_dirs

    if not model_dirs(root):
        raise PublishError(
            f"{root} is not a tritonbuild repository (no {MANIFEST_NAME}) and holds no model "
            "directory",
            where=str(root),
            hint="build one with 'tritonbuild build RECIPES -o DIR', "
            "or pass a Triton model repository (one directory per model)",
        )
    report = None if skip_verify else _verified(root, progress)
    staging = Path(tempfile.mkdtemp(prefix="tritonbuild-publish-"))
    try:
        copy = staging / "repository"
        _write_with_manifest(root, copy, report)
        return publish(
            copy,
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
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _verified(root: Path, progress) -> VerificationReport:
    """The report of Triton's rules over root; a refusal names the first finding."""
    from tritonbuild.verify.static import lint

    report = lint(root, progress=progress)
    if not report.passed:
        first = next(check for check in report.static if not check.ok)
        raise PublishError(
            f"{root} fails verification as Triton would judge it: {first.model}: {first.check}: "
            f"{first.detail}",
            where=str(root),
            hint=f"'tritonbuild verify {root}' shows every finding",
        )
    return report


def _write_with_manifest(root: Path, copy: Path, report: VerificationReport | None) -> None:
    """root linked into copy, with a manifest of its files and the report signed for it."""
    from tritonbuild.repository.assemble import write_manifest
    from tritonbuild.repository.existing import existing_models, file_entries

    shutil.copytree(
        root,
        copy,
        copy_function=_link_or_copy,
        ignore=shutil.ignore_patterns("__pycache__", *NOT_IN_MANIFEST),
    )
    files = file_entries(copy)
    manifest = write_manifest(
        copy, REGISTRY.toolchain(), existing_models(copy, files, PublishError), known=files
    )
    if report is not None:
        report = report.model_copy(
            update={"manifest_digest": manifest.digest, "signature": None}
        ).signed()
        write_atomic(copy / REPORT_NAME, pretty_json(report.model_dump(mode="json")))


def _link_or_copy(src: str, dest: str) -> str:
    """A hard link where the filesystem allows (publishing only reads), else a copy."""
    try:
        os.link(src, dest)
        return dest
    except OSError:
        return shutil.copy2(src, dest)
