"""Out-of-tree backends: the `tritonbuild.backends` entry-point group (Hatch's plug-in model).

An installed distribution declares one entry point per backend, named after its recipe kind:

    [project.entry-points."tritonbuild.backends"]
    mykind = "mypkg.backend:MyBackend"

The registry loads the group once, after the built-ins (registry.Registry._ensure). A plug-in that
cannot be loaded (its import fails, it is no Backend, its name is taken or differs from its entry
point's, its declarations are refused) becomes a PluginError naming the distribution and the entry
point; the registry keeps it instead of raising, so the built-in backends and the other plug-ins
still work, and raises it where the broken kind is asked for."""

from __future__ import annotations

from importlib import metadata

from tritonbuild.backends.base import Backend
from tritonbuild.errors import PluginError

GROUP = "tritonbuild.backends"


def entry_points() -> list[metadata.EntryPoint]:
    """The group's entry points in the environment, by name (a stable registration order)."""
    return sorted(metadata.entry_points(group=GROUP), key=lambda ep: (ep.name, ep.value))


def origin(ep: metadata.EntryPoint) -> str:
    """Where an entry point comes from: its distribution, version and declaration."""
    dist = getattr(ep, "dist", None)
    named = f"{dist.name} {dist.version}" if dist is not None else "an unknown distribution"
    return f"{named}, entry point {ep.name} = {ep.value} (group {GROUP})"


def _uninstall(ep: metadata.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    return f"pip uninstall {dist.name}" if dist is not None else "uninstall its distribution"


def refused(ep: metadata.EntryPoint, why: str, fix: str) -> PluginError:
    """The PluginError of a plug-in that could not be registered: why, where it comes from, the fix
    (or uninstalling its distribution)."""
    return PluginError(
        f"backend plug-in {ep.name!r} not loaded: {why}",
        where=origin(ep),
        hint=f"{fix}; or {_uninstall(ep)}",
    )


def load(ep: metadata.EntryPoint, taken: set[str]) -> Backend:
    """The Backend an entry point names (a Backend subclass, instantiated without arguments, or an
    instance), or a PluginError; taken: the names registered before it (the built-ins first)."""
    if ep.name in taken:
        raise refused(
            ep,
            f"a backend named {ep.name!r} is already registered (a built-in or another plug-in)",
            "give the plug-in's backend and its entry point a name of their own",
        )
    try:
        target = ep.load()
    except Exception as e:  # noqa: BLE001 - any import failure of foreign code is the plug-in's
        raise refused(
            ep, f"importing {ep.value} failed: {type(e).__name__}: {e}", "fix the plug-in's import"
        ) from None
    if isinstance(target, type) and issubclass(target, Backend):
        try:
            target = target()
        except Exception as e:  # noqa: BLE001 - e.g. an abstract method left unimplemented
            raise refused(
                ep,
                f"{ep.value}() failed: {type(e).__name__}: {e}",
                "implement every abstract method of tritonbuild.backends.base.Backend",
            ) from None
    if not isinstance(target, Backend):
        raise refused(
            ep,
            f"{ep.value} is {target!r}, not a tritonbuild Backend",
            "point the entry point at a subclass of tritonbuild.backends.base.Backend",
        )
    name = getattr(target, "name", None)
    if name != ep.name:
        raise refused(
            ep,
            f"its backend is named {name!r}, its entry point {ep.name!r}",
            "name the entry point after the backend's recipe kind (Backend.name)",
        )
    return target
