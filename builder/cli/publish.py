"""publish, ls, rollback, deploy-snippets."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.table import Table

from tritonbuild.cli.app import Application, PlainProgress, app
from tritonbuild.cli.common import (
    _json,
    endpoint_option,
    existing_dir,
    json_option,
    main,
    print_table,
)
from tritonbuild.core.stores import parse_location


class _TransferReporter:
    """Publish progress: rich bars with bytes/s on a terminal; plain lines every few seconds in logs (a
    400 MB upload in CI says how far it is); nothing with --json or --quiet."""

    def __init__(self, application: Application):
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        self.enabled = not (application.json or application.quiet)
        self.rich = self.enabled and application.err.is_terminal
        self.console = application.err
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=application.err,
            transient=True,
        )
        self.task = None
        self.plain: PlainProgress | None = None
        self.total = self.done = 0
        self.description = ""

    def status(self, message: str) -> None:
        if self.enabled:
            self.console.print(message)

    def start_transfer(self, total_bytes: int, description: str) -> None:
        if self.rich:
            self.progress.start()
            self.task = self.progress.add_task(description, total=total_bytes)
        elif self.enabled:
            self.total, self.done, self.description = total_bytes, 0, description
            self.plain = PlainProgress(self.console).__enter__()
            self.plain(self._line())

    def _line(self) -> str:
        unit, scale = ("MiB", 1 << 20) if self.total >= 1 << 20 else ("KiB", 1 << 10)
        pct = 100 * self.done // self.total if self.total else 100
        return (
            f"{self.description}: {self.done / scale:.1f}/{self.total / scale:.1f} {unit} ({pct}%)"
        )

    def advance(self, nbytes: int) -> None:
        if self.rich and self.task is not None:
            self.progress.advance(self.task, nbytes)
        elif self.plain is not None:
            self.done += nbytes
            self.plain(self._line())

    def end_transfer(self) -> None:
        if self.rich:
            self.progress.stop()
            self.task = None
        elif self.plain is not None:
            self.plain.__exit__(None, None, None)
            self.plain = None
            self.console.print(f"{self._line()} done")


@main.command("publish")
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
    help="After publishing, keep only the K newest "
    "complete versions of each model (never the live one); K >= 1.",
)
@click.option(
    "--notify",
    multiple=True,
    metavar="URL[#MODEL,...]",
    help="Ask this tritonserver (explicit model control) to load each published model it serves (#MODEL,... "
    "names them; else what its repository index shows). One that cannot run a model another server "
    "serves is reported, not a failure. Repeatable.",
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
    """Publish a verified repository to TARGET (file://, s3://, gs://, az://) without exposing half versions."""
    from tritonbuild import api
    from tritonbuild.errors import PublishError

    if skip_verify:
        app().err.print(
            "[bold yellow]WARNING[/]: --skip-verify: publishing an UNVERIFIED repository; the target "
            "manifest records it",
            markup=True,
        )
    existing_dir(repository)
    where = parse_location(target, endpoint_url)
    receipt = api.publish(
        repository,
        where,
        skip_verify=skip_verify,
        keep=keep,
        notify=notify,
        dry_run=dry_run,
        break_lock=break_lock,
        reverify=reverify,
        reporter=_TransferReporter(app()),
        require_reproducible=require_reproducible,
    )
    from tritonbuild.publish.notify import failures

    failed = failures(receipt.notified)
    error = (
        PublishError(
            f"published, but {len(failed)} server(s) did not load the models",
            hint="see the notify lines above; the target itself is complete",
        )
        if failed
        else None
    )
    if as_json:
        # one JSON document on stdout: the receipt, with the error (exit 7) beside it when a notify failed
        doc = receipt.model_dump(mode="json")
        if error:
            doc["error"] = error.to_dict()
        _json(doc)
        if error:
            sys.exit(error.exit_code)
        return
    else:
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
            f"{verb} manifest {receipt.manifest_digest[:16]} to {receipt.target} "
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
    if error:
        raise error


@main.command("ls")
@click.argument("target")
@endpoint_option
@json_option
def ls_command(target: str, endpoint_url: str | None, as_json: bool) -> None:
    """Models at a publish target: versions present and complete, the live one, notes on interrupted publishes."""
    from tritonbuild import api

    info = api.list_target(parse_location(target, endpoint_url))
    if as_json:
        _json(info)
        return
    if not info.models:
        app().out.print(f"nothing published here: {info.target} holds no tritonbuild models")
        app().out.print(f"publish one with: tritonbuild publish OUT {info.target}")
        if info.lock:
            _print_lock(info.lock)
        return
    table = Table("model", "live", "complete", "present", "verification", "notes", box=None)
    for row in info.models:
        live = ",".join(map(str, row.serving)) or str(row.live or "-")
        table.add_row(
            row.name,
            live,
            ",".join(map(str, row.complete)) or "-",
            ",".join(map(str, row.present)) or "-",
            row.verification or "-",
            "; ".join(row.notes),
        )
    print_table(table)
    app().out.print(f"manifest sha256: {info.manifest_sha256 or '-'}")
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
        f"lock: held by {lock['holder'] or lock['host']} pid {lock['pid']} since {lock['since']}, {state}"
    )


