"""What every command shares: the group that maps errors to exit codes, consoles, common options."""

from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from tritonbuild import api
from tritonbuild.cli.app import QUIET, VERBOSE, Application, app
from tritonbuild.cli.interrupt import interrupted_by_ctrl_c
from tritonbuild.errors import MultipleErrors, TritonBuildError, UsageError


class Group(click.Group):
    """Turns every TritonBuildError into its exit code and message; usage errors into exit 2 (JSON
    under
    --json); Ctrl-C into 130; bugs into 1."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        args = list(sys.argv[1:] if args is None else args)
        application = Application()  # its own consoles: every line a command prints goes through it
        application.json = "--json" in args  # before parsing: a usage error must honour it too
        asks_help = {"--help", "-h", "--version"} & set(
            args
        )  # help is reachable from any directory
        if (
            "default_map" not in extra
            and not asks_help
            and not _completing(prog_name, complete_var)
        ):
            try:  # the project config file, read once: flags and environment variables beat it
                extra["default_map"] = _project_defaults(self)
            except TritonBuildError as e:
                _emit_error(application, e)
                sys.exit(e.exit_code)
        try:
            rv = super().main(
                args, prog_name, complete_var, standalone_mode=False, obj=application, **extra
            )
        except click.UsageError as e:
            _usage_error(application, e)
            sys.exit(e.exit_code)
        except click.ClickException as e:
            e.show()
            sys.exit(e.exit_code)
        except click.Abort:
            application.err.print("interrupted")
            sys.exit(130)
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            _reader_gone()
        sys.exit(rv if isinstance(rv, int) else 0)

    group_class = type  # subgroups (cache) are Groups too: they get the common options below

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        """Every command also takes -q/--quiet and -v/--verbose after its name."""
        names = {opt for param in cmd.params for opt in getattr(param, "opts", [])}
        if "--quiet" not in names:
            cmd.params.append(
                click.Option(
                    ["-q", "--quiet"],
                    is_flag=True,
                    expose_value=False,
                    callback=_set_verbosity(QUIET),
                    help="Only errors (and --json output).",
                )
            )
        if "--verbose" not in names:
            cmd.params.append(
                click.Option(
                    ["-v", "--verbose"],
                    is_flag=True,
                    expose_value=False,
                    callback=_set_verbosity(VERBOSE),
                    help="More detail on stderr.",
                )
            )
        super().add_command(cmd, name)

    def invoke(self, ctx: click.Context):
        application = ctx.find_object(Application) or Application()
        raised: TritonBuildError | None = None
        try:
            return super().invoke(ctx)
        except TritonBuildError as e:
            raised = e
            _emit_error(application, e)
            sys.exit(e.exit_code)
        except (KeyboardInterrupt, click.Abort):
            application.err.print("interrupted")
            sys.exit(130)
        except (
            BrokenPipeError
        ):  # 'tritonbuild infer ... | head': the reader left, as with other CLIs
            _reader_gone()
        except (click.exceptions.Exit, click.ClickException):
            raise
        except Exception as e:  # noqa: BLE001 - a bug: show the traceback and ask for a report
            if interrupted_by_ctrl_c(e):
                application.err.print("interrupted")
                sys.exit(130)
            application.err.print_exception()
            application.err.print(
                "[bold red]internal error[/]: this is a tritonbuild bug; please report it with the "
                "traceback above",
                markup=True,
            )
            sys.exit(1)
        finally:
            _warn_broken_plugins(application, raised)


def _warn_broken_plugins(application: Application, raised: TritonBuildError | None) -> None:
    """One warning per installed backend plug-in that could not be registered, after a command that
    used the backends (the built-ins and the other plug-ins worked; the error said already is not
    repeated)."""
    if application.quiet:
        return
    for error in api.broken_plugins():  # none where the command never used the backends
        if error is not raised:
            application.err.print(f"[yellow]warning[/]: {escape(str(error))}", markup=True)


def _reader_gone() -> None:
    """Exit quietly with 141 (128 + SIGPIPE, what a shell reports for a CLI SIGPIPE ended): stdout
    is pointed at /dev/null first, so the interpreter's last flush does not fail again (Python's
    documented handling of SIGPIPE)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(141)


