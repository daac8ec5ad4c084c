"""How tritonbuild talks to object stores through fsspec drivers: a deadline, one retry layer,
errors classified by their codes.

- The deadline (TRITONBUILD_NET_DEADLINE_S, default 30 s) bounds every request that waits for an
  answer:
  connect + first byte + the driver's retries and backoff, together. Two layers keep it: each
  driver's own per-attempt timeouts are cut so that its attempts fit the deadline (each driver's
  options in core/stores.py; S3 exactly; gcsfs's fixed 6 attempts and the Azure SDK's long backoff
  do not fit, so for them the second layer decides), and BoundedFS runs every metadata and
  small-object call (list, stat, read, write, delete, S3 API calls) against a wall clock. A store
  that accepts connections and never answers therefore fails in at most the deadline, with one
  message naming it. Transfers of files (put_file, open) are bounded by silence instead (each
  request's read timeout): a 4 GiB upload that keeps moving is never cut short.
- Retries: botocore's own 'standard' mode (exponential backoff with jitter, transient errors only)
  with
  ATTEMPTS attempts in all; s3fs's retry loop is set to one attempt and tritonbuild adds none.
"""

from __future__ import annotations

import os
import socket
import threading

CONNECT_TIMEOUT_S = 5
DEADLINE_ENV = "TRITONBUILD_NET_DEADLINE_S"
DEFAULT_DEADLINE_S = 30.0
ATTEMPTS = 3
BACKOFF_S = 3.0  # botocore standard mode: at most 1 s, then 2 s, between its 3 attempts


def deadline() -> float:
    """Seconds one request may wait for a store's answer, retries included
    (TRITONBUILD_NET_DEADLINE_S)."""
    try:
        value = float(os.environ.get(DEADLINE_ENV, DEFAULT_DEADLINE_S))
    except ValueError:
        value = DEFAULT_DEADLINE_S
    return value if value > 0 else DEFAULT_DEADLINE_S


def deadline_words() -> str:
    return f"the {deadline():g} s network deadline (connect + first byte + retries; {DEADLINE_ENV} sets it)"


def attempt_timeouts(attempts: int = ATTEMPTS, backoff: float = BACKOFF_S) -> tuple[float, float]:
    """(connect, read) seconds for one attempt, so that `attempts` of them and the backoff fit the
    deadline."""
    budget = max(0.5, (deadline() - backoff) / attempts)
    connect = min(CONNECT_TIMEOUT_S, budget / 3)
    return connect, budget - connect


class DeadlineExceeded(TimeoutError):
    """The store gave no answer within the deadline."""


def within_deadline(fn, what: str):
    """fn() on a daemon thread, waited for at most deadline() seconds; past that DeadlineExceeded is
    raised (the stuck request is abandoned: the thread holds no lock, and a CLI exiting does not
    wait for it)."""
    box: dict = {}
    done = threading.Event()

    def run():
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = e
        finally:
            done.set()

    threading.Thread(target=run, name="tritonbuild-net", daemon=True).start()
    if not done.wait(deadline()):
        raise DeadlineExceeded(f"no answer to {what} within {deadline_words()}")
    if "error" in box:
        raise box["error"]
    return box.get("value")


class BoundedFS:
    """An fsspec filesystem whose metadata and small-object calls each wait at most the deadline."""

    GUARDED = frozenset(
        {
            "ls",
            "find",
            "info",
            "exists",
            "isdir",
            "isfile",
            "size",
            "cat_file",
            "pipe_file",
            "rm",
            "rm_file",
            "mkdir",
            "makedirs",
            "call_s3",
            "call",
        }
    )

    def __init__(self, fs):
        self._fs = fs

    def __getattr__(self, name: str):
        attr = getattr(self._fs, name)
        if name not in self.GUARDED or not callable(attr):
            return attr

        def call(*args, **kwargs):
            first = args[0] if args else ""
            return within_deadline(lambda: attr(*args, **kwargs), f"{name}({first})")

        return call


def _chain(e: BaseException):
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        yield e
        e = e.__cause__ or e.__context__


def timed_out(e: BaseException) -> bool:
    """Whether a network failure was a wait that ran out (the deadline, a connect or read timeout:
    a TimeoutError anywhere in the chain, as Python, aiohttp and botocore raise them), not a refused
    or unreachable endpoint, which fails at once."""
    return any(isinstance(x, TimeoutError) for x in _chain(e))


def error_code(e: BaseException) -> str | None:
    """The service's error code (S3 'NoSuchBucket', 'AccessDenied'...) anywhere in the exception's
    chain."""
    for x in _chain(e):
        response = getattr(x, "response", None)
        if isinstance(response, dict):
            code = response.get("Error", {}).get("Code")
            if code:
                return str(code)
        code = getattr(x, "error_code", None)  # the Azure SDK's HttpResponseError
        if isinstance(code, str) and code:
            return code
    return None


def classify(
    e: BaseException,
    *,
    no_bucket: frozenset[str] = frozenset(),
    denied: frozenset[str] = frozenset(),
    network: tuple = (),
    nocreds: tuple = (),
) -> str:
    """'no-bucket', 'denied', 'not-found', 'network' or 'other', from codes and exception types
    only. A store's driver (core/stores.py) names its service's codes and its SDK's exception types;
    Python's own network and permission errors count for every caller."""
    code = error_code(e)
    if code in no_bucket:
        return "no-bucket"
    if code in denied:
        return "denied"
    network = (*network, socket.timeout, TimeoutError, ConnectionError)
    for x in _chain(e):
        if nocreds and isinstance(x, nocreds):
            return "denied"
        if isinstance(x, network):
            return "network"
    if code is None:
        first = next(_chain(e))
        if isinstance(first, PermissionError):
            return "denied"
        if isinstance(first, FileNotFoundError):
            return "not-found"
    return "other"
