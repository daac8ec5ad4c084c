"""config.pbtxt as the switch of a published model: the versions it pins (version_policy
specific), each version's own config kept beside it, and a target's config parsed with the object
named when it does not parse."""

from __future__ import annotations

from tritonbuild.errors import PublishError
from tritonbuild.triton.config import ConfigParseError, parse, render


def version_config_name(version: int) -> str:
    """Each version's own config, kept beside config.pbtxt (Triton reads only config.pbtxt and
    version directories; files in the model directory are ignored, like golden-v<N>.npz)."""
    return f"config-v{version}.pbtxt"


def pinned_config(config: bytes, live: list[int]) -> bytes:
    """The config with a version_policy that pins exactly the live versions (none: Triton loads
    nothing)."""
    model_config = parse(config)
    model_config.ClearField("version_policy")
    model_config.version_policy.specific.versions.extend(live)
    if not live:
        model_config.version_policy.specific.SetInParent()
    return render(model_config)


def parse_remote(config: bytes, where: str):
    """A config.pbtxt read from a target: one that does not parse is a PublishError naming the
    object."""
    try:
        return parse(config)
    except ConfigParseError as e:
        raise PublishError(
            f"{where} at the target is not a valid Triton model config: {e}",
            where=where,
            hint="restore that object (publish the model again, or put back the file)",
        ) from None


def live_version(config: bytes | None, where: str = "config.pbtxt") -> int | None:
    """The newest version a config pins; None without a config or a pinned version."""
    if config is None:
        return None
    vp = parse_remote(config, where).version_policy
    versions = list(vp.specific.versions) if vp.WhichOneof("policy_choice") == "specific" else []
    return max(versions) if versions else None
