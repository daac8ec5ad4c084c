"""Whether an error a command raised came from Ctrl-C: then the CLI says "interrupted" and exits 130, not
"internal error" and 1."""

from __future__ import annotations

import signal


def interrupted_by_ctrl_c(error: BaseException) -> bool:
    """An error raised because Ctrl-C interrupted something that turned the KeyboardInterrupt into its own
    exception (numpy's import raises ImportError 'Error importing numpy ...' from it; pydantic-core a
    SchemaError with no chain, so the SIGINT handler `tritonbuild` installs remembers it): an interrupt, not a
    bug."""
    if getattr(signal.getsignal(signal.SIGINT), "seen", False):
        return True
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, KeyboardInterrupt):
            return True
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return False
