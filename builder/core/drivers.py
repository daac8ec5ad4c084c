"""What a store driver is (`Driver`: the facts and operations every kind of store answers for) and
the driver of a directory on this host (`LocalDriver`). The object stores' drivers are in
core/cloud_drivers.py; core/stores.py registers them all by scheme."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tritonbuild.core import leases
from tritonbuild.core.fsutil import atomic_writer, write_atomic
from tritonbuild.core.location import Location
from tritonbuild.core.objstore import BoundedFS, classify, within_deadline
from tritonbuild.errors import PublishError


class Driver:
    """One kind of store. Subclasses set the facts and override what differs."""

    name = "store"
    schemes: tuple[str, ...] = ()
    package: str | None = None  # the fsspec implementation, installed by the extra
    extra: str | None = None  # pip install 'tritonbuild[extra]'
    local = False  # a directory on this host: atomic renames, temporaries, O_EXCL
    lease: type[leases.LeaseStore] = leases.LeaseStore
    credentials = ""  # where its credentials come from (for the fix of a refused request)
    endpoint_hint = ""  # what points it at an endpoint (for the fix of an unreachable one)
    # the service's error codes for a missing bucket/container
    no_bucket_codes: frozenset[str] = frozenset()
    denied_codes: frozenset[str] = frozenset()  # ... and for refused credentials
    # -- what a tritonserver reading this store needs (tests/contracts/facts/kubernetes.json,
    # store_credentials: server docs/user_guide/model_repository.md) -------------------------------
    # its --model-repository prefix; None: it cannot read the store (deploy-snippets refuses it)
    triton_scheme: str | None = None
    triton_env: tuple[str, ...] = ()  # credentials it reads, passed to a container by name
    secret_env: tuple[str, ...] = ()  # variables whose values are secrets: redacted wherever seen
    secret_keys = ""  # what the pods' Kubernetes Secret must hold (said by deploy-snippets)
    # Secret keys mounted as files under secret_folder: (the variable that names it, the file) each;
    # without any the Secret's keys become the container's environment
    secret_files: tuple[tuple[str, str], ...] = ()
    secret_folder = ""
    endpoint_env: tuple[str, ...] = ()  # variables an endpoint not given is read from, first wins

    def example(self) -> str:
        return f"{self.schemes[0]}://bucket/prefix"

    def endpoint(self, given: str | None) -> str | None:
        """The service endpoint this store is reached at, where it has a choice (S3-compatible
        ones: those naming endpoint_env): the one given, else the first of endpoint_env set."""
        if not self.endpoint_env:
            return None
        return given or next(filter(None, map(os.environ.get, self.endpoint_env)), None)

    def endpoint_source(self) -> str:
        """The variable an endpoint not given comes from (the first of endpoint_env set)."""
        return next(
            (name for name in self.endpoint_env if os.environ.get(name)), self.endpoint_env[-1]
        )

    def check(self, location: Location) -> None:
        if not location.path.strip("/"):
            raise PublishError(
                "the target names no bucket", where=location.url, hint=f"use {self.example()}"
            )

    def options(self, location: Location) -> dict:
        """fsspec storage_options: this store's timeouts and retries, cut to the network
        deadline."""
        return {}

    def settle(self, fs):
        """The filesystem as tritonbuild uses it (one retry layer, the deadline on every small
        call)."""
        return BoundedFS(fs)

    def open(self, location: Location):
        """(filesystem, root path) for a location; the driver may ask the network for credentials
        while it is made (gcsfs), so that is under the deadline too. ImportError when its package is
        missing."""
        from fsspec.core import url_to_fs

        options = self.options(location)
        fs, root = within_deadline(
            lambda: url_to_fs(location.raw, **options), f"open {location.scheme}://"
        )
        return self.settle(fs), root

    def triton_url(self, location: Location, root: str) -> str:
        """The --model-repository string tritonserver understands for this place."""
        return f"{self.triton_scheme or location.scheme}://{root}"

    def serving_problem(self, location: Location) -> tuple[str, str] | None:
        """(what, fix) where a tritonserver elsewhere (a pod) could not read this place from what
        this machine knows of it; None when it can."""
        return None

    def failure_types(self) -> tuple[tuple, tuple]:
        """(network errors, missing-credentials errors) of its SDK, for classify; () where not
        installed."""
        return (), ()

    def classify(self, e: BaseException) -> str:
        """'no-bucket', 'denied', 'not-found', 'network' or 'other' (core/objstore.classify, with
        this store's codes and types)."""
        network, nocreds = self.failure_types()
        return classify(
            e,
            no_bucket=self.no_bucket_codes,
            denied=self.denied_codes,
            network=network,
            nocreds=nocreds,
        )

    # -- objects: what differs between a directory on this host and an object store ----------------
    def write(self, fs, root: str, path: str, data: bytes) -> None:
        """One object, all or nothing: a single PUT."""
        fs.pipe_file(path, data)

    def upload(self, fs, root: str, local: Path, path: str, advance) -> None:
        """A local file to path; advance(n) as bytes go (the driver switches to multipart by itself:
        s3fs above its 50 MiB chunk size)."""
        from fsspec.callbacks import Callback

        class _Bytes(Callback):
            def relative_update(self, inc=1):
                advance(inc)

        fs.put_file(str(local), path, callback=_Bytes())

    def remove(self, fs, path: str) -> None:
        if fs.exists(path):
            fs.rm(path, recursive=True)

    def reach(self, fs, root: str, where: str) -> None:
        """Fails when the bucket is missing, credentials are refused or the endpoint does not
        answer."""
        fs.ls(root.split("/", 1)[0], refresh=True)

    def abort_uploads(self, fs, root: str) -> list[tuple[str, str]]:
        """Uploads a killed writer left unfinished under root, aborted: (path under root, when it
        started)."""
        return []


class LocalDriver(Driver):
    name = "local directory"
    schemes = ("file",)
    local = True
    lease = leases.LocalLease

    def example(self) -> str:
        return "file:///abs/path"

    def check(self, location: Location) -> None:
        if not location.path.startswith("/"):
            raise PublishError(
                f"file target {location.url!r} needs an absolute path",
                where=location.url,
                hint="write file:///absolute/path (three slashes)",
            )

    def settle(self, fs):
        return fs

    def triton_url(self, location: Location, root: str) -> str:
        return root

    @staticmethod
    def _temporaries(root: str) -> Path:
        """Where temporaries live while written: the root, as plain files. Triton reads only the
        directories of a repository's root (each one a model), so a writer killed mid-write leaves
        nothing inside a model or version directory (the publisher removes what is left:
        objects.clean_temporaries)."""
        Path(root).mkdir(parents=True, exist_ok=True)
        return Path(root)

    def write(self, fs, root: str, path: str, data: bytes) -> None:
        write_atomic(Path(path), data, self._temporaries(root))  # os.replace: all or nothing

    def upload(self, fs, root: str, local: Path, path: str, advance) -> None:
        with open(local, "rb") as src, atomic_writer(Path(path), self._temporaries(root)) as dst:
            # NOTE: copy_file_range copies inside the kernel (and reflinks where the filesystem
            # can); 1 GiB steps: smaller ones measured 2x slower here; progress moves per GiB.
            while n := os.copy_file_range(src.fileno(), dst.fileno(), 1 << 30):
                advance(n)

    def remove(self, fs, path: str) -> None:
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.exists(path):
            os.unlink(path)

    def reach(self, fs, root: str, where: str) -> None:
        if Path(root).exists() and not Path(root).is_dir():
            raise PublishError(
                f"{root} is a file, not a directory: a target is a directory of models",
                where=where,
                hint="pick another path, or move that file away",
            )
        if not Path(root).parent.is_dir():
            raise PublishError(
                f"{Path(root).parent} does not exist", where=where, hint="create it first"
            )
