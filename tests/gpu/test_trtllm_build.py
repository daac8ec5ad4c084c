"""A real engine build: runs only where TensorRT-LLM imports and a GPU is present (the NGC TRT-LLM image on a
GPU runner). Everywhere else it skips itself; CI never has a GPU."""

from __future__ import annotations

import importlib.util
import json
import shutil

import pytest

from tests.conftest import EXAMPLES

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(importlib.util.find_spec("tensorrt_llm") is None,
                                                  reason="tensorrt_llm is not installed")]


@pytest.mark.parametrize("build_path", ["cli", "llmapi"])
def test_int4_engine_build_and_repository(cli, tmp_path, build_path):
    shutil.copytree(EXAMPLES / "tiny-llama", tmp_path / "tiny-llama")
    text = (EXAMPLES / "tiny-llama-int4.yaml").read_text()
    import tensorrt_llm

    text = text.replace('trtllm_version: "1.2.1"', f'trtllm_version: "{tensorrt_llm.__version__}"')
    text = text.replace("  use_paged_context_fmha: true", f"  use_paged_context_fmha: true\n  build_path: {build_path}")
    (tmp_path / "llm.yaml").write_text(text)
    out = tmp_path / "OUT"
    r = cli("build", tmp_path / "llm.yaml", "-o", out, "--strict", "--json")
    assert r.exit_code == 0, r.stderr
    steps = {s["kind"]: s for s in json.loads(r.stdout)["models"][0]["steps"]}
    assert steps["trtllm.engine"]["status"] == "built"
    engine = out / "tiny-llama_tensorrt_llm" / "1" / "engine"
    cfg = json.loads((engine / "config.json").read_text())
    assert cfg["pretrained_config"]["quantization"]["quant_algo"] == "W4A16"
    assert (engine / "rank0.engine").stat().st_size > 0
