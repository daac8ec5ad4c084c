"""Where bits come from: the numerics fingerprint of a process (CPU, math libraries and the code
paths they take, threads; GPU and serving engine where present), what in it decides the bits, and
the settings that make CPU answers the same on every x86-64 machine (portable numerics).

Runs standalone too (`python numerics.py [libraries...]` prints the fingerprint as JSON): verify
reads it in the process that runs a model, or in one started with the same interpreter and
environment (the embedded tritonserver's Python side), so it imports nothing of tritonbuild's."""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import re
import sys
from importlib import metadata

FINGERPRINT_VERSION = 1

# CPU features the math libraries dispatch on (MKL, oneDNN, ATen, OpenBLAS, numpy, MLAS): a
# machine's set of these, with its vendor and model, decides which kernels run natively.
DISPATCH_FLAGS = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "avx_vnni",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
)

# What portable numerics needs of a CPU: the pinned code paths below use no more than this.
PORTABLE_NEEDS = ("avx2", "fma")

# numpy's own SIMD dispatch targets above AVX2, as numpy names them (its __cpu_dispatch__): 1.26
# dispatches AVX512F ... AVX512_SPR; 2.x groups them as X86_V4 (AVX512F/CD/VL/BW/DQ), AVX512_ICL and
# AVX512_SPR (seen: numpy 2.4.6 and 2.5.2). Disabled under portable numerics so numpy's kernels take
# their AVX2 paths on every machine; a name a numpy does not know is ignored by it.
NUMPY_AVX512 = (
    "X86_V4",
    "AVX512F",
    "AVX512CD",
    "AVX512_KNL",
    "AVX512_KNM",
    "AVX512_SKX",
    "AVX512_CLX",
    "AVX512_CNL",
    "AVX512_ICL",
    "AVX512_SPR",
)

# MKL's Conditional Numerical Reproducibility branch per portable 'cpus' setting. Intel documents
# that branches other than AUTO and COMPATIBLE exist only on Intel processors (a non-Intel CPU falls
# back to AUTO), so only COMPATIBLE (SSE2, no rcpps/rsqrtps) holds across Intel and AMD; AVX2,STRICT
# holds across Intel CPUs with AVX2, GEMMs independent of the thread count (oneMKL developer
# reference, "Named Constants for CNR Control"; developer guide, "Reproducibility Conditions").
MKL_BRANCH = {"x86-64": "COMPATIBLE", "intel-avx2": "AVX2,STRICT"}

# The environment variables that decide the bits; a fingerprint records those set.
NUMERICS_VARS = (
    "MKL_CBWR",
    "MKL_ENABLE_INSTRUCTIONS",
    "MKL_NUM_THREADS",
    "MKL_DYNAMIC",
    "OMP_NUM_THREADS",
    "OMP_DYNAMIC",
    "ATEN_CPU_CAPABILITY",
    "ONEDNN_MAX_CPU_ISA",
    "DNNL_MAX_CPU_ISA",
    "OPENBLAS_CORETYPE",
    "OPENBLAS_NUM_THREADS",
    "NPY_DISABLE_CPU_FEATURES",
    "VLLM_BATCH_INVARIANT",
    "CUBLAS_WORKSPACE_CONFIG",
    # Inductor's modes that stop it timing candidate configs of a reduction, whose order they decide (torch
    # torch/_inductor/config.py: deterministic; batch_invariant from torch 2.13, which vLLM 0.34 turns on)
    "TORCHINDUCTOR_DETERMINISTIC",
    "TORCHINDUCTOR_BATCH_INVARIANT",
)


def portable_env(cpus: str = "x86-64", threads: int = 1) -> dict[str, str]:
    """The variables that pin every math library's code path and thread count, set before the
    libraries load (a server's environment, a worker process's)."""
    n = str(threads)
    return {
        "MKL_CBWR": MKL_BRANCH[cpus],
        "MKL_DYNAMIC": "FALSE",
        "MKL_NUM_THREADS": n,
        "OMP_DYNAMIC": "FALSE",
        "OMP_NUM_THREADS": n,
        "ATEN_CPU_CAPABILITY": "avx2",
        "ONEDNN_MAX_CPU_ISA": "AVX2",
        "OPENBLAS_CORETYPE": "Haswell",
        "OPENBLAS_NUM_THREADS": n,
        "NPY_DISABLE_CPU_FEATURES": " ".join(NUMPY_AVX512),
    }