@main.command("rollback")
@click.argument("target")
@click.argument("model")
@click.option(
    "--to", "to", type=int, required=True, metavar="N", help="The complete version to make live."
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
    help="Ask this tritonserver (explicit model control) to load MODEL after the switch; repeatable.",
)
@json_option
def rollback_command(
    target: str,
    model: str,
    to: int,
    endpoint_url: str | None,
    break_lock: bool,
    notify: tuple[str, ...],
    as_json: bool,
) -> None:
    """Make an earlier complete version of MODEL live again at TARGET, with the config it was verified with."""
    import sys

    from tritonbuild import api
    from tritonbuild.errors import PublishError

    result = api.rollback(
        parse_location(target, endpoint_url), model, to, break_lock=break_lock, notify=notify
    )
    if as_json:
        _json(result)
    else:
        app().out.print(
            f"{model}: live version {result.previous} → {result.live} at {result.target} "
            f"(config {result.config_restored}"
            f"{', a different interface' if result.interface_changed else ''})"
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
    from tritonbuild.publish.notify import failures

    if failures(result.notified):
        sys.exit(PublishError.exit_code)


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
    default="nvcr.io/nvidia/tritonserver:25.12-py3",
    show_default=True,
    help="Serving image: the stock NGC tritonserver image (the flavour with your models' backends), or "
    "one built from Dockerfile.triton with the repository baked in (then leave --target out).",
)
@click.option(
    "--target",
    help="Publish target tritonserver reads itself (s3://, gs://, az://); without it the "
    "image's own /models is served.",
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
    control: str,
    poll_secs: int,
    secret: str | None,
    replicas: int,
    max_replicas: int | None,
    queue_target: int,
    as_json: bool,
) -> None:
    """Write Kubernetes manifests for REPOSITORY that run on the stock tritonserver image: a ConfigMap with the
    readiness probe (golden inference) and its goldens, Deployment, Service, autoscaler, disruption budget."""
    from tritonbuild import api
    from tritonbuild.publish.k8s_pod import SECRET_KEYS, repository_url

    existing_dir(repository)
    path, budget, left_out = api.deploy_snippets(
        repository,
        output,
        name=name,
        image=image,
        target=target,
        replicas=replicas,
        max_replicas=max_replicas,
        control=control,
        poll_secs=poll_secs,
        secret=secret,
        queue_target=queue_target,
    )
    secret_keys = SECRET_KEYS[repository_url(target)[0]] if target else None
    if as_json:
        _json(
            {
                "path": str(path),
                "startup_budget_s": budget,
                "goldens_left_out": left_out,
                "secret": (secret or f"{name}-store") if target else None,
                "secret_keys": secret_keys,
            }
        )
        return
    app().out.print(f"wrote {path} (startup budget {budget} s)")
    if target:
        app().out.print(
            f"create the Secret {secret or name + '-store'} first, holding {secret_keys}"
        )
    if left_out:
        app().err.print(
            f"warning: the probe checks readiness only (no golden: over the ConfigMap's 1 MiB) for "
            f"{', '.join(left_out)}",
            markup=False,
        )