def _completing(prog_name: str | None, complete_var: str | None) -> bool:
    """Shell completion is asking (click's _TRITONBUILD_COMPLETE): it must never print an error."""
    name = (prog_name or "tritonbuild").replace("-", "_").replace(".", "_")
    return bool(os.environ.get(complete_var or f"_{name}_COMPLETE".upper()))


def _project_defaults(group: click.Group) -> dict | None:
    # NOTE: imported here: --help reads no config file and skips its parser (tomllib, difflib:
    # 5 ms of a 0.19 s --help, measured with -X importtime)
    from tritonbuild.cli import config

    found = config.load()
    return config.default_map(found, group) if found else None


def _usage_error(application: Application, e: click.UsageError) -> None:
    if application.json:
        command = e.ctx.command_path if e.ctx else "tritonbuild"
        click.echo(
            json.dumps(
                {
                    "error": "usage",
                    "message": e.format_message(),
                    "where": command,
                    "hint": f"{command} --help",
                    "exit_code": e.exit_code,
                },
                indent=2,
                sort_keys=True,
            )
        )
        return
    e.show()


def _emit_error(application: Application, e: TritonBuildError) -> None:
    if application.json:
        application.emit_json(e.to_dict())
        return
    errors = e.errors if isinstance(e, MultipleErrors) else [e]
    for one in errors:
        application.err.print(
            f"[bold red]error[/] ({one.kind}): {escape(one.located())}", markup=True
        )
        if one.hint:
            application.err.print(f"  [dim]fix:[/] {escape(one.hint)}", markup=True)


def _json(obj) -> None:
    app().emit_json(obj)


@contextmanager
def _progress(enabled: bool = True):
    """The Application's progress callback (rich status on a TTY, plain lines in logs, silent for
    --json)."""
    if not enabled:
        yield lambda msg: None
        return
    with app().progress() as progress:
        yield progress


def _remember_json(ctx: click.Context, _param, value: bool) -> bool:
    if value:
        app().json = True
    return app().json


def _remember_cache_dir(ctx: click.Context, param, value: Path | None) -> Path:
    # the config file's value (click's default_map) never replaces a --cache-dir given before the command
    from_file = ctx.get_parameter_source(param.name) is click.core.ParameterSource.DEFAULT_MAP
    app().set_cache_dir(value, fallback=from_file)
    return app().cache_dir


def _set_verbosity(level: int):
    def callback(ctx: click.Context, _param, value: bool) -> bool:
        if value:
            app().set_verbosity(level)
        return value

    return callback


endpoint_option = click.option(
    "--endpoint-url",
    envvar="AWS_ENDPOINT_URL",
    metavar="URL",
    help="S3-compatible endpoint [env AWS_ENDPOINT_URL].",
)
json_option = click.option(
    "--json",
    "as_json",
    is_flag=True,
    callback=_remember_json,
    help="Machine-readable output on stdout.",
)
tritonserver_option = click.option(
    "--tritonserver",
    "tritonserver",
    metavar="PATH",
    envvar="TRITONBUILD_TRITONSERVER",
    help="Run this tritonserver binary (your fleet's, e.g. /opt/tritonserver/bin/tritonserver, "
    "with its own backends) instead of the embedded one [env TRITONBUILD_TRITONSERVER].",
)
triton_image_option = click.option(
    "--triton-image",
    "triton_image",
    metavar="IMAGE",
    envvar="TRITONBUILD_TRITON_IMAGE",
    help="The NGC tritonserver image the repository is served by (e.g. 24.08-py3, "
    "nvcr.io/nvidia/tritonserver:25.01-vllm-python-py3): the embedded server's Python side runs "
    "that image's Python, and build checks model.py's syntax with it (-py3 and vLLM images: 3.10 "
    "to 24.10, 3.12 from 24.11; TensorRT-LLM: from 24.12) [env TRITONBUILD_TRITON_IMAGE; default: "
    "the image the recipes name, else the Python tritonbuild runs on].",
)
recipes_arg = click.argument("recipes", nargs=-1, required=True, type=click.Path(path_type=Path))


