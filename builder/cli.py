"""Thin click CLI: parse options, call builder.api, render. Exit codes come from builder.errors."""

from __future__ import annotations

import json
import signal
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from builder import __version__
from builder.errors import MultipleErrors, TritonBuildError

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


class Group(click.Group):
    """Turns every TritonBuildError into its exit code and message; Ctrl-C into 130; bugs into 1."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except TritonBuildError as e:
            _emit_error(ctx, e)
            sys.exit(e.exit_code)
        except (KeyboardInterrupt, click.Abort):
            err.print("interrupted")
            sys.exit(130)
        except click.exceptions.Exit:
            raise
        except click.ClickException:
            raise
        except Exception:  # noqa: BLE001 - a bug: show the traceback and ask for a report
            err.print_exception()
            err.print("[bold red]internal error[/]: this is a tritonbuild bug; please report it with the "
                      "traceback above")
            sys.exit(1)


def _emit_error(ctx: click.Context, e: TritonBuildError) -> None:
    wants_json = ctx.meta.get("json", False)
    if wants_json:
        click.echo(json.dumps(e.to_dict(), indent=2, sort_keys=True))
        return
    errors = e.errors if isinstance(e, MultipleErrors) else [e]
    for one in errors:
        where = f"{one.where}: " if one.where else ""
        err.print(f"[bold red]error[/] ({one.kind}): {where}{one.message}", markup=True)
        if one.hint:
            err.print(f"  [dim]fix:[/] {one.hint}")


def _json(obj) -> None:
    click.echo(json.dumps(obj, indent=2, sort_keys=True))


@contextmanager
def _progress(enabled: bool):
    """A rich status line for long work; silent for --json and when stderr is not a terminal."""
    if not enabled or not err.is_terminal:
        yield lambda msg: None
        return
    with err.status("working") as status:
        yield lambda msg: status.update(msg)


def _remember_json(ctx: click.Context, _param, value: bool) -> bool:
    ctx.meta["json"] = value  # NOTE: ctx.meta is shared with the group, which renders errors
    return value


endpoint_option = click.option("--endpoint-url", envvar="AWS_ENDPOINT_URL", metavar="URL",
                               help="S3-compatible endpoint [env AWS_ENDPOINT_URL].")
json_option = click.option("--json", "as_json", is_flag=True, callback=_remember_json,
                           help="Machine-readable output on stdout.")
recipes_arg = click.argument("recipes", nargs=-1, required=True, type=click.Path(path_type=Path))


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tritonbuild")
def main() -> None:
    """Build, verify and serve versioned Triton model repositories from recipes."""


@main.command("validate")
@recipes_arg
@json_option
def validate_command(recipes: tuple[Path, ...], as_json: bool) -> None:
    """Check recipe files (or folders of them) without building anything."""
    from builder import api

    loaded = api.validate(list(recipes))
    if as_json:
        _json({"valid": [{"path": str(lr.path), "name": lr.recipe.name, "version": lr.recipe.version}
                         for lr in loaded]})
        return
    for lr in loaded:
        out.print(f"ok  {lr.path}  ({lr.recipe.name} v{lr.recipe.version}, {lr.recipe.backend})")


cache_url_option = click.option("--cache-url", envvar="TRITONBUILD_CACHE_URL", metavar="URL",
                                help="Shared remote build cache (s3://, gs://, az://, file://) "
                                     "[env TRITONBUILD_CACHE_URL].")
changed_since_option = click.option("--changed-since", metavar="REV",
                                    help="Only recipes whose inputs changed since this git revision.")
cache_dir_option = click.option("--cache-dir", type=click.Path(path_type=Path), envvar="TRITONBUILD_CACHE_DIR",
                                help="Local build cache [env TRITONBUILD_CACHE_DIR; default ~/.cache/tritonbuild].")


@main.command("plan")
@recipes_arg
@click.option("--matrix", "matrix", type=click.Choice(["github", "gitlab"]), default=None, flag_value="github",
              is_flag=False, help="Print a CI matrix of the recipes that need building (github: {include: [...]}, "
                                  "gitlab: {parallel: {matrix: [...]}}).")
@cache_dir_option
@cache_url_option
@changed_since_option
@json_option
def plan_command(recipes: tuple[Path, ...], matrix: str | None, cache_dir: Path | None, cache_url: str | None,
                 changed_since: str | None, as_json: bool) -> None:
    """Show what would be built: steps, their inputs and cache keys, the toolchain, LLM memory plans."""
    from builder import api

    if matrix:
        entries = api.build_matrix(list(recipes), cache_dir=cache_dir, cache_url=cache_url,
                                   changed_since=changed_since)
        if matrix == "github":
            click.echo(json.dumps({"include": entries}, sort_keys=True))
        else:
            click.echo(json.dumps({"parallel": {"matrix": [{"RECIPE": e["recipe"], "GPU": e["gpu"]}
                                                           for e in entries]}}, sort_keys=True))
        return
    plan = api.plan(list(recipes))
    if as_json:
        _json(plan.model_dump(mode="json"))
        return
    table = Table("model", "version", "backend", "step", "cache key", box=None)
    for m in plan.models:
        for s in m.steps:
            table.add_row(m.name, str(m.version), m.backend, s.kind, s.cache_key[:16])
    out.print(table)
    for m in plan.models:
        mem = m.extras.get("memory_plan")
        if mem:
            _render_memory(m.name, m.extras.get("architecture", {}), mem)
    out.print("toolchain: " + ", ".join(f"{k} {v}" for k, v in sorted(plan.toolchain.items())))


def _render_memory(name: str, arch: dict, mem: dict) -> None:
    gib, mib = 1 << 30, 1 << 20
    t = Table(title=f"{name}: GPU memory plan ({mem['gpu']}, {mem['gpu_bytes'] // gib} GiB)", box=None,
              show_header=False)
    t.add_row("architecture", f"{arch.get('model_type')} {arch.get('layers')} layers, hidden {arch.get('hidden')}, "
                              f"{arch.get('heads')} heads / {arch.get('kv_heads')} KV heads × {arch.get('head_dim')}")
    t.add_row("parameters", f"{mem['params']:,}")
    t.add_row(f"weights ({mem['quantization']})", f"{mem['weight_bytes'] / gib:.2f} GiB total, "
                                                  f"{mem['weight_bytes_per_gpu'] / gib:.2f} GiB per GPU")
    t.add_row("KV cache per token", f"{mem['kv_bytes_per_token'] / mib:.4f} MiB "
                                    f"({mem['kv_bytes_per_token']} bytes)")
    t.add_row("KV pool per GPU", f"{mem['kv_pool_bytes_per_gpu'] / gib:.2f} GiB → {mem['max_kv_tokens']:,} tokens")
    t.add_row("sequences at max_seq_len", str(mem["max_sequences_at_max_seq_len"]))
    out.print(t)
    for note in mem["notes"]:
        out.print(f"  note: {note}")


@main.command("build")
@recipes_arg
@click.option("-o", "--output", "output", required=True, type=click.Path(path_type=Path),
              help="Repository directory to write (replaced atomically).")
@click.option("--force", is_flag=True, help="Replace OUT even if it is not a tritonbuild repository.")
@click.option("--engine", "engines", multiple=True, metavar="MODEL=DIR",
              help="Assemble MODEL around this prebuilt engine directory instead of building it. Repeatable.")
@click.option("--strict", is_flag=True, help="A step that cannot run here (e.g. no TensorRT-LLM) is an error.")
@cache_dir_option
@cache_url_option
@changed_since_option
@json_option
def build_command(recipes: tuple[Path, ...], output: Path, force: bool, engines: tuple[str, ...], strict: bool,
                  cache_dir: Path | None, cache_url: str | None, changed_since: str | None, as_json: bool) -> None:
    """Build a Triton model repository from recipes (files or folders of *.yaml)."""
    from builder import api

    given = {}
    for item in engines:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise click.BadParameter(f"{item!r}: expected MODEL=DIR", param_hint="--engine")
        given[name] = Path(path)
    with _progress(not as_json) as progress:
        result, manifest = api.build_repository(list(recipes), output, force=force, cache_dir=cache_dir,
                                                progress=progress, engines=given, strict=strict,
                                                cache_url=cache_url, changed_since=changed_since)
    for warning in result.warnings:
        err.print(f"[yellow]warning[/]: {warning}")
    if as_json:
        _json({"output": str(output), "manifest_digest": manifest.digest, "warnings": result.warnings,
               "models": [{"name": m.plan.name, "version": m.plan.version,
                           "steps": [s.model_dump() for s in m.steps]} for m in result.models]})
        return
    table = Table("model", "version", "step", "status", "why", "seconds", box=None)
    for m in result.models:
        for s in m.steps:
            table.add_row(m.plan.name, str(m.plan.version), s.kind, s.status, s.reason, f"{s.seconds:.2f}")
    out.print(table)
    out.print(f"wrote {output} ({len(manifest.files)} files, manifest {manifest.digest[:16]})")


@main.command("verify")
@click.argument("repository")
@click.option("--server", "server_url", metavar="URL", help="Verify every model live against this tritonserver "
              "(HTTP, e.g. http://host:8000) instead of the embedded one.")
@click.option("--record", is_flag=True, help="Record golden outputs (to the recipes' verify.goldens and OUT).")
@endpoint_option
@json_option
def verify_command(repository: str, server_url: str | None, record: bool, endpoint_url: str | None,
                   as_json: bool) -> None:
    """Static checks, live load, golden inferences compared bit for bit.

    REPOSITORY is a built directory, or a publish target URL (s3://, gs://, az://, file://): then every
    published object is checked against the target manifest (presence, size, sha256).
    """
    from builder import api
    from builder.errors import VerifyError

    if "://" in repository:
        result = api.verify_target(repository, endpoint_url=endpoint_url)
        if as_json:
            _json(result)
        else:
            out.print(f"{result['target']}: {result['objects_checked']} objects checked")
            for p in result["problems"]:
                out.print(f"  FAIL {p}")
            out.print("PASSED" if result["passed"] else "FAILED")
        if not result["passed"]:
            sys.exit(VerifyError.exit_code)
        return
    repository = Path(repository)

    if server_url and "://" not in server_url:
        server_url = f"http://{server_url}"
    with _progress(not as_json) as progress:
        report = api.verify_repository(repository, server_url=server_url, record=record, progress=progress)
    if as_json:
        _json(report.model_dump(mode="json"))
    else:
        _render_report(report)
    if not report.passed:
        if not as_json:
            err.print("[bold red]verification failed[/]")
        sys.exit(VerifyError.exit_code)


def _render_report(report) -> None:
    bad = [c for c in report.static if not c.ok]
    out.print(f"static checks: {len(report.static) - len(bad)}/{len(report.static)} passed")
    for c in bad:
        out.print(f"  FAIL {c.model}: {c.check}: {c.detail}")
    if not report.models:
        return
    table = Table("model", "ver", "how verified", "loaded", "goldens", "bit-exact", "batching", "result", box=None)
    table.columns[0].no_wrap = True
    how = {"live-embedded": "live, embedded", "live-server": "live, --server", "in-process": "in-process",
           "none": "not run"}
    for m in report.models:
        exact = "-" if not m.compared else (f"yes ({m.samples}×{m.repeats})" if not m.mismatches else
                                            f"NO ({len(m.mismatches)} diffs)")
        table.add_row(m.name, str(m.version), how[m.path], "yes" if m.loaded else "no",
                      "recorded" if report.recorded and m.goldens else ("yes" if m.goldens else "none"), exact,
                      m.batch_invariance, "[green]PASS[/]" if m.passed else "[red]FAIL[/]")
    out.print(table)
    for m in report.models:
        out.print(f"  {m.name}: {m.path_detail}")
        if m.load_error:
            out.print(f"  {m.name}: load error: {m.load_error}")
        for mm in m.mismatches[:5]:
            out.print(f"  {m.name}: output {mm.output!r} sample {mm.sample} ({mm.context}): {mm.differing}/{mm.total} "
                      f"elements differ, max |diff| {mm.max_abs_diff}, first at {mm.first_index}")
        for note in m.notes:
            out.print(f"  {m.name}: {note}")
    out.print(f"report: manifest {report.manifest_digest[:16]}, {'PASSED' if report.passed else 'FAILED'}")


@main.command("serve")
@click.argument("repository")
@endpoint_option
@json_option
def serve_command(repository: str, endpoint_url: str | None, as_json: bool) -> None:
    """Serve a repository (a directory, or a publish target URL) with the embedded tritonserver in the
    foreground; Ctrl-C stops it."""
    from builder import api
    from builder.server.embedded import ServerStartError

    server, loadable, skipped = api.serve(repository, endpoint_url=endpoint_url)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        server.start()
        for name in loadable:
            server.load(name)
        info = {"http": f"http://{server.http_url}", "grpc": server.grpc_url, "metrics": server.metrics_url,
                "repository": server.repository, "loaded": loadable, "not_loaded": skipped,
                "log": str(server.log_path)}
        if as_json:
            _json(info)
        else:
            out.print(f"tritonserver ready  HTTP {info['http']}  gRPC {info['grpc']}  metrics {info['metrics']}")
            out.print(f"repository {server.repository}; loaded: {', '.join(loadable) or '-'}")
            if skipped:
                out.print(f"not loaded (backend not in the embedded server): {', '.join(skipped)}")
            out.print("Ctrl-C to stop")
        sys.stdout.flush()
        while server.proc is not None and server.proc.poll() is None:
            time.sleep(0.5)
        raise ServerStartError(f"tritonserver exited unexpectedly:\n{server.log_tail()}",
                               hint=f"see the server log {server.log_path}")
    except KeyboardInterrupt:
        err.print("stopping tritonserver")
    finally:
        server.cleanup()


class _TransferReporter:
    """Rich progress bars with bytes/s for publish; silent when not a terminal or with --json."""

    def __init__(self, enabled: bool):
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        self.enabled = enabled and err.is_terminal
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
                                 TransferSpeedColumn(), TimeRemainingColumn(), console=err, transient=True)
        self.task = None

    def status(self, message: str) -> None:
        if self.enabled:
            self.progress.console.log(message)

    def start_transfer(self, total_bytes: int, description: str) -> None:
        if self.enabled:
            self.progress.start()
            self.task = self.progress.add_task(description, total=total_bytes)

    def advance(self, nbytes: int) -> None:
        if self.enabled and self.task is not None:
            self.progress.advance(self.task, nbytes)

    def end_transfer(self) -> None:
        if self.enabled:
            self.progress.stop()
            self.task = None


@main.command("publish")
@click.argument("repository", type=click.Path(path_type=Path))
@click.argument("target")
@endpoint_option
@click.option("--skip-verify", is_flag=True, help="Publish without a passing verification (loud; recorded at "
              "the target).")
@click.option("--keep", type=int, metavar="K", help="After publishing, keep only the K newest complete versions "
              "of each model (never the live one).")
@click.option("--notify", multiple=True, metavar="URL", help="Ask this tritonserver (explicit model control) to "
              "load each published model. Repeatable.")
@click.option("--dry-run", is_flag=True, help="Show what would be uploaded, skipped, switched and pruned.")
@click.option("--break-lock", is_flag=True, help="Remove a lock left by a publish that died on another machine.")
@json_option
def publish_command(repository: Path, target: str, endpoint_url: str | None, skip_verify: bool, keep: int | None,
                    notify: tuple[str, ...], dry_run: bool, break_lock: bool, as_json: bool) -> None:
    """Publish a verified repository to TARGET (file://, s3://, gs://, az://) without exposing half versions."""
    from builder import api
    from builder.errors import PublishError

    if skip_verify:
        err.print("[bold yellow]WARNING[/]: --skip-verify: publishing an UNVERIFIED repository; the target "
                  "manifest records it")
    receipt = api.publish(repository, target, endpoint_url=endpoint_url, skip_verify=skip_verify, keep=keep,
                          notify=notify, dry_run=dry_run, break_lock=break_lock,
                          reporter=_TransferReporter(not as_json))
    failed = [n for n in receipt.notified if not n["ok"]]
    if as_json:
        _json(receipt.model_dump(mode="json"))
    else:
        table = Table("model", "version", "action", "path", "bytes", "detail", box=None)
        for a in receipt.actions:
            if a.action == "skip" and not dry_run:
                continue
            table.add_row(a.model, str(a.version or "-"), a.action, a.path, str(a.bytes or ""), a.detail)
        out.print(table)
        verb = "would publish" if dry_run else "published"
        out.print(f"{verb} manifest {receipt.manifest_digest[:16]} to {receipt.target} "
                  f"({receipt.uploaded_bytes} bytes uploaded in {receipt.seconds:.1f}s; verification "
                  f"{receipt.verification})")
        out.print(f"tritonserver --model-repository={receipt.triton_url}")
        for n in receipt.notified:
            out.print(f"notify {n['server']} load {n['model']}: {'ok' if n['ok'] else 'FAILED'} {n['message']}")
    if failed:
        raise PublishError(f"published, but {len(failed)} server(s) did not load the models",
                           hint="see the notify lines above; the target itself is complete")


@main.command("ls")
@click.argument("target")
@endpoint_option
@json_option
def ls_command(target: str, endpoint_url: str | None, as_json: bool) -> None:
    """Models at a publish target: versions present and complete, the live one, notes on interrupted publishes."""
    from builder import api

    info = api.list_target(target, endpoint_url=endpoint_url)
    if as_json:
        _json(info)
        return
    table = Table("model", "live", "complete", "present", "verification", "notes", box=None)
    for m in info["models"]:
        table.add_row(m["name"], str(m["live"] or "-"), ",".join(map(str, m["complete"])) or "-",
                      ",".join(map(str, m["present"])) or "-", m["verification"] or "-", "; ".join(m["notes"]))
    out.print(table)
    out.print(f"manifest sha256: {info['manifest_sha256'] or '-'}")
    out.print(f"tritonserver --model-repository={info['triton_url']}")


@main.command("rollback")
@click.argument("target")
@click.argument("model")
@click.option("--to", "to", type=int, required=True, metavar="N", help="The complete version to make live.")
@endpoint_option
@click.option("--break-lock", is_flag=True, help="Remove a lock left by a publish that died on another machine.")
@json_option
def rollback_command(target: str, model: str, to: int, endpoint_url: str | None, break_lock: bool,
                     as_json: bool) -> None:
    """Make an earlier complete version of MODEL live again at TARGET."""
    from builder import api

    result = api.rollback(target, model, to, endpoint_url=endpoint_url, break_lock=break_lock)
    if as_json:
        _json(result)
    else:
        out.print(f"{model}: live version {result['previous']} → {result['live']} at {result['target']}")


@main.command("deploy-snippets")
@click.argument("repository", type=click.Path(path_type=Path))
@click.option("-o", "--output", "output", type=click.Path(path_type=Path), default=Path("deploy"),
              show_default=True, help="Directory for the generated YAML.")
@click.option("--name", default="tritonserver", show_default=True, help="Deployment/Service name (DNS label).")
@click.option("--image", required=True, help="Serving image, e.g. one built from Dockerfile.triton.")
@click.option("--target", help="Publish target the pods sync at start (else the image's baked repository).")
@click.option("--replicas", type=int, default=1, show_default=True)
@json_option
def deploy_snippets_command(repository: Path, output: Path, name: str, image: str, target: str | None,
                            replicas: int, as_json: bool) -> None:
    """Write a Kubernetes Deployment + Service for REPOSITORY (startup probe sized from it, readiness that infers)."""
    from builder.publish.k8s import startup_budget_s, write
    from builder.verify.run import read_repository

    manifest = read_repository(repository)
    path = write(manifest, output, name=name, image=image, target=target, replicas=replicas)
    if as_json:
        _json({"path": str(path), "startup_budget_s": startup_budget_s(manifest)})
    else:
        out.print(f"wrote {path} (startup budget {startup_budget_s(manifest)} s)")


@main.group("cache")
def cache_group() -> None:
    """Inspect and maintain the local build cache."""


def _size(text: str) -> int:
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    num, unit = (t[:-1], t[-1]) if t and t[-1] in units else (t, "")
    try:
        return int(float(num) * units[unit])
    except ValueError:
        raise click.BadParameter(f"{text!r}: expected a size like 500M or 20G", param_hint="--max-size") from None


@cache_group.command("ls")
@cache_dir_option
@json_option
def cache_ls_command(cache_dir: Path | None, as_json: bool) -> None:
    """Cached steps: key, kind, model, size, last use."""
    from builder import api

    store = api.cache_store(cache_dir)
    rows = [{"key": key, "kind": rec.get("kind"), "model": rec.get("model"), "files": len(rec.get("files", {})),
             "bytes": sum(e["size"] for e in rec.get("files", {}).values()),
             "last_used": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(mtime))}
            for key, rec, mtime in store.records()]
    if as_json:
        _json({"cache": str(store.root), "entries": rows})
        return
    table = Table("key", "kind", "model", "files", "bytes", "last used", box=None)
    for r in rows:
        table.add_row(r["key"][:16], r["kind"], r["model"], str(r["files"]), str(r["bytes"]), r["last_used"])
    out.print(table)
    out.print(f"{len(rows)} entries in {store.root}")


@cache_group.command("gc")
@click.option("--max-size", required=True, metavar="SIZE", help="Keep at most this much (e.g. 20G), least "
              "recently used entries go first.")
@cache_dir_option
@json_option
def cache_gc_command(max_size: str, cache_dir: Path | None, as_json: bool) -> None:
    """Shrink the cache to --max-size."""
    from builder import api

    result = api.cache_store(cache_dir).gc(_size(max_size))
    if as_json:
        _json(result)
    else:
        out.print(f"evicted {len(result['evicted_records'])} entries, freed {result['freed_bytes']} bytes, "
                  f"kept {result['kept_bytes']} bytes")


@cache_group.command("verify")
@cache_dir_option
@json_option
def cache_verify_command(cache_dir: Path | None, as_json: bool) -> None:
    """Re-hash every cached file; corrupt ones are evicted (and rebuilt by the next build)."""
    from builder import api

    result = api.cache_store(cache_dir).verify()
    if as_json:
        _json(result)
    else:
        out.print(f"{result['blobs_checked']} files checked, {len(result['corrupt_blobs'])} corrupt, "
                  f"{len(result['evicted_records'])} entries evicted")


@main.command("schema")
def schema_command() -> None:
    """Print the recipe JSON Schema (recipes/recipe.schema.json is this output)."""
    from builder.recipe.schema import recipe_schema_bytes

    sys.stdout.buffer.write(recipe_schema_bytes())
