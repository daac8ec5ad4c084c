"""The build cache's and the embedded server environment's upkeep (cache gc / verify, embedded
install / show / prune), as typed results whose to_dict() is the JSON the CLI prints."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tritonbuild.core import cachedir
from tritonbuild.core.cas import Store
from tritonbuild.core.results import OMIT_NONE, Result
from tritonbuild.server.envprune import prune
from tritonbuild.server.target import EMBEDDED, ServingTarget, environment_summary
from tritonbuild.server.toolenv import envs_dir


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
    """The embedded server's Python environment: its path (None: not made yet), Python minor, the
    target image's Python minor it was asked for (None: the default one), package versions, the
    extra packages asked for, where environments go, made by this call; target_image only with
    --triton-image."""

    path: str | None
    python_minor: str | None
    target_python: str | None
    versions: dict[str, str]
    packages: list[str]
    envs_dir: str
    made: bool
    target_image: str | None = field(default=None, metadata=OMIT_NONE)
    # --for: what its Python files import here, installed for another Python (server/mirror.py)
    mirrored: list[str] = field(default_factory=list)
    mirror_path: str | None = None
    not_installed_here: list[str] = field(default_factory=list)


@dataclass
class EmbeddedPrune(Result):
    """What embedded prune removed (or would: dry_run) from the envs directory, the bytes that
    frees, and how many environments it kept."""

    envs_dir: str
    removed: list[str]
    freed_bytes: int
    kept: int
    dry_run: bool


def embedded_prune(unused_days: float, *, dry_run: bool = False) -> EmbeddedPrune:
    """The embedded server's environments and mirrors unused for unused_days removed
    (server/envprune.py); dry_run: only say what would be."""
    done = prune(envs_dir(), unused_days, dry_run=dry_run)
    return EmbeddedPrune(str(envs_dir()), done.removed, done.freed_bytes, done.kept, dry_run)


def cache_store(cache_dir: Path | None = None) -> Store:
    return Store(cachedir.resolve(cache_dir))


def cache_gc(max_bytes: int, cache_dir: Path | None = None) -> CacheGc:
    """Evict least-recently-used cache entries until the cache fits in max_bytes."""
    return CacheGc(**cache_store(cache_dir).gc(max_bytes))


def cache_verify(cache_dir: Path | None = None) -> CacheCheck:
    """Re-hash every cached file; corrupt ones are evicted."""
    return CacheCheck(**cache_store(cache_dir).verify())


def embedded_environment(
    *,
    make: bool = True,
    progress: Callable[[str], None] | None = None,
    serving: ServingTarget = EMBEDDED,
    repository: Path | None = None,
) -> EmbeddedEnvironment:
    """Where the embedded server's environment is and what it holds (for the Python of the image
    serving names when it does, else the one a built repository's recipes name), made first when
    make (progress: its lines); with what repository's Python files import here, installed for
    that Python."""
    summary = environment_summary(
        make=make, progress=progress, serving=serving, repository=repository
    )
    return EmbeddedEnvironment(**summary)
