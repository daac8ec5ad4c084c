"""The CLI's application object (Hatch's `Application` is the model): one per invocation, it owns
the output mode (--json, --quiet, --verbose), the consoles, progress reporting and the build cache
directory. Commands reach it with `app()`; nothing else in the CLI decides where output goes or
where the cache is."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import click
from rich.console import Console

from tritonbuild import api

QUIET, NORMAL, VERBOSE = -1, 0, 1
HEARTBEAT_S = (
    5.0  # in a non-TTY, a plain progress line at most this often (and at least, during long work)
)


def _console(stderr: bool) -> Console:
    # NOTE: markup off: messages carry user text such as "tritonbuild[onnx]" or "[1, 2]", which rich
    # would read as style tags. Styled parts are passed with markup=True and everything else
    # escaped. No Console.log anywhere: its timestamps and source links are not for users.
    return Console(stderr=stderr, highlight=False, soft_wrap=True, markup=False)


class Application:
    def __init__(self, out: Console | None = None, err: Console | None = None):
        self.out = out or _console(False)
        self.err = err or _console(True)
        self.json = False
        self.verbosity = NORMAL
        self._cache_dir: Path | None = None
        self._cache_dir_resolved: Path | None = None

    # -- output mode ------------------------------------------------------------------------------
    def set_verbosity(self, level: int) -> None:
        self.verbosity = level
        self.out.quiet = level <= QUIET

    @property
    def quiet(self) -> bool:
        return self.verbosity <= QUIET

    def emit_json(self, obj) -> None:
        click.echo(json.dumps(api.plain(obj), indent=2, sort_keys=True))

    def detail(self, message: str) -> None:
        """A line for --verbose only (stderr)."""
        if self.verbosity >= VERBOSE and not self.json:
            self.err.print(message)

    # -- cache directory --------------------------------------------------------------------------
    def set_cache_dir(self, path: Path | None, fallback: bool = False) -> None:
        """`fallback`: the project config file's value, kept only when no --cache-dir was given."""
        if fallback and self._cache_dir is not None:
            return
        if path is not None:
            self._cache_dir, self._cache_dir_resolved = Path(path), None

    @property
    def cache_dir(self) -> Path:
        """--cache-dir, else TRITONBUILD_CACHE_DIR, else $XDG_CACHE_HOME/tritonbuild
        (~/.cache/tritonbuild)."""
        if self._cache_dir_resolved is None:
            self._cache_dir_resolved = api.resolve_cache_dir(self._cache_dir)
        return self._cache_dir_resolved

    # -- progress ---------------------------------------------------------------------------------
    @contextmanager
    def progress(self) -> Iterator[Callable[[str], None]]:
        """A callback for long work: a rich status line on a terminal; in a non-TTY (CI logs) a
        plain line at most every HEARTBEAT_S seconds, repeated with the elapsed time while nothing
        new is said; nothing with --json or --quiet."""
        if self.json or self.quiet:
            yield lambda _msg: None
            return
        if self.err.is_terminal:
            with self.err.status("working") as status:
                yield lambda msg: status.update(msg)
            return
        # --verbose: every message as it comes; else at most one line per HEARTBEAT_S.
        with PlainProgress(
            self.err, interval=0.0 if self.verbosity >= VERBOSE else HEARTBEAT_S
        ) as progress:
            yield progress


class PlainProgress:
    """Plain progress lines for logs: the newest message at most every `interval` seconds, and a
    heartbeat with the elapsed time when one step runs long."""

    def __init__(
        self,
        console: Console,
        interval: float = HEARTBEAT_S,
        clock: Callable[[], float] = time.monotonic,
        heartbeat: float = HEARTBEAT_S,
    ):
        self.console, self.interval, self.clock, self.heartbeat = (
            console,
            interval,
            clock,
            heartbeat,
        )
        self.start = self.last_print = clock()
        self.message: str | None = None
        self.printed: str | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True)

    def __enter__(self) -> PlainProgress:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def __call__(self, message: str) -> None:
        with self._lock:
            self.message = message
            if self.printed is None or self.clock() - self.last_print >= self.interval:
                self._print()

    def _print(self) -> None:
        elapsed = self.clock() - self.start
        self.console.print(f"[{elapsed:5.0f}s] {self.message}")
        self.last_print, self.printed = self.clock(), self.message

    def tick(self) -> None:
        """The heartbeat: repeat the newest message (with the elapsed time) when nothing was printed
        for a while."""
        with self._lock:
            if self.message is not None and self.clock() - self.last_print >= self.heartbeat:
                self._print()

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat / 5):
            self.tick()


def app() -> Application:
    """The Application of the running command."""
    ctx = click.get_current_context()
    found = ctx.find_object(Application)
    if found is None:  # a command invoked outside the group (tests calling a command directly)
        found = ctx.ensure_object(Application)
    return found
