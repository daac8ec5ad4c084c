"""verify --server checks a generative model's answers under concurrent load, against Triton's vLLM backend as the
embedded tritonserver runs it — with a stand-in for vLLM (tests/fixtures/llm/vllm_standin/model.py) whose engine
batches every request in flight and, like a GPU GEMM, reduces a row differently with the batch size, unless
VLLM_BATCH_INVARIANT=1 is in the server's environment. A recipe asking for invariant answers fails on a server
that does not serve them, and passes when served as `serving.determinism: invariant` makes `serve` serve it (the
variable set, the plugin wheel shipped in the version directory found through vLLM's entry points)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import EXAMPLES, ROOT
from tritonbuild import api
from tritonbuild.backends.vllm.invariant import wheel as invariant
from tritonbuild.repository.manifest import read_repository
from tritonbuild.verify.models import VerificationReport

pytestmark = [pytest.mark.triton, pytest.mark.slow]
STANDIN = ROOT / "tests" / "fixtures" / "llm" / "vllm_standin"
RECIPE = """\
name: chat
version: 1
backend: vllm
checkpoint: {{path: {ckpt}}}
engine_args: {{dtype: float16, max_num_seqs: 16, enforce_eager: true, extra: {{max_num_batched_tokens: 64}}}}
serving: {{determinism: {determinism}}}
image: {{triton_image: "nvcr.io/nvidia/tritonserver:26.06-vllm-python-py3"}}
verify: {{goldens: goldens/chat.npz, samples: 2, repeats: 2, batch_invariance: {require},
          under_load: {{others: 12, repeats: 2}}}}
