"""The build cache's and the embedded server environment's upkeep (cache gc / verify, embedded
install / show), as typed results whose to_dict() is the JSON the CLI prints."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tritonbuild.core import cachedir
from tritonbuild.core.cas import Store
from tritonbuild.core.results import Result


@dataclass
class CacheGc(Result):
    """What cache gc evicted (record keys), freed (bytes, and per kind of file) and kept."""

    evicted_records: list[str]
    freed_bytes: int
    removed_bytes: dict[str, int]
    kept_records: int
    kept_blob_bytes: int
    kept_bytes: int


@dataclass
class CacheCheck(Result):
    """What cache verify re-hashed, found corrupt and evicted (record keys)."""

    blobs_checked: int
    corrupt_blobs: list[str]
    evicted_records: list[str]


@dataclass
class EmbeddedEnvironment(Result):
    """The embedded server's Python environment: its path (None: not made yet), Python minor,
    package versions, the extra packages asked for, where environments go, made by this call."""

    path: str | None
    python_minor: str | None
    versions: dict[str, str]
    packages: list[str]
    envs_dir: str
    made: bool


def cache_store(cache_dir: Path | None = None) -> Store:
    return Store(cachedir.resolve(cache_dir))


def cache_gc(max_bytes: int, cache_dir: Path | None = None) -> CacheGc:
    """Evict least-recently-used cache entries until the cache fits in max_bytes."""
    return CacheGc(**cache_store(cache_dir).gc(max_bytes))


def cache_verify(cache_dir: Path | None = None) -> CacheCheck:
    """Re-hash every cached file; corrupt ones are evicted."""
    return CacheCheck(**cache_store(cache_dir).verify())


def embedded_environment(
    *, make: bool = True, progress: Callable[[str], None] | None = None
) -> EmbeddedEnvironment:
    """Where the embedded server's environment is and what it holds, made first when make."""
    from tritonbuild.server.toolenv import summary

    return EmbeddedEnvironment(**summary(make=make, progress=progress))
