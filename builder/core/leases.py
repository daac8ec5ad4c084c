"""The conditional-write primitives each kind of store offers the publish lock (publish/lock.py),
one class per store; each store's driver (core/stores.py) names its class.

Every store gives the same four operations on the lock object, each conditional on what the caller
saw, so two publishers (or two breakers of an expired lease) can never both win:

| store | create only if absent | version | replace / delete only if unchanged |
|---------|------------------------------|----------------|------------------------------------------|
| file:// | open(O_CREAT / O_EXCL) | sha256 of body | token check + rename / rename, then check | |
s3:// | PUT If-None-Match: * | ETag | PUT / DELETE If-Match: ETag | | gs:// | upload
ifGenerationMatch=0 | generation | upload / DELETE ifGenerationMatch=gen | | az:// | Put Blob
If-None-Match: * | ETag | Put Blob / Delete Blob If-Match: ETag |

create raises FileExistsError when the object exists; replace and delete raise Moved when it is no
longer the version given (delete of an object already gone is not an error).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path

from tritonbuild.core.objstore import error_code, within_deadline

PRECONDITION_CODES = ("PreconditionFailed", "ConditionalRequestConflict", "ConditionNotMet")


class Moved(Exception):
    """The lock object is no longer the version the caller saw: someone else renewed, replaced or
    broke it."""


class LeaseStore:
    def __init__(self, target, path: str):
        self.target, self.path, self.fs = target, path, target.fs

    def create(self, body: bytes) -> str | None:
        raise NotImplementedError

    def read(self) -> tuple[bytes | None, str | None]:
        raise NotImplementedError

    def replace(self, body: bytes, version: str | None) -> str | None:
        raise NotImplementedError

    def delete(self, version: str | None) -> None:
        raise NotImplementedError


def _digest(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


class LocalLease(LeaseStore):
    """One host's filesystem: O_EXCL creates; a rename moves the lock aside before it is judged, so
    of two breakers only the one that moved the version it saw removes it."""

    def create(self, body: bytes) -> str | None:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(body)
        return _digest(body)

    def read(self) -> tuple[bytes | None, str | None]:
        try:
            raw = Path(self.path).read_bytes()
        except FileNotFoundError:
            return None, None
        return raw, _digest(raw)

    def replace(self, body: bytes, version: str | None) -> str | None:
        from tritonbuild.core.fsutil import write_atomic

        if self.read()[1] != version:
            raise Moved(self.path)
        write_atomic(Path(self.path), body)
        return _digest(body)

    def delete(self, version: str | None) -> None:
        aside = f"{self.path}.broken-{os.getpid()}-{id(self)}"
        try:
            os.rename(self.path, aside)
        except FileNotFoundError:
            return
        moved = Path(aside).read_bytes()
        if (
            _digest(moved) != version
        ):  # renewed or replaced between the read and the rename: put it back
            with contextlib.suppress(FileExistsError):
                os.link(aside, self.path)
            os.unlink(aside)
            raise Moved(self.path)
        os.unlink(aside)


def _precondition(e: BaseException) -> bool:
    return (error_code(e) or "") in PRECONDITION_CODES or getattr(e, "status_code", None) == 412


class S3Lease(LeaseStore):
    def _call(self, method: str, **kw):
        bucket, key, _ = self.fs.split_path(self.path)
        return self.fs.call_s3(method, Bucket=bucket, Key=key, **kw)

    def create(self, body: bytes) -> str | None:
        try:
            return self._call("put_object", Body=body, IfNoneMatch="*").get("ETag")
        except FileExistsError:
            raise
        except Exception as e:
            if _precondition(e):
                raise FileExistsError(self.path) from None
            raise

    def read(self) -> tuple[bytes | None, str | None]:
        for _ in range(3):
            try:
                before = self.fs.info(self.path, refresh=True).get("ETag")
                raw = self.fs.cat_file(self.path)
                if self.fs.info(self.path, refresh=True).get("ETag") == before:
                    return raw, before
            except FileNotFoundError:
                return None, None
        return (
            raw,
            None,
        )  # changing under us: no version, so no conditional call can succeed with it

    def replace(self, body: bytes, version: str | None) -> str | None:
        try:
            return self._call("put_object", Body=body, IfMatch=version).get("ETag")
        except Exception as e:
            if _precondition(e):
                raise Moved(self.path) from None
            raise

    def delete(self, version: str | None) -> None:
        try:
            self._call("delete_object", IfMatch=version)
        except FileNotFoundError:
            return
        except Exception as e:
            if _precondition(e):
                raise Moved(self.path) from None
            raise


class GCSLease(LeaseStore):
    """Generations: a create is an upload with ifGenerationMatch=0; a replace or delete names the
    generation it saw (412 otherwise, which gcsfs raises as FileExistsError)."""

    def _names(self) -> tuple[str, str]:
        bucket, key, _ = self.fs.split_path(self.path)
        return bucket, key

    def _upload(self, body: bytes, generation: str) -> str | None:
        """One multipart upload (the JSON API's objects.insert) conditional on the object's
        generation."""
        import json

        bucket, key = self._names()
        location = f"{self.fs._location}/upload/storage/v1/b/{bucket}/o"
        data = (
            b"--==0==\nContent-Type: application/json; charset=UTF-8\n\n"
            + json.dumps({"name": key}).encode()
            + b"\n--==0==\nContent-Type: application/json\n\n"
            + body
            + b"\n--==0==--"
        )
        meta = self.fs.call(
            "POST",
            location,
            uploadType="multipart",
            ifGenerationMatch=generation,
            data=data,
            headers={"Content-Type": 'multipart/related; boundary="==0=="'},
            json_out=True,
        )
        return str(meta.get("generation")) if meta.get("generation") is not None else None

    def create(self, body: bytes) -> str | None:
        return self._upload(body, "0")  # FileExistsError when present

    def read(self) -> tuple[bytes | None, str | None]:
        bucket, key = self._names()
        for _ in range(3):
            try:
                generation = str(self.fs.info(self.path, refresh=True).get("generation"))
                _, raw = self.fs.call(
                    "GET", "b/{}/o/{}", bucket, key, alt="media", generation=generation
                )
                return raw, generation
            except FileNotFoundError:
                continue  # gone, or replaced between the two requests: look again
        return None, None

    def replace(self, body: bytes, version: str | None) -> str | None:
        try:
            return self._upload(body, str(version))
        except FileExistsError:
            raise Moved(self.path) from None

    def delete(self, version: str | None) -> None:
        bucket, key = self._names()
        try:
            self.fs.call("DELETE", "b/{}/o/{}", bucket, key, ifGenerationMatch=str(version))
        except FileNotFoundError:
            return
        except FileExistsError:
            raise Moved(self.path) from None


class AzureLease(LeaseStore):
    """ETags through the Azure SDK's blob client (adlfs's own service client): If-None-Match: * to
    create, If-Match on the ETag seen to replace or delete."""

    def _blob(self):
        container, blob = self.path.split("/", 1)
        return self.fs.service_client.get_blob_client(container, blob)

    def _run(self, make, what: str):
        from fsspec.asyn import sync

        return within_deadline(lambda: sync(self.fs.loop, make), what)

    def create(self, body: bytes) -> str | None:
        from azure.core.exceptions import ResourceExistsError

        try:
            return self._run(
                lambda: self._blob().upload_blob(body, overwrite=False), "create the lock"
            )["etag"]
        except ResourceExistsError:
            raise FileExistsError(self.path) from None

    def read(self) -> tuple[bytes | None, str | None]:
        from azure.core.exceptions import ResourceNotFoundError

        async def get():
            stream = await self._blob().download_blob()
            return await stream.readall(), stream.properties.etag  # one response: consistent

        try:
            return self._run(get, "read the lock")
        except ResourceNotFoundError:
            return None, None

    def _conditional(self, make, what: str):
        from azure.core.exceptions import ResourceModifiedError, ResourceNotFoundError

        try:
            return self._run(make, what)
        except ResourceModifiedError:
            raise Moved(self.path) from None
        except ResourceNotFoundError:
            return None

    def replace(self, body: bytes, version: str | None) -> str | None:
        from azure.core import MatchConditions

        got = self._conditional(
            lambda: self._blob().upload_blob(
                body, overwrite=True, etag=version, match_condition=MatchConditions.IfNotModified
            ),
            "renew the lock",
        )
        if got is None:
            raise Moved(self.path)
        return got["etag"]

    def delete(self, version: str | None) -> None:
        from azure.core import MatchConditions

        self._conditional(
            lambda: self._blob().delete_blob(
                etag=version, match_condition=MatchConditions.IfNotModified
            ),
            "remove the lock",
        )