def cpu() -> dict:
    """The CPU's architecture, vendor, model and the dispatch-deciding ISA flags (/proc/cpuinfo)."""
    info: dict = {"arch": platform.machine()}
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            text = f.read().split("\n\n", 1)[0]
    except OSError:
        return info
    fields = dict(
        (key.strip(), value.strip())
        for key, _, value in (line.partition(":") for line in text.splitlines())
    )
    flags = set(fields.get("flags", "").split())
    info.update(
        vendor=fields.get("vendor_id"),
        model=fields.get("model name"),
        family=fields.get("cpu family"),
        model_id=fields.get("model"),
        isa=[flag for flag in DISPATCH_FLAGS if flag in flags],
    )
    return info


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _numpy() -> dict:
    import numpy as np

    out: dict = {"version": np.__version__}
    umath = getattr(getattr(np, "_core", None), "_multiarray_umath", None) or getattr(
        np.core, "_multiarray_umath", None
    )
    if umath is not None:
        features = getattr(umath, "__cpu_features__", {})
        dispatch = getattr(umath, "__cpu_dispatch__", [])
        out["simd"] = [name for name in dispatch if features.get(name)]
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        out["blas"] = "unknown (threadpoolctl is not installed)"
        return out
    out["blas"] = [
        {
            "api": each.get("internal_api"),
            "version": each.get("version"),
            "core": each.get("architecture"),
            "threads": each.get("num_threads"),
        }
        for each in threadpool_info()
        if each.get("user_api") == "blas"
    ]
    return out


def _torch() -> dict:
    import torch

    config = torch.__config__.show()
    mkl = re.search(r"Math Kernel Library Version ([\w.]+)-Product Build (\d+)", config)
    onednn = re.search(r"MKL-DNN v([\d.]+)", config)
    # str: torch.__version__ is a TorchVersion, and unpickling one (verify/worker.py's replies) imports torch
    out = {
        "version": str(torch.__version__),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "mkl": f"{mkl.group(1)} build {mkl.group(2)}" if mkl else None,
        "onednn": onednn.group(1) if onednn else None,
        "threads": torch.get_num_threads(),
    }
    if torch.cuda.is_available():
        out["cuda"] = torch.version.cuda
        out["cudnn"] = torch.backends.cudnn.version()
        out["gpus"] = [
            {
                "name": props.name,
                "capability": f"{props.major}.{props.minor}",
                "sms": props.multi_processor_count,
            }
            for props in map(torch.cuda.get_device_properties, range(torch.cuda.device_count()))
        ]
    return out


def _onnxruntime() -> dict:
    import onnxruntime as ort

    return {"version": ort.__version__, "providers": ort.get_available_providers()}


def _driver() -> str | None:
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8") as f:
            found = re.search(r"Kernel Module\s+(?:for \S+\s+)?([\d.]+)", f.read())
    except OSError:
        return None
    return found.group(1) if found else None


_LIBRARIES = {"numpy": _numpy, "torch": _torch, "onnxruntime": _onnxruntime}
_ALL = tuple(_LIBRARIES)
# Serving engines and compilers: their versions only (importing them costs seconds and a GPU).
_ENGINES = ("vllm", "tensorrt", "tensorrt_llm", "triton", "nvidia-cublas", "nvidia-cublas-cu12")


