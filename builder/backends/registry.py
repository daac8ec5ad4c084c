"""The backend registry: recipe kind → Backend. Registration refuses duplicate names and step kinds.

The built-in backends are registered on first use, from BUILTIN (one line per backend module), then
the installed plug-ins of the `tritonbuild.backends` entry-point group (backends/plugins.py); a
plug-in that cannot be registered is kept as its PluginError, raised where its kind is asked for.
An embedding application (or a test) registers its own with `register`, or for a scope with
`registered`. Either way
each backend's recipe type (declared in its own module) and its rules (check_recipe) reach the
recipe loader and the JSON Schema through `recipe_kinds()`, which api passes down: recipe/ keeps no
list of kinds."""

from __future__ import annotations

import fnmatch
import importlib
from collections.abc import Iterator
from contextlib import contextmanager

from tritonbuild.backends import plugins
from tritonbuild.backends.base import ROUTES, Backend
from tritonbuild.core.toolchain import declare_tools, fingerprint, known_keys
from tritonbuild.errors import PlanError, PluginError
from tritonbuild.recipe.kinds import Kind, Kinds, kind_problem

# module → the attribute holding its Backend instance(s)
BUILTIN = (
    ("tritonbuild.backends.python", "BACKEND"),
    ("tritonbuild.backends.onnxruntime.backend", "BACKEND"),
    ("tritonbuild.backends.pytorch.backend", "BACKEND"),
    ("tritonbuild.backends.tensorrt.backend", "BACKEND"),
    ("tritonbuild.backends.tensorrtllm.backend", "BACKEND"),
    ("tritonbuild.backends.vllm.backend", "BACKEND"),
    ("tritonbuild.backends.composition.backend", "ENSEMBLE"),
    ("tritonbuild.backends.composition.backend", "BLS"),
)


class DuplicateBackend(ValueError):
    pass


