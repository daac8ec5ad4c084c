"""Reading and writing objects at a target: atomic single-object writes, uploads, listings (retries are the
drivers' own: core/objstore.py)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

from tritonbuild.core.fsutil import atomic_writer, is_temporary, write_atomic
from tritonbuild.core.progress import Reporter
from tritonbuild.errors import PublishError
from tritonbuild.publish.models import TARGET_MANIFEST, Action, TargetManifest
from tritonbuild.publish.target import Target, storage_error


def write_bytes(target: Target, path: str, data: bytes) -> None:
    """One object, all or nothing: os.replace locally; a single PUT on object stores."""
    _retry(target, f"write {path}", lambda: _write_bytes_once(target, path, data))


def _local_tmp_dir(target: Target) -> Path:
    """Where a local target's temporaries live while written: the target root, as plain files. Triton reads
    only the directories of a repository's root (each one a model), so a publish killed mid-write leaves
    nothing inside a model or version directory; the next publish removes what is left (clean_temporaries)."""
    root = Path(target.root)
    root.mkdir(parents=True, exist_ok=True)
    return root


def _write_bytes_once(target: Target, path: str, data: bytes) -> None:
    if target.is_local:
        write_atomic(Path(path), data, _local_tmp_dir(target))
    else:
        target.fs.pipe_file(path, data)


def upload(target: Target, local: Path, path: str, reporter: Reporter) -> None:
    _retry(target, f"upload {path}", lambda: _upload_once(target, local, path, reporter))


def _upload_once(target: Target, local: Path, path: str, reporter: Reporter) -> None:
    if target.is_local:
        with open(local, "rb") as src, atomic_writer(Path(path), _local_tmp_dir(target)) as dst:
            # NOTE: copy_file_range copies inside the kernel (and reflinks where the filesystem can);
            # 1 GiB steps: smaller ones measured 2x slower here; progress moves per GiB.
            while n := os.copy_file_range(src.fileno(), dst.fileno(), 1 << 30):
                reporter.advance(n)
        return
    from fsspec.callbacks import Callback

    class _Bytes(Callback):
        def relative_update(self, inc=1):
            reporter.advance(inc)

    # NOTE: s3fs switches to multipart uploads above its chunk size (50 MiB) by itself.
    target.fs.put_file(str(local), path, callback=_Bytes())


def _retry(target: Target, action: str, fn) -> None:
    """One call: the drivers retry what is transient themselves (botocore's standard mode, with jitter; see
    core/objstore.py); a second loop here would multiply their attempts and retry permanent errors too."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - every driver error is reported with the target and the fix
        raise storage_error(target, action, e) from None


def remote_sizes(target: Target, prefix: str) -> dict[str, int]:
    """prefix-relative path → size of every object under prefix ({} if there are none)."""
    try:
        found = target.fs.find(prefix, detail=True)
    except FileNotFoundError:
        return {}
    except Exception as e:  # noqa: BLE001
        raise storage_error(target, f"list {prefix}", e) from None
    base = prefix.rstrip("/") + "/"
    out = {}
    for path, info in found.items():
        rel = path[len(base):] if path.startswith(base) else path.split(base, 1)[-1]
        if info.get("type", "file") == "file" and not is_temporary(os.path.basename(rel)):
            out[rel] = int(info.get("size") or 0)
    return out


def remote_sha256(target: Target, path: str) -> str:
    h = hashlib.sha256()
    with target.fs.open(path, "rb") as f:
        while chunk := f.read(8 << 20):
            h.update(chunk)
    return h.hexdigest()


def read_state(target: Target) -> TargetManifest:
    try:
        data = target.fs.cat_file(target.path(TARGET_MANIFEST))
    except FileNotFoundError:
        return TargetManifest()
    except Exception as e:  # noqa: BLE001
        raise storage_error(target, "read the target manifest", e) from None
    try:
        return TargetManifest.model_validate_json(data)
    except ValueError as e:
        if _is_build_manifest(data):
            raise PublishError(f"{TARGET_MANIFEST} at {target.url} is a build manifest (what 'tritonbuild build' "
                               "writes into OUT), not a publish target's: this prefix holds a built repository "
                               "copied as it is", where=target.url,
                               hint="publish the built directory there instead ('tritonbuild publish OUT URL' to "
                                    "an empty prefix), or serve the directory itself ('tritonbuild serve OUT')"
                               ) from None
        first = e.errors()[0] if hasattr(e, "errors") and e.errors() else None
        why = f"{'.'.join(map(str, first['loc'])) or 'document'}: {first['msg']}" if first else str(e)
        raise PublishError(f"{TARGET_MANIFEST} at the target is not a tritonbuild target manifest ({why})",
                           where=target.url, hint="publish to an empty prefix, or restore that file") from None


