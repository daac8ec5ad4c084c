"""How stages report progress without printing: the CLI passes a Reporter that renders; default is
silent."""

from __future__ import annotations


class Reporter:
    def status(self, message: str) -> None:
        """A one-line description of what is happening now."""

    def start_transfer(self, total_bytes: int, description: str) -> None:
        """Bytes are about to move; advance() follows."""

    def advance(self, nbytes: int) -> None:
        """nbytes more have moved."""

    def end_transfer(self) -> None:
        """The transfer started last is over."""


SILENT = Reporter()
