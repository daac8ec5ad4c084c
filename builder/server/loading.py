"""Loading a model into a running tritonserver through its repository API: Triton's refusal, a load that
never answers and the server log's lines about it, each told apart."""

from __future__ import annotations

from pathlib import Path

from tritonbuild.errors import VerifyError
from tritonbuild.triton.client import Server, refused, timed_out

# A model load that never reports back (a Python stub stuck in initialize) would hold Triton's load API forever.
LOAD_TIMEOUT_S = 300.0


class ModelLoadError(VerifyError):
    timed_out = False  # the load did not answer in time (set by load_model)


def load_model(base_url: str, model: str, timeout: float = LOAD_TIMEOUT_S) -> None:
    """POST v2/repository/models/<m>/load; a failure carries Triton's own error text; a load that has not
    answered within timeout seconds is a ModelLoadError with timed_out set."""
    try:
        with Server(base_url, timeout) as server:
            server.load(model)
    except Exception as e:  # noqa: BLE001 - Triton's refusal, a timeout, or no server: each told apart below
        text = refused(e)
        if text is not None:
            raise ModelLoadError(
                f"tritonserver failed to load {model!r}: {text}",
                where=model,
                hint="fix the model (Triton's message above), rebuild, verify again",
            ) from None
        if timed_out(e):
            raise _load_timed_out(model, timeout) from None
        raise ModelLoadError(
            f"cannot reach {base_url} to load {model!r}: {e}", hint="is the server running?"
        ) from None


def _load_timed_out(model: str, timeout: float) -> ModelLoadError:
    e = ModelLoadError(
        f"tritonserver did not finish loading {model!r} within {timeout:g} s (a model whose "
        "initialize never returns, e.g. a Python stub waiting on a file it cannot find)",
        where=model,
        hint="fix the model's initialize (see the server log's lines), or raise --load-timeout "
        "if it is only slow to load",
    )
    e.timed_out = True
    return e


def load_log_cause(log_path: Path, model: str, n: int = 5) -> str:
    """The server log's last lines naming model (what it was doing when its load stopped answering)."""
    try:
        lines = [
            ln.strip() for ln in log_path.read_text(errors="replace").splitlines() if model in ln
        ]
    except OSError:
        lines = []
    if not lines:
        return "the server log names no cause"
    return "server log: " + " | ".join(lines[-n:])
