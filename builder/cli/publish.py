"""publish, ls, rollback: a verified repository to a target, what a target holds, a live version
switched back."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.table import Table

from tritonbuild import api
from tritonbuild.cli.app import app
from tritonbuild.cli.common import (
    _json,
    endpoint_option,
    existing_dir,
    json_option,
    main,
    print_table,
)
from tritonbuild.cli.transfer import TransferReporter
from tritonbuild.errors import PublishError


@main.command(
    "publish",
    help=f"Publish a verified repository to TARGET ({api.url_prefixes()}) without exposing half "
    "versions.",
)
@click.argument("repository", type=click.Path(path_type=Path))
@click.argument("target")
@endpoint_option
@click.option(
    "--skip-verify",
    is_flag=True,
    help="Publish without a passing verification (loud; recorded at the target).",
)
@click.option(
    "--keep",
    type=click.IntRange(min=1),
    metavar="K",
    help="Keep only the K newest complete versions of each model, pruned before the upload (never a "
    "live or served one; the one live when the publish starts goes at the next publish); K >= 1.",
)
@click.option(
    "--notify",
    multiple=True,
    metavar="URL[#MODEL,...]",
    help="Ask this tritonserver (explicit model control) to load each published model it serves "
    "(#MODEL,... names them; else what its repository index shows). One that cannot run a model "
    "another server serves is reported, not a failure. Repeatable.",
)
@click.option(
    "--dry-run", is_flag=True, help="Show what would be uploaded, skipped, switched and pruned."
)
@click.option(
    "--break-lock",
    is_flag=True,
    help="Remove a lock left by a publish that died on another machine.",
)
@click.option(
    "--reverify",
    is_flag=True,
    help="Run verify again (live, goldens bit for bit) right before "
    "publishing instead of trusting the report on disk.",
)
@click.option(
    "--require-reproducible",
    is_flag=True,
    help="Refuse unless 'verify --rebuild' found every artefact "
    "byte-identical (engines excepted: goldens decide).",
)
@json_option
def publish_command(
    repository: Path,
    target: str,
    endpoint_url: str | None,
    skip_verify: bool,
    keep: int | None,
    notify: tuple[str, ...],
    dry_run: bool,
    break_lock: bool,
    reverify: bool,
    require_reproducible: bool,
    as_json: bool,
) -> None:
    if skip_verify:
        app().err.print(
            "[bold yellow]WARNING[/]: --skip-verify: publishing an UNVERIFIED repository; the "
            "target manifest records it",
            markup=True,
        )
    existing_dir(repository)
    where = api.parse_location(target, endpoint_url)
    receipt = api.publish(
        repository,
        where,
        skip_verify=skip_verify,
        keep=keep,
        notify=notify,
        dry_run=dry_run,
        break_lock=break_lock,
        reverify=reverify,
        reporter=TransferReporter(app()),
        require_reproducible=require_reproducible,
    )
    error = _notify_error(receipt)
    if as_json:
        # one JSON document on stdout: the receipt, with the error (exit 7) beside it when a
        # notify failed
        doc = receipt.model_dump(mode="json")
        if error:
            doc["error"] = error.to_dict()
        _json(doc)
        if error:
            sys.exit(error.exit_code)
        return
    _print_receipt(receipt, dry_run)
    if error:
        raise error


def _notify_error(receipt):
    """A PublishError when a notified server did not load the models (the target is complete)."""
    failed = api.notify_failures(receipt.notified)
    if not failed:
        return None
    return PublishError(
        f"published, but {len(failed)} server(s) did not load the models",
        hint="see the notify lines above; the target itself is complete",
    )


def _print_receipt(receipt, dry_run: bool) -> None:
    """What was done per file (skips only on a dry run), the manifest, the notify verdicts."""
    table = Table("model", "version", "action", "path", "bytes", "detail", box=None)
    for action in receipt.actions:
        if action.action == "skip" and not dry_run:
            continue
        table.add_row(
            action.model,
            str(action.version or "-"),
            action.action,
            action.path,
            str(action.bytes or ""),
            action.detail,
        )
    print_table(table)
    verb = "would publish" if dry_run else "published"
    app().out.print(
        f"{verb} repository manifest {receipt.manifest_digest[:16]} (the build's "
        f"tritonbuild-manifest.json; 'ls' shows the target's own) to {receipt.target} "
        f"({receipt.uploaded_bytes} bytes uploaded in {receipt.seconds:.1f}s; verification "
        f"{receipt.verification})"
    )
    app().out.print(f"tritonserver --model-repository={receipt.triton_url}")
    for n in receipt.notified:
        verdict = (
            "skipped"
            if n.get("skipped")
            else "ok"
            if n["ok"]
            else "cannot run here"
            if n.get("cannot_run")
            else "FAILED"
        )
        app().out.print(f"notify {n['server']} load {n['model']}: {verdict} {n['message']}")


@main.command("ls")
@click.argument("target")
@endpoint_option
@json_option
def ls_command(target: str, endpoint_url: str | None, as_json: bool) -> None:
    """Models at a publish target: versions present and complete, the live one, notes on
    interrupted publishes."""
    # NOTE: a directory holding a publish target (a file:// target by its path, a synced copy) is one
    info = api.list_target(api.parse_location(api.target_url(target) or target, endpoint_url))
    if as_json:
        _json(info)
        return
    if not info.models:
        app().out.print(f"nothing published here: {info.target} holds no tritonbuild models")
        app().out.print(f"publish one with: tritonbuild publish OUT {info.target}")
        if info.lock:
            _print_lock(info.lock)
        return
    table = Table(
        "model", "live", "complete", "present", "verification", "switched", "notes", box=None
    )
    for row in info.models:
        live = ",".join(map(str, row.serving)) or str(row.live or "-")
        table.add_row(
            row.name,
            live,
            ",".join(map(str, row.complete)) or "-",
            ",".join(map(str, row.present)) or "-",
            row.verification or "-",
            row.switched_at or "-",
            "; ".join(row.notes),
        )
    print_table(table)
    app().out.print(
        f"target manifest sha256: {info.manifest_sha256 or '-'} (the target's own "
        "tritonbuild-manifest.json, not the repository manifest publish names)"
    )
    _print_lock(info.lock)
    app().out.print(f"tritonserver --model-repository={info.triton_url}")


def _print_lock(lock: dict | None) -> None:
    if not lock:
        app().out.print("lock: none")
        return
    state = {
        "live": f"lease until {lock['expires_at']}",
        "expired": f"lease EXPIRED at {lock['expires_at']} (the next publish breaks it)",
        "no-expiry": "no expiry (--break-lock removes it)",
    }[lock["state"]]
    app().out.print(
        f"lock: held by {lock['holder'] or lock['host']} pid {lock['pid']} since {lock['since']}, "
        f"{state}"
    )


def _model_versions(values: tuple[str, ...]) -> dict[str, int]:
    out = {}
    for value in values:
        name, _, version = value.partition("=")
        if not name or not version.isdigit():
            raise click.BadParameter(f"{value!r}: expected MODEL=N (e.g. pipeline=1)")
        out[name] = int(version)
    return out


@main.command("rollback")
@click.argument("target")
@click.argument("model")
@click.option(
    "--to", "to", type=int, required=True, metavar="N", help="The complete version to make live."
)
@click.option(
    "--also",
    "also",
    multiple=True,
    metavar="MODEL=N",
    callback=lambda _ctx, _param, value: _model_versions(value),
    help="Switch this model to version N in the same rollback (an ensemble with its steps); "
    "repeatable.",
)
@endpoint_option
@click.option(
    "--break-lock",
    is_flag=True,
    help="Remove a lock left by a publish that died on another machine.",
)
@click.option(
    "--notify",
    "notify",
    multiple=True,
    metavar="URL",
    help="Ask this tritonserver (explicit model control) to load MODEL after the switch; "
    "repeatable.",
)
@json_option
def rollback_command(
    target: str,
    model: str,
    to: int,
    also: dict[str, int],
    endpoint_url: str | None,
    break_lock: bool,
    notify: tuple[str, ...],
    as_json: bool,
) -> None:
    """Make an earlier complete version of MODEL live again at TARGET, with the config it was
    verified with."""
    result = api.rollback(
        api.parse_location(api.target_url(target) or target, endpoint_url),
        model,
        to,
        also=also,
        break_lock=break_lock,
        notify=notify,
    )
    if as_json:
        _json(result)
    else:
        for row in [result, *(result.also or [])]:
            app().out.print(
                f"{row.model}: live version {row.previous} → {row.live} at {result.target} "
                f"(config {row.config_restored}"
                f"{', a different interface' if row.interface_changed else ''})"
            )
        if result.lock_broken:
            app().err.print(f"warning: {result.lock_broken}", markup=False)
        for n in result.notified:
            verdict = (
                f"skipped: {n['message']}"
                if n.get("skipped")
                else "loaded"
                if n["ok"]
                else f"cannot run here: {n['message']}"
                if n.get("cannot_run")
                else f"FAILED: {n['message']}"
            )
            app().out.print(f"  notify {n['server']}: {verdict}")
    if api.notify_failures(result.notified):
        sys.exit(PublishError.exit_code)
