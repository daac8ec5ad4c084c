"""The publish gate: only a repository whose verification report passed, for this very manifest,
signed with the key (core/signing.py), is published."""

from __future__ import annotations

from pathlib import Path

from tritonbuild.core.signing import KEY_ENV, key_source, report_key
from tritonbuild.core.signing import check as check_signature
from tritonbuild.errors import PublishError, UsageError
from tritonbuild.repository.manifest import REPORT_NAME, Manifest
from tritonbuild.verify.models import VerificationReport


def gate(
    root: Path, manifest: Manifest, skip_verify: bool, require_reproducible: bool = False
) -> str:
    if skip_verify and require_reproducible:
        raise UsageError(
            "--require-reproducible needs the verification report: it cannot go with --skip-verify",
            hint="drop one of them",
        )
    if skip_verify:
        return "skipped"
    try:
        report = VerificationReport.model_validate_json((root / REPORT_NAME).read_bytes())
    except (FileNotFoundError, ValueError):
        raise PublishError(
            f"{root} has no verification report",
            where=str(root),
            hint=f"run 'tritonbuild verify {root}' first (or --skip-verify, recorded at the target)",
        ) from None
    _check_signature(root, report)
    if report.manifest_digest != manifest.digest:
        raise PublishError(
            "the verification report is for another build of this repository (manifest digest "
            f"{report.manifest_digest[:16]} != {manifest.digest[:16]})",
            where=str(root),
            hint=f"run 'tritonbuild verify {root}' again",
        )
    if not report.passed:
        raise PublishError(
            "the repository failed verification",
            where=str(root),
            hint=f"fix what 'tritonbuild verify {root}' reports, rebuild, verify, then publish",
        )
    if require_reproducible:
        rebuild = report.reproducibility
        if rebuild is None:
            raise PublishError(
                "--require-reproducible: the verification report has no rebuild check",
                where=str(root),
                hint=f"run 'tritonbuild verify {root} --rebuild' first",
            )
        if rebuild.differ:
            raise PublishError(
                f"--require-reproducible: a rebuild differs: {rebuild.differ[0]}"
                + (f" (and {len(rebuild.differ) - 1} more)" if len(rebuild.differ) > 1 else ""),
                where=str(root),
                hint="make the build deterministic (see the files named), rebuild, "
                "verify --rebuild",
            )
    return "passed"


def _check_signature(root: Path, report: VerificationReport) -> None:
    """Only a report signed with the key (TRITONBUILD_REPORT_KEY, else this machine's) passes: an
    edited, copied or stale one never publishes, key or no key set."""
    key = report_key()
    if key is not None and check_signature(report.signed_payload(), report.signature, key):
        return
    what = (
        "cannot be checked: no key here"
        if key is None
        else "is not signed"
        if report.signature is None
        else f"does not match its signature with {key_source()} (edited after verify, or signed elsewhere)"
    )
    raise PublishError(
        f"the verification report {what}",
        where=str(root / REPORT_NAME),
        hint=f"run 'tritonbuild verify {root}' here, or set {KEY_ENV} to the same secret where "
        "verify and publish run (CI jobs), or pass --reverify to verify again now",
    )
