"""A shared build cache on object storage (fsspec: s3://, gs://, az://, file://) for CI runners.

Same layout as the local store (steps/ab/<key>.json, blobs/ab/<sha256>). Local misses are looked up
here before building; built steps are pushed after. Unreachable storage never fails a build: the
first error disables the remote for the rest of the run and is reported once as a warning.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from tritonbuild.core.cas import Store


class RemoteCache:
    def __init__(self, url: str, warn):
        self.url = url.rstrip("/")
        self.warn = warn
        self.disabled = False
        self._fs = None
        self._location = self._parse(self.url)

    @staticmethod
    def _parse(url: str):
        """The URL checked when the cache is named, not at its first miss: a build whose every step
        is cached locally would otherwise never say that --cache-url (or TRITONBUILD_CACHE_URL)
        names nothing usable."""
        from tritonbuild.core.stores import is_url, parse_location
        from tritonbuild.errors import TritonBuildError, UsageError

        try:
            return parse_location(url if is_url(url) else f"file://{os.path.abspath(url)}")
        except TritonBuildError as e:
            raise UsageError(f"--cache-url: {e.message}", where=e.where, hint=e.hint) from None

    def _filesystem(self):
        from tritonbuild.core.stores import driver_for

        if self._fs is None:
            # NOTE: every lookup and small write waits at most the network deadline; blob transfers
            # are bounded by their drivers' per-request timeouts (core/stores.py)
            driver = driver_for(self._location.scheme, self._location.url)
            self._fs, self._root = driver.open(self._location)
        return self._fs

    def _path(self, *parts: str) -> str:
        self._filesystem()
        return "/".join([self._root.rstrip("/"), *parts])

    def _guard(self, action: str, fn):
        if self.disabled:
            return None
        try:
            return fn()
        except FileNotFoundError:
            return None
        except Exception as e:  # noqa: BLE001 - any storage failure degrades to local-only, once
            from tritonbuild.core.secrets import redact

            self.disabled = True
            detail = redact(f"{type(e).__name__}: {e}")
            self.warn(
                f"remote cache {redact(self.url)} unavailable ({action}: {detail}); "
                "building with the local cache only"
            )
            return None

    def exists(self, key: str) -> bool:
        return bool(
            self._guard(
                "look up",
                lambda: self._filesystem().exists(self._path("steps", key[:2], f"{key}.json")),
            )
        )

    def pull(self, store: Store, key: str) -> dict | None:
        """Copy a record and its blobs into the local store (blobs re-hashed on the way in)."""

        def fetch():
            fs = self._filesystem()
            record = json.loads(fs.cat_file(self._path("steps", key[:2], f"{key}.json")))
            for entry in record.get("files", {}).values():
                if store.blob_path(entry["sha256"]).is_file():
                    continue
                (store.root / "tmp").mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(dir=store.root / "tmp")
                os.close(fd)
                try:
                    fs.get_file(self._path("blobs", entry["sha256"][:2], entry["sha256"]), tmp)
                    digest, size = store.put_file(Path(tmp))
                finally:
                    Path(tmp).unlink(missing_ok=True)
                if digest != entry["sha256"] or size != entry["size"]:
                    raise ValueError(f"remote blob {entry['sha256'][:12]} is corrupt")
            store.put_record(key, record)
            return record

        return self._guard("pull", fetch)

    def push(self, store: Store, key: str) -> None:
        def send():
            fs = self._filesystem()
            record = store.read_record(key)
            if record is None:
                return
            for entry in record.get("files", {}).values():
                remote = self._path("blobs", entry["sha256"][:2], entry["sha256"])
                try:
                    if fs.size(remote) == entry["size"]:
                        continue
                except FileNotFoundError:
                    pass
                fs.put_file(str(store.blob_path(entry["sha256"])), remote)
            # NOTE: the record goes last: a reader that sees it finds every blob.
            fs.pipe_file(
                self._path("steps", key[:2], f"{key}.json"),
                json.dumps(record, sort_keys=True).encode(),
            )

        self._guard("push", send)