"""


def _build(tmp_path, determinism: str, require: str, out: str):
    recipe = tmp_path / f"{out}.yaml"
    recipe.write_text(
        RECIPE.format(ckpt=EXAMPLES / "tiny-llama", determinism=determinism, require=require)
    )
    api.build_repository([recipe], tmp_path / out)
    return tmp_path / out


def _serve(root):
    serving = api.serve(root, backends={"vllm": STANDIN})
    server, loadable = serving.server, serving.loadable
    assert loadable == ["chat"]
    return server


def _verify(cli, root, url, *extra):
    r = cli("verify", str(root), "--server", url, "--json", *extra)
    return r.exit_code, json.loads(r.stdout)


def test_answers_that_change_under_load_fail_a_recipe_that_requires_invariance(
    cli, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    root = _build(tmp_path, "default", "require", "default")
    with _serve(root) as server:
        url = f"http://{server.http_url}"
        code, recorded = _verify(cli, root, url, "--record")
        assert code == 6, recorded  # recorded alone; under load the stand-in's batched rows differ
        model = recorded["models"][0]
        assert model["batch_invariance"] == "variant"
        load = model["under_load"]
        assert load["others"] == 12 and load["repeats"] == 2 and load["answers"] == 2 * 4
        assert load["differing"] > 0 and load["first_differing_position"] is not None
        assert load["ids_differing"] + load["logprobs_only_differing"] == load["differing"]
        assert "differ from the answer alone" in model["batch_detail"]
        assert all(
            m["context"].startswith("amid 12 concurrent requests")
            or m["context"].split(":")[0] in {p["path"] for p in load["paths"]}
            for m in model["mismatches"]
        )
        assert "VLLM_BATCH_INVARIANT" not in server.env


def test_a_model_served_invariant_answers_bit_for_bit_under_load(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    root = _build(tmp_path, "invariant", "require", "inv")
    manifest = read_repository(root, AssertionError)
    serving = manifest.models[0].llm["serving"]
    wheel = root / "chat" / "1" / serving["plugins"][0]
    assert serving["env"] == {"VLLM_BATCH_INVARIANT": "1"} and wheel.is_file()
    assert (
        f"chat/1/{serving['plugins'][0]}" in manifest.files
    )  # verified and published with the model
    with _serve(root) as server:
        assert server.env == {"VLLM_BATCH_INVARIANT": "1"} and server.wheels == [wheel]
        code, recorded = _verify(cli, root, f"http://{server.http_url}", "--record")
        log = server.log_path.read_text(errors="replace")
    assert code == 0, recorded
    model = recorded["models"][0]
    assert model["batch_invariance"] == "invariant" and model["under_load"]["differing"] == 0
    assert model["under_load"]["answers"] == 8
    # a server on this host: its GPU, driver and engines read beside it, recorded with the goldens
    assert model["numerics"]["read"].startswith("beside the server") and "cpu" in model["numerics"]
    assert (
        "batch invariant True" in log and f"general plugins ['{invariant.ENTRY_POINT_NAME}']" in log
    )


def test_a_model_not_asked_to_be_invariant_passes_and_says_what_differed(
    cli, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    root = _build(tmp_path, "default", "report", "rep")
    with _serve(root) as server:
        code, report = _verify(cli, root, f"http://{server.http_url}", "--record")
    assert code == 0, report
    model = report["models"][0]
    assert model["batch_invariance"] == "variant" and model["mismatches"] == []
    assert any(
        "depend on the other requests in flight" in note
        and "serving.determinism: invariant" in note
        for note in model["notes"]
    )


def test_the_serving_images_entrypoint_installs_the_plugin_and_sets_the_mode(tmp_path, monkeypatch):
    """Dockerfile.triton's entrypoint (the Kubernetes snippet runs that image) gives a fleet what serve gives the
    embedded server: the manifest's environment, and the plugin wheels pip-installed before tritonserver starts."""
    import os
    import stat
    import subprocess

    monkeypatch.chdir(tmp_path)
    root = _build(tmp_path, "invariant", "require", "inv")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in (
        "pip",
        "tritonserver",
    ):  # record argv and environment instead of installing or serving
        (bin_dir / name).write_text(
            f'#!/bin/sh\necho "{name} $* VLLM_BATCH_INVARIANT=$VLLM_BATCH_INVARIANT"\n'
        )
        (bin_dir / name).chmod(stat.S_IRWXU)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "TRITONBUILD_MODELS": str(root)}
    lines = subprocess.run(
        ["bash", str(ROOT / "ci/docker/entrypoint.sh")],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    wheel = root / "chat" / "1" / "plugins" / invariant.wheel_name()
    assert lines[0].split() == [
        "pip",
        "install",
        "--no-cache-dir",
        "--no-deps",
        "--no-index",
        str(wheel),
        "VLLM_BATCH_INVARIANT=1",
    ]
    assert lines[1].startswith("tritonserver ") and lines[1].endswith("VLLM_BATCH_INVARIANT=1")


def test_verify_does_not_reload_a_model_the_server_already_serves(cli, tmp_path, monkeypatch):
    """Triton's load API reloads a model it already serves: for a vLLM model, a second engine beside the first (on
    the H200 an 8B model served at 0.42 of the GPU failed 'Engine core initialization failed', and verify failed
    a model the server was serving). verify --server loads only what is not ready."""
    import os
    import shutil

    from tritonbuild.server.loading import load_model

    monkeypatch.chdir(tmp_path)
    root = _build(tmp_path, "default", "report", "served")
    with _serve(root) as server:
        url = f"http://{server.http_url}"
        load_model(url, "chat")
        # NOTE: verified as h200.sh does, on a hardlinked copy: new links change the files' ctime, and Triton then
        # reloads a model it is asked to load again
        shutil.copytree(root, tmp_path / "rec", copy_function=os.link)
        code, report = _verify(cli, tmp_path / "rec", url, "--record")
        log = server.log_path.read_text(errors="replace")
    assert code == 0, report
    assert log.count("loading: chat:1") == 1, log[-3000:]


@pytest.mark.parametrize("determinism, passed", [("invariant", True), ("default", False)])
def test_verify_runs_a_given_backends_models_in_the_embedded_server_as_serve_does(
    cli, tmp_path, monkeypatch, determinism, passed
):
    """verify --backend vllm=DIR: no separate server; the embedded one serves the model with the environment and
    plugin its manifest records, so a model served invariant passes under load and a default one fails."""
    monkeypatch.chdir(tmp_path)
    root = _build(tmp_path, determinism, "require", determinism)
    r = cli("verify", str(root), "--record", "--backend", f"vllm={STANDIN}", "--json")
    assert r.exit_code == (0 if passed else 6), r.output[-2000:]
    printed = json.loads(r.stdout)
    assert (
        "hint" not in printed
    )  # answers that change under load are not accepted by recording them
    report = VerificationReport.model_validate({k: v for k, v in printed.items() if k != "hint"})
    (model,) = report.models
    assert model.route == "live-embedded" and "vllm backend given" in model.route_detail
    assert report.passed is passed and model.under_load["answers"] == 8
    assert (model.under_load["differing"] == 0) is passed


def _paths(model: dict) -> dict:
    return {path["path"]: path for path in model["under_load"]["paths"]}


def test_verify_under_load_takes_the_paths_real_traffic_takes(cli, tmp_path, monkeypatch):
    """Beyond the short golden prompts: a prompt of several KV blocks cold and from the prefix cache, prompts
    sharing a prefix in flight, a prompt longer than the step's token budget prefilled in chunks amid decoding
    streams, a long decode under load, seeded sampling: all bit-identical on a server that serves invariant."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("VLLM_STANDIN_VARIANT", raising=False)
    root = _build(tmp_path, "invariant", "require", "paths")
    with _serve(root) as server:
        code, report = _verify(cli, root, f"http://{server.http_url}", "--record")
    assert code == 0, report
    model = report["models"][0]
    paths = _paths(model)
    assert list(paths) == [
        "prefix-cache",
        "shared-prefix",
        "chunked-prefill",
        "long-decode",
        "seeded-sampling",
    ]
    assert all(p["differing"] == 0 and p["answers"] > 0 for p in paths.values()), paths
    assert paths["prefix-cache"]["exercised"] and paths["chunked-prefill"]["exercised"]
    assert "budget 64 tokens" in paths["chunked-prefill"]["detail"]
    assert not paths["seeded-sampling"]["required"]
    assert "paths: prefix-cache: 2 identical" in model["batch_detail"]


@pytest.mark.parametrize(
    "variant, path, fails",
    [
        ("prefix-cache", "prefix-cache", True),
        ("chunked-prefill", "chunked-prefill", True),
        ("sampler", "seeded-sampling", False),
    ],
)
def test_a_path_whose_answers_change_fails_an_invariant_model_and_is_named(
    cli, tmp_path, monkeypatch, variant, path, fails
):
    """The stand-in made batch-dependent on one path (VLLM_STANDIN_VARIANT): the golden requests alone would
    pass; verify fails naming the path. Seeded sampling is measured and told, outside the promise."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("VLLM_STANDIN_VARIANT", variant)
    root = _build(tmp_path, "invariant", "require", f"v-{variant}")
    with _serve(root) as server:
        code, report = _verify(cli, root, f"http://{server.http_url}", "--record")
    model = report["models"][0]
    paths = _paths(model)
    assert paths[path]["differing"] > 0, paths
    assert (code, model["passed"]) == ((6, False) if fails else (0, True)), report
    assert f"{path}: " in model["batch_detail"] and "differ" in model["batch_detail"]
    if fails:
        assert model["batch_invariance"] == "variant"
        assert any(m["context"].startswith(f"{path}: ") for m in model["mismatches"])
    else:
        assert not any(m["context"].startswith(f"{path}: ") for m in model["mismatches"])


def test_an_invariant_model_whose_engine_started_without_the_plugin_fails_naming_it(
    cli, tmp_path, monkeypatch
):
    """The plugin failed to load (VLLM_STANDIN_VARIANT=plugin: vLLM logs and skips it): the engine's log has no
    plugin line before it, and verify fails the model naming it, from the embedded server's own log."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("VLLM_STANDIN_VARIANT", "plugin")
    root = _build(tmp_path, "invariant", "report", "noplugin")
    r = cli("verify", str(root), "--record", "--backend", f"vllm={STANDIN}", "--json")
    assert r.exit_code == 6, r.output[-2000:]
    (model,) = json.loads(r.stdout)["models"]
    assert model["passed"] is False and len(model["served_problems"]) == 1
    assert "started without tritonbuild's invariant plugin" in model["served_problems"][0]


def test_an_invariant_model_whose_engine_compiled_with_timed_combo_kernels_fails_naming_them(
    cli, tmp_path, monkeypatch
):
    """The stand-in logs the Inductor options its engine compiled with as vLLM 0.22 does (both on unless model.json
    gives either): as built, model.json gives both off and Inductor's deterministic mode on, and the invariant models
    of the other tests pass; an engine that turned the combo kernels on anyway (VLLM_STANDIN_VARIANT=combo) and
    compiled without the deterministic mode (nodeterministic: Inductor then keeps each reduction's fastest-timed
    launch configuration, docs/runs/2026-12-07-fresh-compile-lm-head-h100.json) fails, naming both, from the
    embedded server's log (one server start for the two rows)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("VLLM_STANDIN_VARIANT", "combo,nodeterministic")
    root = _build(tmp_path, "invariant", "report", "combo")
    r = cli("verify", str(root), "--record", "--backend", f"vllm={STANDIN}", "--json")
    (model,) = json.loads(r.stdout)["models"]
    assert r.exit_code == 6, model
    combo, deterministic = model["served_problems"]
    assert "Inductor's benchmark_combo_kernel and combo_kernels on" in combo
    assert "compiled without Inductor's deterministic mode" in deterministic


def test_verify_server_reads_the_given_servers_log(cli, tmp_path, monkeypatch):
    """verify --server URL --server-log FILE: the served model's engine lines are read from that log; without
    it, a note says the kernels were not checked."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("VLLM_STANDIN_VARIANT", raising=False)
    root = _build(tmp_path, "invariant", "report", "given")
    with _serve(root) as server:
        url = f"http://{server.http_url}"
        code, plain = _verify(cli, root, url, "--record")
        code_log, logged = _verify(cli, root, url, "--server-log", str(server.log_path))
        empty = tmp_path / "other.log"
        empty.write_text("INFO another server's log\n")
        code_other, other = _verify(cli, root, url, "--server-log", str(empty))
    assert (code, code_log, code_other) == (0, 0, 6)
    assert any("no server log" in note for note in plain["models"][0]["notes"])
    assert logged["models"][0]["served_problems"] == []
    assert not any("no server log" in note for note in logged["models"][0]["notes"])
    assert "has no vLLM engine for it" in other["models"][0]["served_problems"][0]


def test_serve_stops_naming_an_invariant_model_whose_plugin_did_not_load(tmp_path, monkeypatch):
    """serve under explicit model control: after the loads, the server's log is read as verify reads it; an
    invariant model served without its plugin stops the server with a ServerError (exit 8) naming the model."""
    from tritonbuild.errors import ServerError

    monkeypatch.chdir(tmp_path)
    root = _build(tmp_path, "invariant", "report", "serve-check")
    monkeypatch.setenv("VLLM_STANDIN_VARIANT", "plugin")
    serving = api.serve(root, backends={"vllm": STANDIN}, control="explicit")
    with pytest.raises(ServerError) as failed:
        serving.start()
    assert "chat v1: its vLLM engine" in failed.value.message and failed.value.exit_code == 8
    assert serving.server.proc is None or serving.server.proc.poll() is not None
    monkeypatch.delenv("VLLM_STANDIN_VARIANT")
    serving = api.serve(root, backends={"vllm": STANDIN}, control="explicit")
    try:
        assert serving.start().loaded == ["chat"]
    finally:
        serving.server.stop()


def test_an_int4_model_on_another_kernel_fails_naming_the_kernel(cli, tmp_path, monkeypatch):
    """An INT4 W4A16 model (the build's vllm.quantize step) served invariant: the stand-in logs the kernel vLLM
    chose for its W4A16 linears as vLLM does; with VLLM_STANDIN_VARIANT=kernel that is Machete, not the plugin's,
    and verify fails the model naming it; with the plugin's kernel it passes."""
    from benchmarks.vllm import tiny_llama

    monkeypatch.chdir(tmp_path)
    # hidden 256: the bundled tiny model's 64 is too narrow for the invariant W4A16 kernel (plan refuses it)
    ckpt = tiny_llama.write_all(tmp_path / "ck")["fp16"]
    recipe = tmp_path / "int4.yaml"
    recipe.write_text(
        RECIPE.format(ckpt=ckpt, determinism="invariant", require="report")
        .replace("dtype: float16,", "dtype: float16, quantization: compressed-tensors,")
        .replace("serving:", "quantize: {scheme: w4a16, group_size: 32}\nserving:")
    )
    api.build_repository([recipe], tmp_path / "int4")
    for variant, code in (("kernel", 6), ("", 0)):
        monkeypatch.setenv("VLLM_STANDIN_VARIANT", variant)
        r = cli(
            "verify", str(tmp_path / "int4"), "--record", "--backend", f"vllm={STANDIN}", "--json"
        )
        (model,) = json.loads(r.stdout)["models"]
        assert r.exit_code == code, model
        if code:
            assert "vLLM chose MacheteLinearKernel" in model["served_problems"][0]
        else:
            assert model["served_problems"] == []
