"""What every command shares: the group that maps errors to exit codes, consoles, common options."""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape

from tritonbuild import __version__
from tritonbuild.errors import MultipleErrors, TritonBuildError

# NOTE: markup off: messages carry user text such as "tritonbuild[onnx]" or "[1, 2]", which rich would
# read as style tags. Styled parts are passed with markup=True and everything else escaped.
out = Console(highlight=False, soft_wrap=True, markup=False)
err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)


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
                      "traceback above", markup=True)
            sys.exit(1)


def _emit_error(ctx: click.Context, e: TritonBuildError) -> None:
    wants_json = ctx.meta.get("json", False)
    if wants_json:
        click.echo(json.dumps(e.to_dict(), indent=2, sort_keys=True))
        return
    errors = e.errors if isinstance(e, MultipleErrors) else [e]
    for one in errors:
        where = f"{one.where}: " if one.where else ""
        err.print(f"[bold red]error[/] ({one.kind}): {escape(where + one.message)}", markup=True)
        if one.hint:
            err.print(f"  [dim]fix:[/] {escape(one.hint)}", markup=True)


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


cache_url_option = click.option("--cache-url", envvar="TRITONBUILD_CACHE_URL", metavar="URL",
                                help="Shared remote build cache (s3://, gs://, az://, file://) "
                                     "[env TRITONBUILD_CACHE_URL].")
changed_since_option = click.option("--changed-since", metavar="REV",
                                    help="Only recipes whose inputs changed since this git revision.")
cache_dir_option = click.option("--cache-dir", type=click.Path(path_type=Path), envvar="TRITONBUILD_CACHE_DIR",
                                help="Local build cache [env TRITONBUILD_CACHE_DIR; default ~/.cache/tritonbuild].")