def _is_build_manifest(data: bytes) -> bool:
    """The build manifest (repository/manifest.py: models as a list, files, toolchain), not the target's."""
    try:
        doc = json.loads(data)
    except ValueError:
        return False
    return isinstance(doc, dict) and isinstance(doc.get("models"), list) and "files" in doc and "toolchain" in doc


def read_text(target: Target, path: str) -> bytes | None:
    try:
        return target.fs.cat_file(path)
    except FileNotFoundError:
        return None
    except Exception as e:  # noqa: BLE001
        raise storage_error(target, f"read {path}", e) from None


def remove_tree(target: Target, path: str) -> None:
    try:
        if target.is_local:
            if os.path.isdir(path):
                shutil.rmtree(path)
            elif os.path.exists(path):
                os.unlink(path)
        elif target.fs.exists(path):
            target.fs.rm(path, recursive=True)
    except Exception as e:  # noqa: BLE001
        raise storage_error(target, f"remove {path}", e) from None


def check_reachable(target: Target) -> None:
    """Fail before changing anything when the bucket is missing, credentials are bad, or the endpoint is down."""
    try:
        if target.is_local:
            root = Path(target.root)
            if root.exists() and not root.is_dir():
                raise PublishError(f"{root} is a file, not a directory: a target is a directory of models",
                                   where=target.url, hint="pick another path, or move that file away")
            parent = root.parent
            if not parent.is_dir():
                raise PublishError(f"{parent} does not exist", where=target.url, hint="create it first")
            return
        bucket = target.root.split("/", 1)[0]
        target.fs.ls(bucket, refresh=True)
    except PublishError:
        raise
    except Exception as e:  # noqa: BLE001
        raise storage_error(target, "reach the target", e) from None


def subdirs(target, path: str) -> list[str]:
    """Names of the directories directly under path ([] when path does not exist)."""
    try:
        return [e["name"].rstrip("/").rsplit("/", 1)[-1] for e in target.fs.ls(path, detail=True, refresh=True)
                if e.get("type") == "directory"]
    except FileNotFoundError:
        return []


def abort_multipart_uploads(target: Target) -> list[Action]:
    """S3 multipart uploads left under the target's prefix by a killed publish (they are invisible to listings
    and billed until aborted). Called with the publish lock held: no live publisher owns one."""
    if not target.driver.multipart:
        return []
    bucket, prefix, _ = target.fs.split_path(target.root)
    prefix = f"{prefix.rstrip('/')}/" if prefix else ""
    actions = []
    try:
        found = target.fs.call_s3("list_multipart_uploads", Bucket=bucket, Prefix=prefix)
        for up in found.get("Uploads", []):
            target.fs.call_s3("abort_multipart_upload", Bucket=bucket, Key=up["Key"], UploadId=up["UploadId"])
            rel = up["Key"][len(prefix):]
            actions.append(Action(model=rel.split("/", 1)[0], version=None, action="abort", path=rel,
                                  detail=f"multipart upload left by an interrupted publish (started "
                                         f"{up.get('Initiated', '?')})"))
    except Exception as e:  # noqa: BLE001
        raise storage_error(target, "list or abort interrupted multipart uploads", e) from None
    return actions


def clean_temporaries(target: Target) -> list[Action]:
    """Temporaries a killed publish left at a local target: at the root (where they are written), and inside
    model and version directories (where tritonbuild before this release wrote them). Called with the publish
    lock held: no live publisher is writing one."""
    if not target.is_local or not os.path.isdir(target.root):
        return []
    actions = []
    for dirpath, _dirs, names in os.walk(target.root):
        for name in sorted(n for n in names if is_temporary(n)):
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, target.root)
            try:
                os.unlink(path)
            except FileNotFoundError:
                continue
            except OSError as e:
                raise storage_error(target, f"remove the leftover temporary {rel}", e) from None
            actions.append(Action(model=rel.split("/", 1)[0] if "/" in rel else "", version=None, action="clean",
                                  path=rel, detail="temporary left by an interrupted publish"))
    return actions


def clean_leftovers(target: Target, broken_lock: str | None, reporter: Reporter) -> list[Action]:
    """What an interrupted publish left behind, removed under the lock: its lease (broken while taking the lock:
    said here, in the receipt and the log), S3 multipart uploads, local temporaries."""
    from tritonbuild.publish.models import LOCK_NAME

    actions = []
    if broken_lock:
        reporter.status(f"warning: {broken_lock}")
        actions.append(Action(model="", version=None, action="clean", path=LOCK_NAME, detail=broken_lock))
    return actions + abort_multipart_uploads(target) + clean_temporaries(target)
