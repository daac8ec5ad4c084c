"""A vLLM recipe's `serving.determinism: invariant`: what the server needs so that an answer never
depends on the other requests in flight, for fp16 and INT4 weight-only models alike.

- vLLM's own batch-invariant mode, VLLM_BATCH_INVARIANT=1 (vllm 0.22.0 vllm/envs.py;
  model_executor/layers/batch_invariant.py init_batch_invariance: invariant unquantized linears,
  attention without splits, log-softmax, no cascade attention). It leaves W4A16 layers on the
  mixed-precision kernel vLLM selects (Machete on Hopper), which is not invariant (measured:
  docs/runs).
- tritonbuild's plugin (backends/vllm/invariant/plugin.py), a vLLM general plugin that in that mode
  puts a batch-invariant W4A16 kernel (w4a16.py) first among the CUDA mixed-precision kernels. It is packaged
  as a wheel inside the model's version directory (so it is verified and published with the model
  it serves) and installed into the server's Python (`serve` does it; Dockerfile.triton and the
  Kubernetes snippet install it at start).
The serving path stays upstream's vLLM backend: model.json is unchanged, the environment and the
plugin are the whole difference.
"""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

PLUGIN_SOURCE = Path(__file__).with_name("plugin.py")
KERNEL_SOURCE = PLUGIN_SOURCE.with_name("w4a16.py")  # the W4A16 kernel, loadable alone by path
DIST = "tritonbuild_vllm_invariant"
# The wheel's package: the plugin as its __init__ (the entry point DIST:register) and the W4A16
# kernel, the fp16/bf16 linear and the sampling filter beside it, which the plugin imports
# relatively (as in tritonbuild's own tree)
PACKAGE = {
    "__init__.py": PLUGIN_SOURCE,
    "w4a16.py": KERNEL_SOURCE,
    "linear16.py": PLUGIN_SOURCE.with_name("linear16.py"),
    "sampling.py": PLUGIN_SOURCE.with_name("sampling.py"),
}
# vLLM's entry-point group for plugins loaded in every process (vllm 0.22.0 vllm/plugins/__init__.py
# DEFAULT_PLUGINS_GROUP), and the name VLLM_PLUGINS would select it by.
ENTRY_POINT_GROUP = "vllm.general_plugins"
ENTRY_POINT_NAME = "tritonbuild_invariant_w4a16"
SERVING_ENV = {"VLLM_BATCH_INVARIANT": "1"}
# The vLLM releases (major.minor) whose batch-invariant mode and kernel registry the plugin is
# recorded against (tests/contracts/facts/vllm_plugin.json: the 0.22.0 wheel) and ran with on the
# H200 (docs/runs, 2026-12-04). Its registry moved between releases (0.11:
# layers/quantization/kernels/mixed_precision), so others are refused.
RECORDED_VLLM = ("0.22",)
PLUGIN_DIR = "plugins"  # in the version directory
_EPOCH = (1980, 1, 1, 0, 0, 0)  # zip timestamps fixed: the same source gives the same wheel bytes


def plugin_version() -> str:
    """The wheel's version: the package sources' digest (a local version label), so a changed
    kernel is a new wheel."""
    digest = hashlib.sha256()
    for name, path in sorted(PACKAGE.items()):
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return "1.0+g" + digest.hexdigest()[:12]


def wheel_name() -> str:
    return f"{DIST}-{plugin_version()}-py3-none-any.whl"


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def plugin_wheel(dest_dir: Path) -> Path:
    """Write the plugin as a wheel (PEP 427: the package, METADATA, WHEEL, entry_points.txt, RECORD)
    into dest_dir; byte-identical for the same source."""
    version = plugin_version()
    info = f"{DIST}-{version}.dist-info"
    files = {f"{DIST}/{name}": path.read_bytes() for name, path in PACKAGE.items()}
    files |= {
        f"{info}/METADATA": (
            f"Metadata-Version: 2.1\nName: {DIST}\nVersion: {version}\n"
            "Summary: tritonbuild's batch-invariant W4A16 and fp16 linears for vLLM (a general plugin)\n"
            "Requires-Python: >=3.9\n"
        ).encode(),
        f"{info}/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: tritonbuild\nRoot-Is-Purelib: true\n"
            b"Tag: py3-none-any\n"
        ),
        f"{info}/entry_points.txt": (
            f"[{ENTRY_POINT_GROUP}]\n{ENTRY_POINT_NAME} = {DIST}:register\n".encode()
        ),
    }
    record = [_record_line(name, data) for name, data in files.items()] + [f"{info}/RECORD,,"]
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    dest_dir.mkdir(parents=True, exist_ok=True)
    path = dest_dir / wheel_name()
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            entry = zipfile.ZipInfo(name, date_time=_EPOCH)
            entry.external_attr = 0o644 << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(entry, data)
    return path


def determinism_problem(recipe) -> tuple[str, str] | None:
    """(message, hint) when the recipe asks for invariant answers from an image whose vLLM the
    plugin is not recorded for, else None."""
    from tritonbuild.backends.vllm.versions import image_vllm, images_where

    if recipe.serving.determinism != "invariant":
        return None
    version = image_vllm(recipe.image.triton_image)
    if version is not None and ".".join(version.split(".")[:2]) in RECORDED_VLLM:
        return None
    ships = f"ships vLLM {version}" if version else "ships a vLLM tritonbuild has not recorded"
    return (
        f"invariant needs vLLM {' or '.join(RECORDED_VLLM)} (its batch-invariant mode and "
        f"the kernel registry tritonbuild's plugin joins); {recipe.image.triton_image} {ships}",
        "set image.triton_image to "
        f"{images_where(lambda v: '.'.join(v.split('.')[:2]) in RECORDED_VLLM)}",
    )


def serving(recipe) -> dict:
    """The manifest's record of what the server needs for this model: environment and plugin wheels
    (paths relative to the version directory); empty for the default determinism."""
    if recipe.serving.determinism != "invariant":
        return {}
    return {
        "determinism": "invariant",
        "env": dict(SERVING_ENV),
        "plugins": [f"{PLUGIN_DIR}/{wheel_name()}"],
    }
