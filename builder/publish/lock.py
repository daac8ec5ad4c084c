"""One publisher per target: a lease object created only if absent, renewed and broken only by
conditional writes (the store's own primitives, core/leases.py, named by the target's driver: O_EXCL
and checked renames locally, S3 If-None-Match / If-Match on the ETag, GCS ifGenerationMatch, Azure
If-None-Match / If-Match).

The lease names its holder (user@host, pid) and expires_at; a heartbeat renews it every lease/3
while the publish runs (conditional on it still being the version this publisher wrote). A lease
past its expiry, or one held by a dead process on this host, is broken by a conditional delete of
the version that was judged expired, so two publishers breaking it at once cannot both win;
`--break-lock` breaks a live one. Breaking a lease is always reported (TargetLock.broken).
"""

from __future__ import annotations

import getpass
import json
import os
import socket
import threading
import time
import uuid

from tritonbuild.core.leases import Moved
from tritonbuild.errors import PublishError
from tritonbuild.publish.models import LOCK_NAME, utc_epoch, utc_iso
from tritonbuild.publish.target import Target, storage_error

LEASE_ENV = "TRITONBUILD_LOCK_LEASE_S"
DEFAULT_LEASE_S = 120


def lease_seconds() -> float:
    try:
        value = float(os.environ.get(LEASE_ENV, DEFAULT_LEASE_S))
    except ValueError:
        value = DEFAULT_LEASE_S
    return value if value > 0 else DEFAULT_LEASE_S


def lease_state(holder: dict, now: float | None = None) -> str:
    """'live', 'expired', or 'no-expiry' (a lock written before leases: only --break-lock removes
    it)."""
    expires = utc_epoch(holder.get("expires_at"))
    if expires is None:
        return "no-expiry"
    return "expired" if expires < (now or time.time()) else "live"


def read_lock(target: Target) -> dict | None:
    """The lock's holder document, or None when the target is not locked (for ls)."""
    try:
        raw = target.fs.cat_file(target.path(LOCK_NAME))
    except FileNotFoundError:
        return None
    except Exception as e:  # noqa: BLE001
        raise storage_error(target, "read the publish lock", e) from None
    try:
        doc = json.loads(raw)
    except ValueError:
        doc = {}
    doc = doc if isinstance(doc, dict) else {}
    return {**doc, "state": lease_state(doc)}


