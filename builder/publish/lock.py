"""One publisher per target: a lock object created only if absent (S3 If-None-Match, O_EXCL locally)."""

from __future__ import annotations

import json
import os
import socket
import time
import uuid

from tritonbuild.errors import PublishError
from tritonbuild.publish.models import LOCK_NAME
from tritonbuild.publish.target import Target, storage_error


class TargetLock:
    def __init__(self, target: Target, *, break_lock: bool = False):
        self.target = target
        self.path = target.path(LOCK_NAME)
        self.break_lock = break_lock
        self.token = uuid.uuid4().hex
        self.body = json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "token": self.token,
                                "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}).encode()

    def _create(self) -> None:
        if self.target.is_local:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            with os.fdopen(fd, "wb") as f:
                f.write(self.body)
        else:
            self.target.fs.pipe_file(self.path, self.body, mode="create")

    def _holder(self) -> dict:
        try:
            return json.loads(self.target.fs.cat_file(self.path))
        except Exception:  # noqa: BLE001 - a lock we cannot read is still a lock
            return {}

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

    def __enter__(self) -> TargetLock:
        for attempt in range(2):
            try:
                self._create()
                return self
            except FileExistsError:
                holder = self._holder()
                if attempt == 0 and (self.break_lock or self._stale(holder)):
                    self.target.fs.rm_file(self.path)
                    continue
                who = f"{holder.get('host', '?')} pid {holder.get('pid', '?')} since {holder.get('since', '?')}"
                raise PublishError(f"another publish to this target is in progress ({who})", where=self.target.url,
                                   hint="wait for it to finish; if it died on another machine, re-run with "
                                        "--break-lock") from None
            except PublishError:
                raise
            except Exception as e:  # noqa: BLE001
                raise storage_error(self.target, "take the publish lock", e) from None
        raise PublishError("could not take the publish lock", where=self.target.url, hint="try again")

    def __exit__(self, *exc) -> None:
        try:
            if self._holder().get("token") == self.token:
                self.target.fs.rm_file(self.path)
        except Exception:  # noqa: BLE001 - never mask the real outcome; a leftover lock is reported next time
            pass
