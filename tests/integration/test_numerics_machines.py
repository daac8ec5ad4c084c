"""Issue 41 on one host: other machines emulated by capping what the math libraries may use. The bundled
examples (torch and numpy models portable) answer bit for bit the same under an AVX2-only machine, an
AVX-512 one and the libraries' default path; a native model's goldens, read under another MKL path, get the
"another machine class" verdict naming the field; the readiness probe names the cause."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = [pytest.mark.triton, pytest.mark.slow]

AVX512 = (
    "AVX512F AVX512CD AVX512_KNL AVX512_KNM AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL AVX512_SPR"
)
MACHINES = {  # what each emulated machine lets the libraries use
    "avx2": {
        "MKL_ENABLE_INSTRUCTIONS": "AVX2",
        "ONEDNN_MAX_CPU_ISA": "AVX2",
        "ATEN_CPU_CAPABILITY": "avx2",
        "OPENBLAS_CORETYPE": "Haswell",
        "NPY_DISABLE_CPU_FEATURES": AVX512,
    },
    "avx512": {
        "MKL_ENABLE_INSTRUCTIONS": "AVX512",
        "ONEDNN_MAX_CPU_ISA": "AVX512_CORE",
        "ATEN_CPU_CAPABILITY": "avx512",
        "OPENBLAS_CORETYPE": "SkylakeX",
    },
    "default": {
        "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
        "ONEDNN_MAX_CPU_ISA": "SSE41",
        "ATEN_CPU_CAPABILITY": "default",
        "OPENBLAS_CORETYPE": "Prescott",
    },
}


def _tritonbuild(*args, env=None, cwd=ROOT):
    return subprocess.run(
        [sys.executable, "-m", "tritonbuild", *map(str, args)],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
    )


@pytest.fixture(scope="module")
def examples(tmp_path_factory):
    """recipes/examples as built: model_repository/ without the verification report verify writes there, which
    tests/integration/test_examples.py holds byte for byte equal to two fresh builds of recipes/examples (building
    it again here cost two torch exports, ~20 CPU seconds, to make the same bytes)."""
    out = tmp_path_factory.mktemp("numerics") / "OUT"
    shutil.copytree(ROOT / "model_repository", out)
    (out / "tritonbuild-verification.json").unlink(missing_ok=True)
    return out


def _answers(report: dict) -> dict:
    return {m["name"]: (m["passed"], m["compared"], m["mismatches"]) for m in report["models"]}


def test_the_examples_answer_the_same_on_three_emulated_machines(examples):
    seen = {}
    for machine, caps in MACHINES.items():
        done = _tritonbuild("verify", examples, "--json", env=caps)
        assert done.returncode == 0, f"{machine}: {done.stdout[-3000:]}{done.stderr[-2000:]}"
        report = json.loads(done.stdout)
        seen[machine] = _answers(report)
        portable = [m for m in report["models"] if m["name"] in ("image-embedder", "risk-scorer")]
        for model in portable:  # the fingerprint of the process that ran it, pins in place
            assert model["numerics"]["env"]["MKL_CBWR"] == "COMPATIBLE", model["name"]
            assert (
                model["numerics"]["env"]["MKL_ENABLE_INSTRUCTIONS"]
                == caps["MKL_ENABLE_INSTRUCTIONS"]
            )
            assert model["goldens_recorded_on"].endswith("portable (MKL_CBWR=COMPATIBLE)")
    assert seen["avx2"] == seen["avx512"] == seen["default"]


def test_a_native_golden_read_on_another_mkl_path_names_the_machine_class(examples, tmp_path):
    """image-embedder made native: its goldens recorded here, then verified where MKL takes its
    reproducibility branch (another machine's path): bits differ by a few ULP and verify says why."""
    recipes = tmp_path / "recipes"
    shutil.copytree(ROOT / "recipes" / "examples", recipes)
    recipe = recipes / "image-embedder.yaml"
    recipe.write_text(recipe.read_text().replace("numerics: portable\n", ""))
    out = tmp_path / "OUT"
    assert _tritonbuild("build", recipe, "-o", out).returncode == 0
    recorded = _tritonbuild("verify", out, "--record", "--force")
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    other = _tritonbuild("verify", out, "--json", env={"MKL_CBWR": "COMPATIBLE"})
    assert other.returncode == 6
    model = json.loads(other.stdout)["models"][0]
    assert model["cause"] == "machine-class"
    assert model["numerics_differ"] == ["env.MKL_CBWR: (none) → COMPATIBLE"]
    assert all(isinstance(m["max_ulp"], int) and m["max_ulp"] > 0 for m in model["mismatches"])
    shown = _tritonbuild("verify", out, env={"MKL_CBWR": "COMPATIBLE"})
    assert "recorded on another machine class" in shown.stdout + shown.stderr
    assert "--record' adds this class's goldens beside" in shown.stdout + shown.stderr
    # recorded there, the second class joins the first; both machines then pass
    added = _tritonbuild("verify", out, "--record", env={"MKL_CBWR": "COMPATIBLE"})
    assert (
        added.returncode == 0
        and "added the goldens of machine class 2" in added.stdout + added.stderr
    )
    assert _tritonbuild("verify", out).returncode == 0
    assert _tritonbuild("verify", out, env={"MKL_CBWR": "COMPATIBLE"}).returncode == 0


def test_a_published_portable_model_is_served_with_its_numerics(cli, tmp_path):
    """The target's manifest carries the live version's numerics; 'serve TARGET' (api.serving) sets them
    before the server's Python side loads the model, which then answers its portable goldens bit for bit,
    and the serving image's entrypoint reads them from a synced target's manifest as well."""
    import tritonclient.http as httpclient

    from tritonbuild import api
    from tritonbuild.core.npz import read_npz
    from tritonbuild.core.numerics import portable_env
    from tritonbuild.verify.goldens import from_npz_arrays

    out, target = tmp_path / "OUT", tmp_path / "pub"
    assert cli("build", ROOT / "recipes/examples/risk-scorer.yaml", "-o", out).exit_code == 0
    assert cli("publish", out, f"file://{target}", "--skip-verify").exit_code == 0
    state = json.loads((target / "tritonbuild-manifest.json").read_text())
    assert state["models"]["risk-scorer"]["versions"]["1"]["numerics"]["env"] == portable_env()
    inputs, outputs = from_npz_arrays(read_npz(out / "risk-scorer" / "golden-v1.npz"))
    serving = api.serve(f"file://{target}")
    assert serving.server.env["MKL_CBWR"] == "COMPATIBLE"
    with serving.server as server:
        server.load("risk-scorer")
        client = httpclient.InferenceServerClient(server.http_url)
        for sample, expected in zip(inputs, outputs, strict=True):
            inp = httpclient.InferInput("FEATURES", list(sample["FEATURES"].shape), "FP32")
            inp.set_data_from_numpy(sample["FEATURES"])
            got = client.infer("risk-scorer", [inp], model_version="1").as_numpy("PROBS")
            assert got.tobytes() == expected["PROBS"].tobytes()
        client.close()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "tritonserver").write_text(
        "#!/bin/sh\necho MKL_CBWR=$MKL_CBWR OMP=$OMP_NUM_THREADS\n"
    )
    (bin_dir / "tritonserver").chmod(0o755)
    for served in (out, target):  # a built repository baked in, and a publish target synced
        shown = subprocess.run(
            ["bash", str(ROOT / "ci/docker/entrypoint.sh")],
            env={
                **os.environ,
                "PATH": f"{bin_dir}:{os.environ['PATH']}",
                "TRITONBUILD_MODELS": str(served),
            },
            capture_output=True,
            text=True,
            check=True,
        )
        assert shown.stdout.split() == ["MKL_CBWR=COMPATIBLE", "OMP=1"], shown.stderr