class TargetLock:
    def __init__(self, target: Target, *, break_lock: bool = False):
        self.target = target
        self.path = target.path(LOCK_NAME)
        self.break_lock = break_lock
        self.token = uuid.uuid4().hex
        self.lease = lease_seconds()
        self.store = target.driver.lease(target, self.path)
        self.version: str | None = (
            None  # of the lock object this publisher wrote last (ETag, generation...)
        )
        self.lost: str | None = None
        self.broken: str | None = (
            None  # whose lease this publish broke, and why (reported, never silent)
        )
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    # -- the object --------------------------------------------------------------------------------
    def _body(self) -> bytes:
        try:
            user = getpass.getuser()
        except Exception:  # noqa: BLE001 - no passwd entry in some containers
            user = "?"
        now = time.time()
        return json.dumps(
            {
                "holder": f"{user}@{socket.gethostname()}",
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "token": self.token,
                "since": getattr(self, "_since", utc_iso(now)),
                "expires_at": utc_iso(now + self.lease),
                "lease_s": self.lease,
            },
            sort_keys=True,
        ).encode()

    def _create(self) -> None:
        self._since = utc_iso(time.time())
        self.version = self.store.create(self._body())

    def _read(self) -> tuple[bytes | None, str | None]:
        """(raw body, version) of the current lock, consistent with each other; (None, None) if
        there is none."""
        return self.store.read()

    @staticmethod
    def _doc(raw: bytes | None) -> dict:
        try:
            doc = json.loads(raw or b"")
        except ValueError:
            return {}
        return doc if isinstance(doc, dict) else {}

    def _stale(self, holder: dict) -> bool:
        """Held by a process on this host that no longer exists (a killed publish)."""
        if holder.get("host") != socket.gethostname() or not isinstance(holder.get("pid"), int):
            return False
        try:
            os.kill(holder["pid"], 0)
            return False
        except ProcessLookupError:
            return True
        except PermissionError:
            return False

    def _break(self, raw: bytes, version: str | None) -> bool:
        """Remove the lock only if it is still the version judged breakable; False if someone else
        moved first."""
        if version is None:
            return False
        try:
            self.store.delete(version)
        except Moved:
            return False
        return True

    # -- the lease ---------------------------------------------------------------------------------
    def _renew(self) -> None:
        try:
            self.version = self.store.replace(self._body(), self.version)
        except Moved:
            raise RuntimeError(
                "the lock is no longer ours (replaced or broken by another publisher)"
            ) from None

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.lease / 3):
            try:
                self._renew()
            except Exception as e:  # noqa: BLE001 - reported by check_held before the next irreversible step
                self.lost = f"{type(e).__name__}: {e}"
                return

    def check_held(self) -> None:
        """Before an irreversible step (the switch, the manifest): the lease must still be ours."""
        if self.lost:
            raise PublishError(
                f"lost the publish lock while publishing ({self.lost}); nothing was switched "
                "after that",
                where=self.target.url,
                hint="re-run publish: it resumes; if another publish took over, let it finish",
            )

    # -- context manager ---------------------------------------------------------------------------
    def _hold(self) -> TargetLock:
        self._beat = threading.Thread(target=self._heartbeat, name="tritonbuild-lock", daemon=True)
        self._beat.start()
        return self

    def __enter__(self) -> TargetLock:
        for attempt in range(3):
            try:
                self._create()
                return self._hold()
            except FileExistsError:
                raw, etag = self._read()
                if raw is None:
                    continue  # released meanwhile
                holder = self._doc(raw)
                if (
                    holder.get("token") == self.token
                ):  # a retried create whose first attempt landed: ours
                    self.version = etag
                    return self._hold()
                state = lease_state(holder)
                if attempt < 2 and (self.break_lock or state == "expired" or self._stale(holder)):
                    try:
                        if self._break(raw, etag):
                            self.broken = _broken_note(holder, state, self.break_lock)
                            continue
                    except Exception as e:  # noqa: BLE001
                        raise storage_error(
                            self.target, "break the expired publish lock", e
                        ) from None
                who = (
                    f"{holder.get('holder') or holder.get('host', '?')} pid "
                    f"{holder.get('pid', '?')} since {holder.get('since', '?')}"
                )
                until = (
                    f"; its lease runs until {holder['expires_at']}"
                    if state == "live"
                    else "; it has no expiry (written by an older tritonbuild)"
                    if state == "no-expiry"
                    else ""
                )
                raise PublishError(
                    f"another publish to this target is in progress ({who}{until})",
                    where=self.target.url,
                    hint="wait for it to finish (a killed publisher's lease expires by itself); "
                    "--break-lock removes it now",
                ) from None
            except (NotADirectoryError, IsADirectoryError) as e:
                raise PublishError(
                    f"cannot create the publish lock: {e.strerror}: {self.path}",
                    where=self.target.url,
                    hint="the target must be a directory",
                ) from None
            except PublishError:
                raise
            except Exception as e:  # noqa: BLE001
                raise storage_error(self.target, "take the publish lock", e) from None
        raise PublishError(
            "could not take the publish lock", where=self.target.url, hint="try again"
        )

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._beat is not None:
            self._beat.join(timeout=30)
        try:
            if self.version is not None and not self.lost:
                self.store.delete(self.version)
        except Exception:  # noqa: BLE001 - never mask the real outcome; a leftover lease expires by itself
            pass


def _broken_note(holder: dict, state: str, forced: bool) -> str:
    """One line for the receipt and the log: whose lease was broken, and why it was breakable."""
    who = f"{holder.get('holder') or holder.get('host', '?')} pid {holder.get('pid', '?')}"
    why = (
        "--break-lock"
        if forced
        else f"its lease expired at {holder.get('expires_at')}"
        if state == "expired"
        else "its process no longer exists on this host"
    )
    return f"broke the publish lock of {who} (since {holder.get('since', '?')}): {why}"