def fingerprint(
    libraries: tuple[str, ...] = ("numpy", "torch", "onnxruntime"), *, loaded_only: bool = False
) -> dict:
    """This process's numerics fingerprint: the libraries named that are installed are imported and
    asked what they run (a library already imported answers as it runs); loaded_only: only those
    this process has imported (what ran a model in it), nothing imported for the asking."""
    out: dict = {
        "fingerprint": FINGERPRINT_VERSION,
        "cpu": cpu(),
        "python": platform.python_version(),
        "env": {var: os.environ[var] for var in NUMERICS_VARS if var in os.environ},
    }
    for name in libraries:
        if name in _LIBRARIES and (name in sys.modules or (not loaded_only and _installed(name))):
            try:
                out[name] = _LIBRARIES[name]()
            except Exception as e:  # noqa: BLE001 - a broken install is recorded, not fatal
                out[name] = f"unreadable ({type(e).__name__}: {e})"
    engines = {}
    for name in _ENGINES:
        try:
            engines[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    if engines:
        out["engines"] = engines
    driver = _driver()
    if driver:
        out["driver"] = driver
    return out


# --- what decides the bits, and how two fingerprints differ ------------------------------------


def _flat(value, prefix: str = "") -> dict[str, object]:
    if isinstance(value, dict):
        out: dict[str, object] = {}
        for key, item in value.items():
            out.update(_flat(item, f"{prefix}{key}."))
        return out
    return {prefix.rstrip("."): value}


def portable_settings(fp: dict) -> bool:
    """Recorded under portable numerics: every variable portable_env sets is set (a native run with
    some of them set, as a machine's caps or a user's MKL_CBWR, is native)."""
    env = fp.get("env") or {}
    return all(key in env for key in portable_env())


def deciding(fp: dict) -> dict[str, object]:
    """The fields of a fingerprint that decide the bits. Native: the CPU (vendor, family, model,
    dispatch ISA) and every library's version and code path. Portable: the libraries and the
    pinned settings; the CPU only as far as it can run the pinned paths (AVX2 and FMA)."""
    flat = _flat({k: v for k, v in fp.items() if k not in ("fingerprint", "python", "read")})
    flat.pop("cpu.model", None)  # the marketing name: family and model id say it
    if portable_settings(fp):
        isa = fp.get("cpu", {}).get("isa") or []
        for key in [key for key in flat if key.startswith("cpu.") and key != "cpu.arch"]:
            flat.pop(key)
        flat["cpu.runs_pinned_paths"] = all(flag in isa for flag in PORTABLE_NEEDS)
        pinned = portable_env()
        for key in [key for key in flat if key.startswith("env.") and key[4:] not in pinned]:
            flat.pop(key)  # caps a machine sets (MKL_ENABLE_INSTRUCTIONS) yield to the pins
        # the chosen BLAS core type and the numpy SIMD list are the pinned ones' consequences
        flat.pop("numpy.simd", None)
    for key in [key for key in flat if key.endswith(".threads") and key.startswith("numpy.blas")]:
        flat.pop(key)
    return flat


def differences(recorded: dict, here: dict) -> list[str]:
    """'field: recorded → here' for each deciding field that differs (CPU features as +added
    -missing)."""
    a, b = deciding(recorded), deciding(here)
    out = []
    for key in sorted(set(a) | set(b)):
        if a.get(key) == b.get(key):
            continue
        if key == "cpu.isa" and isinstance(a.get(key), list) and isinstance(b.get(key), list):
            added = [f"+{flag}" for flag in b[key] if flag not in a[key]]
            missing = [f"-{flag}" for flag in a[key] if flag not in b[key]]
            out.append(f"cpu.isa: {' '.join(added + missing)}")
            continue
        out.append(f"{key}: {_shown(a.get(key))} → {_shown(b.get(key))}")
    return out


def _shown(value) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, list):
        return "[" + ", ".join(map(str, value)) + "]"
    return str(value)


def summary(fp: dict | None) -> str:
    """One line: the machine class a fingerprint describes."""
    if not fp:
        return "unknown (recorded before fingerprints)"
    cpu = fp.get("cpu") or {}
    parts = [str(cpu.get("model") or cpu.get("vendor") or cpu.get("arch") or "?")]
    torch = fp.get("torch")
    if isinstance(torch, dict):
        parts.append(f"torch {torch.get('version')} {torch.get('cpu_capability')}")
        for gpu in torch.get("gpus") or []:
            parts.append(f"{gpu['name']} (sm {gpu['capability']}, {gpu['sms']} SMs)")
    if portable_settings(fp):
        parts.append(f"portable (MKL_CBWR={fp['env']['MKL_CBWR']})")
    return "; ".join(parts)


if __name__ == "__main__":
    sys.stdout.write(json.dumps(fingerprint(tuple(sys.argv[1:]) or _ALL)) + "\n")