class Registry:
    def __init__(self) -> None:
        self._by_name: dict[str, Backend] = {}
        self._by_step: dict[str, Backend] = {}
        self._broken: dict[str, PluginError] = {}
        self._loaded = False

    def _ensure(self) -> None:
        if not self._loaded:
            self._loaded = True
            for module, attr in BUILTIN:
                self.register(getattr(importlib.import_module(module), attr))
            for ep in plugins.entry_points():
                self._register_plugin(ep)

    def _register_plugin(self, ep) -> None:
        """Register one entry point's backend, or keep why it cannot be (a PluginError)."""
        try:
            self.register(plugins.load(ep, set(self._by_name)))
        except PluginError as e:
            self._broken.setdefault(ep.name, e)
        except Exception as e:  # noqa: BLE001 - register's refusals, or the plug-in's own attributes failing
            self._broken.setdefault(
                ep.name, plugins.refused(ep, str(e), "fix the backend's declarations")
            )

    def broken(self) -> list[PluginError]:
        """The installed plug-ins that could not be registered, as far as the registry was loaded
        (nothing before its first use): the CLI warns of each after a command that used it."""
        return list(self._broken.values())

    def register(self, backend: Backend) -> Backend:
        """Add a backend; its name and step kinds must be new, its route one of ROUTES, its recipe
        type a recipe kind of its name, its engine steps among its step kinds."""
        self._ensure()
        if not isinstance(backend, Backend):
            raise TypeError(f"{backend!r} is not a tritonbuild Backend")
        if backend.name in self._by_name:
            raise DuplicateBackend(
                f"a backend named {backend.name!r} is already registered "
                f"({type(self._by_name[backend.name]).__qualname__})"
            )
        taken = sorted(k for k in backend.step_toolchain if k in self._by_step)
        if taken:
            raise DuplicateBackend(
                f"backend {backend.name!r}: step kinds {taken} belong to "
                f"{self._by_step[taken[0]].name!r}"
            )
        self._check_declarations(backend)
        declare_tools(dict(backend.tools))
        self._by_name[backend.name] = backend
        for kind in backend.step_toolchain:
            self._by_step[kind] = backend
        return backend

    @staticmethod
    def _check_declarations(backend: Backend) -> None:
        if backend.route not in ROUTES:
            raise ValueError(
                f"backend {backend.name!r}: route {backend.route!r} is not one of {ROUTES}"
            )
        problem = kind_problem(backend.name, backend.recipe_type)
        if problem:
            raise ValueError(f"backend {backend.name!r}: {problem}")
        known = known_keys() | set(backend.tools)
        unkeyed = sorted(
            {
                key
                for keys in backend.step_toolchain.values()
                for key in keys or ()
                if key not in known
            }
        )
        if unkeyed:
            raise ValueError(
                f"backend {backend.name!r}: its steps key on {unkeyed}, which the toolchain "
                "fingerprint does not hold: declare them in the backend's tools (key → pip "
                "distribution)"
            )
        stray = sorted(set(backend.engine_steps) - set(backend.step_toolchain))
        if stray:
            raise ValueError(
                f"backend {backend.name!r}: engine_steps {stray} are not among its step kinds "
                f"{sorted(backend.step_toolchain)}"
            )

    def unregister(self, name: str) -> None:
        backend = self._by_name.pop(name)
        for kind in backend.step_toolchain:
            self._by_step.pop(kind, None)

    @contextmanager
    def registered(self, backend: Backend) -> Iterator[Backend]:
        """Register backend for the duration of a with block (tests, embedding applications)."""
        self.register(backend)
        try:
            yield backend
        finally:
            self.unregister(backend.name)

    def get(self, name: str) -> Backend:
        self._ensure()
        if name in self._broken:
            raise self._broken[name]
        try:
            return self._by_name[name]
        except KeyError:
            raise PlanError(
                f"backend {name!r} is not supported yet", hint=f"use one of {sorted(self._by_name)}"
            ) from None

    def names(self) -> list[str]:
        self._ensure()
        return list(self._by_name)

    def all(self) -> list[Backend]:
        self._ensure()
        return list(self._by_name.values())

    def for_step(self, kind: str) -> Backend | None:
        self._ensure()
        return self._by_step.get(kind)

    def builds_engine(self, kind: str) -> bool:
        """Whether a step kind builds an engine (its backend's `engine_steps`)."""
        backend = self.for_step(kind)
        return backend is not None and kind in backend.engine_steps

    def recipe_kinds(self) -> Kinds:
        """Recipe `backend` value → its recipe type and rules, for the recipe loader and the JSON
        Schema."""
        self._ensure()
        return _Kinds(
            {
                name: Kind(backend.recipe_type, backend.check_recipe)
                for name, backend in self._by_name.items()
            },
            self._broken,
        )

    def toolchain(self) -> dict[str, str]:
        """The fingerprint with every registered backend's tools (core/toolchain.fingerprint after
        registering)."""
        self._ensure()
        return fingerprint()

    def step_toolchain(self, kind: str) -> tuple[str, ...] | None:
        """The toolchain keys a step kind depends on (None: unknown kind, keyed on the whole
        toolchain)."""
        backend = self.for_step(kind)
        return backend.step_toolchain[kind] if backend is not None else None

    def for_triton(self, triton_backend: str) -> Backend | None:
        """The first registered backend writing models of this Triton backend (built-ins first)."""
        self._ensure()
        return next((b for b in self._by_name.values() if b.triton_backend == triton_backend), None)

    def for_manifest(self, backend_name: str) -> Backend | None:
        """The backend answering for a manifest's (or config's) backend name: the one registered
        under that name, else the first writing models of that Triton backend."""
        self._ensure()
        return self._by_name.get(backend_name) or self.for_triton(backend_name)

    def for_config(self, triton_backend: str, platform: str) -> Backend | None:
        """The backend answering for a config.pbtxt's load rules: by its backend field (as
        for_manifest), else, for a platform-only config (Triton maps onnxruntime_onnx,
        tensorrt_plan, pytorch_libtorch ... to their backend), the first backend whose `model_files`
        declares that platform."""
        self._ensure()
        if triton_backend:
            return self.for_manifest(triton_backend)
        return next(
            (b for b in self._by_name.values() if platform and platform in (b.model_files or {})),
            None,
        )

    def also_writing(self, triton_backend: str) -> list[Backend]:
        """The backends that also write models of this Triton backend (their `also_writes`), in
        registration order: their model_file_checks run on such models after the owner's."""
        self._ensure()
        return [
            b for b in self._by_name.values() if triton_backend and triton_backend in b.also_writes
        ]

    def unreproducible(self, rel: str) -> Backend | None:
        """The backend whose vendor cannot rebuild this repository file bit-identically (its
        `unreproducible_files`), if any."""
        self._ensure()
        return next(
            (
                b
                for b in self._by_name.values()
                if any(fnmatch.fnmatchcase(rel, pattern) for pattern in b.unreproducible_files)
            ),
            None,
        )

    def route_for_triton(self, triton_backend: str) -> str:
        backend = self.for_manifest(triton_backend)
        return backend.route if backend is not None else "none"

    def model_files(self) -> dict[str, dict[str, str]]:
        """Triton backend → {platform: default model file} (Triton's load rule), for every
        registered backend."""
        self._ensure()
        out: dict[str, dict[str, str]] = {}
        for b in self._by_name.values():
            if b.model_files is not None:
                out.setdefault(b.triton_backend, dict(b.model_files))
        return out


class _Kinds(dict):
    """recipe_kinds(): the recipe loader's lookup of a broken plug-in's kind raises its PluginError
    (what is wrong with the installed plug-in), not 'unknown backend'."""

    def __init__(self, kinds: dict[str, Kind], broken: dict[str, PluginError]):
        super().__init__(kinds)
        self._broken = dict(broken)

    def get(self, key, default=None):
        if key in self._broken and key not in self:
            raise self._broken[key]
        return super().get(key, default)


REGISTRY = Registry()
