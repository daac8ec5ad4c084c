"""core/numerics: what a fingerprint holds, which of its fields decide the bits, and the portable pins."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tritonbuild.core import numerics
from tritonbuild.core.numerics import deciding, differences, fingerprint, portable_env, summary


def test_the_fingerprint_names_the_cpu_and_the_libraries_that_ran():
    import numpy  # noqa: F401 - loaded, so it answers

    fp = fingerprint(loaded_only=True)
    assert fp["cpu"]["arch"] and "vendor" in fp["cpu"] and isinstance(fp["cpu"]["isa"], list)
    assert fp["numpy"]["version"] and isinstance(fp["numpy"]["simd"], list)
    assert fp["numpy"]["blas"][0]["api"] in ("openblas", "mkl", "blis")  # threadpoolctl's names


def test_standalone_it_reads_what_the_environment_pins():
    """The embedded server's side runs it as a file, isolated, with the server's environment."""
    env = {**portable_env(), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-I", numerics.__file__, "numpy"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    fp = json.loads(done.stdout)
    assert fp["env"]["MKL_CBWR"] == "COMPATIBLE" and fp["env"]["OPENBLAS_CORETYPE"] == "Haswell"
    assert fp["numpy"]["blas"][0]["core"] == "Haswell"  # OpenBLAS took the pinned kernels
    assert not [f for f in fp["numpy"]["simd"] if f.startswith("AVX512")]


def test_inductors_deterministic_switches_are_recorded_when_set():
    """Inductor picks a reduction's config by timing candidates unless its deterministic mode is on (torch 2.13
    torch/_inductor/runtime/triton_heuristics.py: filter_reduction_configs_for_determinism, 'Deterministic mode
    forbids tuning RBLOCK / num_warps for reductions because those knobs shift numerics'): a GPU model's bits may
    depend on it, so goldens record it, as they record VLLM_BATCH_INVARIANT."""
    env = {"PATH": "/usr/bin:/bin", "TORCHINDUCTOR_DETERMINISTIC": "1"}
    done = subprocess.run(
        [sys.executable, "-I", numerics.__file__],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(done.stdout)["env"] == {"TORCHINDUCTOR_DETERMINISTIC": "1"}
    from torch._inductor import config  # the variable torch reads

    assert config.deterministic is (os.environ.get("TORCHINDUCTOR_DETERMINISTIC") == "1")


def test_portable_branches_follow_intels_cnr_rules():
    """oneMKL's developer reference ('Named Constants for CNR Control'): branches other than AUTO and
    COMPATIBLE are available only on Intel processors; strict CNR covers ?gemm on AVX2/AVX-512 branches."""
    assert portable_env("x86-64")["MKL_CBWR"] == "COMPATIBLE"
    assert portable_env("intel-avx2")["MKL_CBWR"] == "AVX2,STRICT"
    assert (
        portable_env(threads=3)["OMP_NUM_THREADS"]
        == "3"
        == portable_env(threads=3)["MKL_NUM_THREADS"]
    )


def _fp(vendor="GenuineIntel", isa=("avx2", "fma", "avx512f"), env=None, cap="AVX512"):
    return {
        "fingerprint": 1,
        "cpu": {
            "arch": "x86_64",
            "vendor": vendor,
            "family": "6",
            "model_id": "143",
            "isa": list(isa),
        },
        "env": env or {},
        "torch": {"version": "2.13.0+cpu", "cpu_capability": cap, "mkl": "2024.2", "threads": 1},
    }


def test_native_fingerprints_differ_by_the_cpu_and_name_it():
    amd = _fp(vendor="AuthenticAMD", isa=("avx2", "fma"), cap="AVX2")
    got = differences(amd, _fp())
    assert "cpu.vendor: AuthenticAMD → GenuineIntel" in got
    assert "cpu.isa: +avx512f" in got
    assert "torch.cpu_capability: AVX2 → AVX512" in got
    assert differences(_fp(), _fp()) == []


def test_portable_fingerprints_ignore_the_cpu_that_can_run_the_pins():
    pins = portable_env()
    a = _fp(vendor="AuthenticAMD", isa=("avx2", "fma"), env=pins, cap="AVX2")
    b = _fp(env={**pins, "MKL_ENABLE_INSTRUCTIONS": "AVX512"}, cap="AVX2")
    assert differences(a, b) == []
    old = _fp(isa=("avx",), env=pins, cap="AVX2")  # no AVX2: the pinned paths cannot run
    assert differences(a, old) == ["cpu.runs_pinned_paths: True → False"]
    assert "cpu.vendor" not in deciding(a)
    # a native run where some of the pinned variables are set (a machine's caps, a user's MKL_CBWR)
    capped = _fp(env={"MKL_CBWR": "COMPATIBLE", "ATEN_CPU_CAPABILITY": "avx2"})
    assert "cpu.vendor" in deciding(capped)
    assert "portable (MKL_CBWR=COMPATIBLE)" in summary(a)
    assert summary(None).startswith("unknown")


def test_the_probe_reads_the_cpu_features_the_fingerprint_records():
    """publish/probe.py ships alone (no tritonbuild import) and keeps its own copy of the flags it compares."""
    from tritonbuild.publish import probe

    assert probe.FLAGS == numerics.DISPATCH_FLAGS
    assert tuple(portable_env()) == probe.PINNED
    here = probe._cpu()
    recorded = fingerprint(())["cpu"]
    assert (here["vendor"], here["family"], here["model_id"]) == (
        recorded["vendor"],
        recorded["family"],
        recorded["model_id"],
    )
    assert sorted(set(probe.FLAGS) & here["flags"]) == sorted(recorded["isa"])


# numpy 2.x's dispatch targets on x86-64 (its __cpu_dispatch__, read from numpy 2.4.6 here and 2.5.2 on
# the lent H100 host, 2026-12-06): with only the 1.x names disabled, X86_V4 stayed on there
NUMPY2_DISPATCH = ("X86_V3", "X86_V4", "AVX512_ICL", "AVX512_SPR")


def test_portable_numpy_keeps_only_its_avx2_paths_under_both_namings():
    import numpy as np

    umath = (
        getattr(getattr(np, "_core", None), "_multiarray_umath", None) or np.core._multiarray_umath
    )
    above_avx2 = [name for name in umath.__cpu_dispatch__ if "512" in name or name == "X86_V4"]
    off = set(portable_env()["NPY_DISABLE_CPU_FEATURES"].split())
    assert set(above_avx2) <= off  # the installed numpy's own names
    assert [name for name in NUMPY2_DISPATCH if name not in off] == ["X86_V3"]


def test_a_fingerprint_holds_only_plain_values():
    """verify's worker sends the fingerprint of the process it ran a model in, pickled: torch's version was a
    TorchVersion, and unpickling it imported torch in verify's own process (with the TorchScript check's import,
    verify's own CPU on the examples went 4.2 to 2.2 s, 4 interleaved rounds, 2026-12-08). Only str, int, float,
    bool, None, lists and dicts."""
    import torch  # noqa: F401 - the fingerprint reads loaded libraries only

    def leaves(value):
        if isinstance(value, dict):
            yield from (leaf for v in value.values() for leaf in leaves(v))
        elif isinstance(value, list):
            yield from (leaf for v in value for leaf in leaves(v))
        else:
            yield value

    found = fingerprint(loaded_only=True)
    assert found["torch"]["version"]
    assert {type(leaf) for leaf in leaves(found)} <= {str, int, float, bool, type(None)}
