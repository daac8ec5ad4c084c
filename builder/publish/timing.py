"""The waits a publish keeps for the servers polling its target, from the environment: the settle before
the first switch (TRITONBUILD_SWITCH_SETTLE_S) and --keep's grace after a model's switch
(TRITONBUILD_PRUNE_GRACE_S)."""

from __future__ import annotations

import os

from tritonbuild.errors import UsageError

SETTLE_ENV = "TRITONBUILD_SWITCH_SETTLE_S"
SETTLE_S = 2.0
# After a model's switch, polling servers copy its whole directory: no version of it is pruned for this long
GRACE_ENV = "TRITONBUILD_PRUNE_GRACE_S"
GRACE_S = 600.0


def settle_seconds() -> float:
    """Seconds the version folders written must be still before the first switch (default 2; 0
    switches at once)."""
    return _seconds(SETTLE_ENV, os.environ.get(SETTLE_ENV, ""), SETTLE_S)


def grace_seconds() -> float:
    """Seconds after a model's switch during which --keep prunes none of its versions (default 600;
    0 prunes at once)."""
    return _seconds(GRACE_ENV, os.environ.get(GRACE_ENV, ""), GRACE_S)


def _seconds(name: str, raw: str, default: float) -> float:
    """raw (the variable's value) as seconds >= 0, default when empty; a usage error naming it."""
    raw = raw.strip()
    try:
        value = float(raw) if raw else default
    except ValueError:
        raise UsageError(
            f"{name}={raw!r} is not a number of seconds", hint=f"unset it or set e.g. {default:g}"
        ) from None
    if not value >= 0:  # NOTE: catches nan too
        raise UsageError(
            f"{name} must be >= 0, not {raw}", hint=f"unset it or set e.g. {default:g}"
        )
    return value
