"""Publish's transfer progress on the CLI's consoles."""

from __future__ import annotations

from tritonbuild.cli.app import Application, PlainProgress


class TransferReporter:
    """Publish progress: rich bars with bytes/s on a terminal; plain lines every few seconds in logs
    (a 400 MB upload in CI says how far it is); nothing with --json or --quiet."""

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
