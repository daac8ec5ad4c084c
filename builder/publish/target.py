"""A publish target: a Location opened through its store's driver (core/stores.py), and the one way
a store's errors are reported (the target, what failed, the fix for that store).

Credentials come only from each driver's standard chain (env, profiles, instance metadata);
tritonbuild never reads, prints or stores them.
"""

from __future__ import annotations

from dataclasses import dataclass

from tritonbuild.core.drivers import Driver
from tritonbuild.core.location import Location
from tritonbuild.core.objstore import deadline_words, timed_out
from tritonbuild.core.secrets import redact
from tritonbuild.core.stores import as_location, driver_for
from tritonbuild.errors import PublishError


@dataclass
class Target:
    location: Location
    root: str  # the path the filesystem understands (bucket/prefix or a local absolute path)
    fs: object

    @property
    def url(self) -> str:
        """As the user gave it, without a trailing slash, redacted."""
        return self.location.url

    @property
    def driver(self) -> Driver:
        return driver_for(self.location.scheme, self.location.url)

    @property
    def is_local(self) -> bool:
        return self.driver.local

    def path(self, *parts: str) -> str:
        return "/".join([self.root.rstrip("/"), *parts])

    def triton_url(self) -> str:
        """The --model-repository string tritonserver understands for this target."""
        return self.driver.triton_url(self.location, self.root)


def open_target(where: Location | str, *, endpoint_url: str | None = None) -> Target:
    location = as_location(where, endpoint_url)
    driver = driver_for(location.scheme, location.url)
    try:
        fs, root = driver.open(location)
    except ImportError:
        raise PublishError(
            f"the {location.scheme}:// driver ({driver.package}) is not installed",
            where=location.url,
            hint=f"pip install 'tritonbuild[{driver.extra}]' (or pip install {driver.package})",
        ) from None
    except ValueError as e:
        raise PublishError(
            f"bad target URL: {redact(str(e))}", where=location.url, hint="check the URL"
        ) from None
    except Exception as e:  # noqa: BLE001 - no answer within the deadline, or the driver refused its options
        raise storage_error(location, f"open the {location.scheme}:// driver", e) from None
    if not driver.local and not root.strip("/"):
        raise PublishError(
            "the target names no bucket", where=location.url, hint=f"use {driver.example()}"
        )
    return Target(location=location, root=root, fs=fs)


def storage_error(where: Target | Location, action: str, e: BaseException) -> PublishError:
    """A driver exception as a PublishError that names the target and the likely fix, with no
    secrets; the fix is chosen by the service's error code and the exception's type, never by words
    in its message."""
    text = redact(f"{type(e).__name__}: {e}")
    driver = where.driver if isinstance(where, Target) else driver_for(where.scheme, where.url)
    kind = driver.classify(e)
    waited = kind == "network" and timed_out(e)
    hint = {
        "no-bucket": "create the bucket first, or fix its name",
        "denied": f"check credentials ({driver.credentials or 'the store'}) and bucket permissions",
        "network": f"check the endpoint ({driver.endpoint_hint or 'the URL'}) and that it is reachable and "
        + (
            "answers; a slow but working store may need a longer deadline"
            if waited
            else "that the service runs there (address and port)"
        ),
        "not-found": "check the target URL",
    }.get(kind, "check the target URL and permissions")
    if waited and "network deadline" not in text:
        text = f"no answer within {deadline_words()}: {text}"
    elif kind == "network" and not waited:  # a refusal fails at once: no deadline was waited out
        text = f"the endpoint did not take the connection (refused or unreachable): {text}"
    return PublishError(f"cannot {action}: {text}", where=where.url, hint=hint)