# NOTE: no envvar= here: the Application reads TRITONBUILD_CACHE_DIR only when no --cache-dir was
# given (before or after the command), so the environment never overrides an option.
cache_dir_option = click.option(
    "--cache-dir",
    type=click.Path(path_type=Path),
    callback=_remember_cache_dir,
    help="Local build cache: steps, input digests, downloaded checkpoints "
    "[env TRITONBUILD_CACHE_DIR; default ~/.cache/tritonbuild].",
)
quiet_option = click.option(
    "-q",
    "--quiet",
    is_flag=True,
    expose_value=False,
    callback=_set_verbosity(QUIET),
    help="Only errors (and --json output).",
)
verbose_option = click.option(
    "-v",
    "--verbose",
    is_flag=True,
    expose_value=False,
    callback=_set_verbosity(VERBOSE),
    help="More detail on stderr.",
)


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="tritonbuild", prog_name="tritonbuild")
@quiet_option
@verbose_option
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    callback=_remember_json,
    expose_value=False,
    help="Machine-readable output on stdout (also accepted after the command).",
)
@click.option(
    "--cache-dir",
    type=click.Path(path_type=Path),
    callback=_remember_cache_dir,
    expose_value=False,
    help="Local build cache (also accepted after the command) [env TRITONBUILD_CACHE_DIR].",
)
def main() -> None:
    """Build, verify and serve versioned Triton model repositories from recipes."""


cache_url_option = click.option(
    "--cache-url",
    envvar="TRITONBUILD_CACHE_URL",
    metavar="URL",
    help=f"Shared remote build cache ({api.url_prefixes()}) [env TRITONBUILD_CACHE_URL].",
)
changed_since_option = click.option(
    "--changed-since",
    metavar="REV",
    help="Only recipes whose inputs changed since this git revision.",
)


def key_values(items: tuple[str, ...] | list[str], option: str, metavar: str) -> dict[str, str]:
    """KEY=VALUE options (--engine MODEL=DIR, --input NAME=FILE.npy, --backend NAME=DIR,
    --input-data MODEL=FILE) as a dict; an item without a key, an '=' or a value is a usage error
    naming the option and the form."""
    pairs = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise click.BadParameter(f"{item!r}: expected {metavar}", param_hint=option)
        pairs[key] = value
    return pairs


def backend_dirs(specs: tuple[str, ...]) -> dict[str, Path]:
    """--backend NAME=DIR (verify, serve): each DIR must hold the backend's entry point."""
    out = {name: Path(path) for name, path in key_values(specs, "--backend", "NAME=DIR").items()}
    for name, path in out.items():
        if not (path / api.BACKEND_ENTRY).is_file():
            raise UsageError(
                f"--backend {name}={path}: expected NAME=DIR with DIR/{api.BACKEND_ENTRY}",
                hint="e.g. --backend vllm=vllm_backend/src (Triton's vLLM backend)",
            )
    return out


def existing_dir(value: str | Path, what: str = "repository") -> Path:
    """A local directory argument that must exist: a usage error (exit 2) naming it, not a stage's
    error."""
    if api.is_url(str(value)):  # NOTE: a click.Path would have folded 's3://b' into 's3:/b' already
        raise UsageError(
            f"{value} is a URL: this takes a {what} directory on this machine",
            hint=f"copy it here first (e.g. 'aws s3 sync {value} DIR') and pass DIR",
        )
    path = Path(value)
    if not path.is_dir():
        problem = "not a directory" if path.exists() else "no such directory"
        raise UsageError(
            f"{problem}: {path}",
            hint=f"pass the {what} directory `tritonbuild build RECIPES -o DIR` wrote, or a target "
            "URL",
        )
    return path


def print_table(table: Table) -> None:
    """A rich table when it fits the console without truncating a cell; else one plain line per row
    (paths in logs and 80-column terminals stay whole and greppable)."""
    console = app().out
    widths = [
        max((len(str(c)) for c in [col.header, *col._cells]), default=0) for col in table.columns
    ]
    needed = sum(widths) + 2 * max(len(widths) - 1, 0) + 2 * table.padding[1] * len(widths)
    if needed <= console.width:
        for col in table.columns:
            col.no_wrap = True
        console.print(table)
        return
    headers = [str(col.header) for col in table.columns]
    for row in zip(*(col._cells for col in table.columns), strict=False):
        console.print(
            "  ".join(
                f"{h}={c}" for h, c in zip(headers, (str(c) for c in row), strict=True) if str(c)
            )
        )
