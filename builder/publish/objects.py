"""Reading and writing objects at a target: atomic single-object writes, uploads, listings (retries
are the drivers' own: core/objstore.py)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from tritonbuild.core.fsutil import is_temporary
from tritonbuild.core.progress import Reporter
from tritonbuild.core.stores import is_url
from tritonbuild.errors import PublishError
from tritonbuild.publish.models import TARGET_MANIFEST, Action, TargetManifest
from tritonbuild.publish.target import Target, storage_error
from tritonbuild.repository.manifest import target_manifest_shape


def write_bytes(target: Target, path: str, data: bytes) -> None:
    """One object, all or nothing (os.replace locally; a single PUT on object stores: the target's
    driver)."""
    _retry(target, f"write {path}", lambda: target.driver.write(target.fs, target.root, path, data))


def upload(target: Target, local: Path, path: str, reporter: Reporter) -> None:
    _retry(
        target,
        f"upload {path}",
        lambda: target.driver.upload(target.fs, target.root, local, path, reporter.advance),
    )


def _retry(target: Target, action: str, fn) -> None:
    """One call: the drivers retry what is transient themselves (botocore's standard mode, with
    jitter; see core/objstore.py); a second loop here would multiply their attempts and retry
    permanent errors too."""
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
        rel = path[len(base) :] if path.startswith(base) else path.split(base, 1)[-1]
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
            raise PublishError(
                f"{TARGET_MANIFEST} at {target.url} is a build manifest (what 'tritonbuild build' "
                "writes into OUT), not a publish target's: this prefix holds a built repository "
                "copied as it is",
                where=target.url,
                hint="publish the built directory there instead ('tritonbuild publish OUT URL' to "
                "an empty prefix), or serve the directory itself ('tritonbuild serve OUT')",
            ) from None
        first = e.errors()[0] if hasattr(e, "errors") and e.errors() else None
        why = (
            f"{'.'.join(map(str, first['loc'])) or 'document'}: {first['msg']}" if first else str(e)
        )
        raise PublishError(
            f"{TARGET_MANIFEST} at the target is not a tritonbuild target manifest ({why})",
            where=target.url,
            hint="publish to an empty prefix, or restore that file",
        ) from None


def _is_build_manifest(data: bytes) -> bool:
    """The build manifest (repository/manifest.py: models as a list, files, toolchain), not the
    target's."""
    try:
        doc = json.loads(data)
    except ValueError:
        return False
    return (
        isinstance(doc, dict)
        and isinstance(doc.get("models"), list)
        and "files" in doc
        and "toolchain" in doc
    )


def read_text(target: Target, path: str) -> bytes | None:
    try:
        return target.fs.cat_file(path)
    except FileNotFoundError:
        return None
    except Exception as e:  # noqa: BLE001
        raise storage_error(target, f"read {path}", e) from None


def remove_tree(target: Target, path: str) -> None:
    try:
        target.driver.remove(target.fs, path)
    except Exception as e:  # noqa: BLE001
        raise storage_error(target, f"remove {path}", e) from None


def check_reachable(target: Target) -> None:
    """Fail before changing anything when the bucket is missing, credentials are bad, or the
    endpoint is down."""
    try:
        target.driver.reach(target.fs, target.root, target.url)
    except PublishError:
        raise
    except Exception as e:  # noqa: BLE001
        raise storage_error(target, "reach the target", e) from None


def subdirs(target, path: str) -> list[str]:
    """Names of the directories directly under path ([] when path does not exist)."""
    try:
        return [
            e["name"].rstrip("/").rsplit("/", 1)[-1]
            for e in target.fs.ls(path, detail=True, refresh=True)
            if e.get("type") == "directory"
        ]
    except FileNotFoundError:
        return []


def abort_multipart_uploads(target: Target) -> list[Action]:
    """Unfinished uploads a killed publish left under the target's prefix (S3 multipart uploads:
    invisible to listings, billed until aborted), aborted by the target's driver. Called with the
    publish lock held: no live publisher owns one."""
    try:
        aborted = target.driver.abort_uploads(target.fs, target.root)
    except Exception as e:  # noqa: BLE001
        raise storage_error(target, "list or abort interrupted multipart uploads", e) from None
    return [
        Action(
            model=rel.split("/", 1)[0],
            version=None,
            action="abort",
            path=rel,
            detail=f"multipart upload left by an interrupted publish (started {started})",
        )
        for rel, started in aborted
    ]


def clean_temporaries(target: Target) -> list[Action]:
    """Temporaries a killed publish left at a local target: at the root (where they are written),
    and inside model and version directories (where tritonbuild before this release wrote them).
    Called with the publish lock held: no live publisher is writing one."""
    if not target.driver.local or not os.path.isdir(target.root):
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
            actions.append(
                Action(
                    model=rel.split("/", 1)[0] if "/" in rel else "",
                    version=None,
                    action="clean",
                    path=rel,
                    detail="temporary left by an interrupted publish",
                )
            )
    return actions


def clean_leftovers(target: Target, broken_lock: str | None, reporter: Reporter) -> list[Action]:
    """What an interrupted publish left behind, removed under the lock: its lease (broken while
    taking the lock: said here, in the receipt and the log), S3 multipart uploads, local
    temporaries."""
    from tritonbuild.publish.models import LOCK_NAME

    actions = []
    if broken_lock:
        reporter.status(f"warning: {broken_lock}")
        actions.append(
            Action(model="", version=None, action="clean", path=LOCK_NAME, detail=broken_lock)
        )
    return actions + abort_multipart_uploads(target) + clean_temporaries(target)


def local_target_url(path: str | Path) -> str | None:
    """A directory on this machine holding a publish target (a file:// target named by its path, or a
    copy synced from cloud storage): its file:// URL, which verify and serve read as a target (its live
    versions, their goldens and portable numerics). Anything else: None."""
    try:
        data = json.loads((Path(path) / TARGET_MANIFEST).read_bytes())
        if not target_manifest_shape(data):
            return None
        TargetManifest.model_validate(data)
    except (OSError, ValueError):
        return None
    return Path(path).resolve().as_uri()


def target_url(value: str | Path) -> str | None:
    """What names a publish target: a URL as given, a directory holding one as its file:// URL
    (local_target_url); None for anything else (a built repository, a plain directory)."""
    return str(value) if is_url(str(value)) else local_target_url(value)
