"""`serving.determinism: invariant` at plan: every setting of the invariance table
(backends/vllm/invariant/table.py) that breaks invariance is refused, exit 3, naming the key with its file:line, the
reason and the fix, or made safe in model.json; the settings the GPU record measured plan as before."""

from __future__ import annotations

import json
import re
import shutil

import pytest

IMAGE = "nvcr.io/nvidia/tritonserver:26.06-vllm-python-py3"  # vLLM 0.22.1: the plugin's recorded release


def _recipe(tmp_path, engine: str = "", more: str = "", determinism: str = "invariant", ckpt=None):
    from tests.conftest import EXAMPLES

    text = (
        "name: tiny-llama-vllm\nversion: 1\nbackend: vllm\n"
        f"checkpoint: {{path: {ckpt or EXAMPLES / 'tiny-llama'}}}\n"
        "engine_args:\n  dtype: float16\n  gpu_memory_utilization: 0.5\n  max_model_len: 512\n"
        f"{engine}"
        f"serving: {{repository_mount: {tmp_path / 'OUT'}, determinism: {determinism}}}\n"
        f"image: {{triton_image: '{IMAGE}'}}\n{more}"
    )
    (tmp_path / "v.yaml").write_text(text)
    return tmp_path / "v.yaml"


def _line_of(path, needle: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


def _refused(cli, path, key: str, needle: str, *words: str):
    r = cli("plan", path)
    assert r.exit_code == 3, r.output
    assert key in r.stderr, r.stderr
    assert f"v.yaml:{_line_of(path, needle)}" in r.stderr, r.stderr
    for word in words:
        assert word in r.stderr, (word, r.stderr)
    assert "Traceback" not in r.output
    return r.stderr


REFUSED = {
    "linear-backend": (
        "  extra: {linear_backend: machete}\n",
        "",
        "engine_args.extra.linear_backend",
        "linear_backend",
        ("choose_mp_linear_kernel", "auto"),
    ),
    "kernel-config-linear-backend": (
        "  extra:\n    kernel_config:\n      linear_backend: marlin\n",
        "",
        "engine_args.extra.kernel_config.linear_backend",
        "linear_backend: marlin",
        ("auto",),
    ),
    "flashinfer": (
        "  extra: {attention_backend: FLASHINFER}\n",
        "",
        "engine_args.extra.attention_backend",
        "attention_backend",
        ("supports_batch_invariance", "FLASH_ATTN"),
    ),
    "attention-config-flashinfer": (
        "  extra:\n    attention_config: {backend: FLASHINFER}\n",
        "",
        "engine_args.extra.attention_config.backend",
        "attention_config",
        ("FLASH_ATTN",),
    ),
    "t4": ("", "gpu: T4\n", "gpu", "gpu: T4", ("8.0", "7.5")),
    "a100-graphs-on": (
        "  enforce_eager: false\n",
        "gpu: A100-80\n",
        "engine_args.enforce_eager",
        "enforce_eager",
        ("CUDA graphs", "9.0"),
    ),
    "lora": ("", "lora: {adapters: {sql: adapters/sql}}\n", "lora", "lora:", ("block_k", "token")),
    "tensor-parallel": (
        "  tensor_parallel_size: 2\n",
        "",
        "engine_args.tensor_parallel_size",
        "tensor_parallel_size",
        ("not measured",),
    ),
    "pipeline-parallel": (
        "  pipeline_parallel_size: 2\n",
        "",
        "engine_args.pipeline_parallel_size",
        "pipeline_parallel_size",
        ("not measured",),
    ),
    "speculative": (
        "",
        "speculative: {method: draft_model, num_speculative_tokens: 2, model: draft}\n",
        "speculative",
        "speculative:",
        ("not measured",),
    ),
    "fp8-kv-cache": (
        "  extra: {kv_cache_dtype: fp8}\n",
        "",
        "engine_args.extra.kv_cache_dtype",
        "kv_cache_dtype",
        ("auto",),
    ),
    # measured: docs/runs/2026-12-06-inductor-bits-h100.json (3 fresh processes, 3 outputs)
    "compile-sizes": (
        "  extra:\n    compilation_config:\n      compile_sizes: [1, 2, 4]\n",
        "",
        "engine_args.extra.compilation_config.compile_sizes",
        "compile_sizes",
        ("max-autotune", "three fresh processes", "remove compile_sizes"),
    ),
    "compile-sizes-as-json-text": (
        '  extra:\n    compilation_config: \'{"compile_sizes": ["cudagraph_capture_sizes"]}\'\n',
        "",
        "engine_args.extra.compilation_config.compile_sizes",
        "compilation_config",
        ("max-autotune",),
    ),
    "inductor-max-autotune": (
        "  extra:\n    compilation_config:\n      inductor_compile_config: {max_autotune: true}\n",
        "",
        "engine_args.extra.compilation_config.inductor_compile_config.max_autotune",
        "inductor_compile_config",
        ("max-autotune",),
    ),
    # docs/runs/2026-12-07-compile-reproducibility-h100.json: vLLM keeps a combo kernel if it timed faster
    "combo-kernels-on": (
        "  extra:\n    compilation_config:\n      inductor_compile_config: {combo_kernels: true}\n",
        "",
        "engine_args.extra.compilation_config.inductor_compile_config.combo_kernels",
        "inductor_compile_config",
        ("timed faster", "remove them"),
    ),
    "benchmark-combo-kernel-on": (
        '  extra:\n    compilation_config: \'{"inductor_compile_config": {"benchmark_combo_kernel": true}}\'\n',
        "",
        "engine_args.extra.compilation_config.inductor_compile_config.benchmark_combo_kernel",
        "compilation_config",
        ("timed faster",),
    ),
    # docs/runs/2026-12-07-fresh-compile-lm-head-h100.json: a reduction's launch configuration kept if it timed faster
    "inductor-deterministic-off": (
        "  extra:\n    compilation_config:\n      inductor_compile_config: {deterministic: false}\n",
        "",
        "engine_args.extra.compilation_config.inductor_compile_config.deterministic",
        "inductor_compile_config",
        ("timing them", "remove it"),
    ),
    "compilation-level": (
        "  extra:\n    compilation_config: 3\n",
        "",
        "engine_args.extra.compilation_config",
        "compilation_config",
        ("not a mapping", "as a mapping"),
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_setting_that_breaks_invariance_is_refused_at_its_key(cli, tmp_path, case):
    engine, more, key, needle, words = REFUSED[case]
    path = _recipe(tmp_path, engine, more)
    _refused(cli, path, key, needle, "invariant", *words)
    # the same setting with the default determinism is not this table's business
    path.write_text(path.read_text().replace("determinism: invariant", "determinism: default"))
    r = cli("plan", path)
    assert "invariant" not in r.stderr, r.stderr


def test_measured_settings_plan_and_the_table_allows_flash_attention(cli, tmp_path):
    path = _recipe(
        tmp_path,
        "  extra:\n    attention_backend: FLASH_ATTN\n    linear_backend: auto\n"
        "    kv_cache_dtype: auto\n",
        "gpu: H100\n",
    )
    r = cli("plan", path)
    assert r.exit_code == 0, r.output
    # compile ranges (not single sizes) and tuning turned off are what the default compile does
    path = _recipe(
        tmp_path,
        "  extra:\n    compilation_config:\n      compile_ranges_endpoints: [8]\n"
        "      inductor_compile_config: {max_autotune: false}\n",
        "gpu: H100\n",
    )
    assert cli("plan", path).exit_code == 0


def test_below_sm90_cuda_graphs_are_turned_off_in_model_json(cli, tmp_path):
    """vLLM 0.22's batch-invariant mode runs without CUDA graphs below SM 9.0 (its own tests' note): an A100
    recipe that leaves enforce_eager unset is built with enforce_eager: true."""
    path = _recipe(tmp_path, more="gpu: A100-80\n")
    r = cli("build", path, "-o", tmp_path / "OUT")
    assert r.exit_code == 0, r.output
    doc = json.loads((tmp_path / "OUT" / "tiny-llama-vllm" / "1" / "model.json").read_text())
    assert doc["enforce_eager"] is True
    # on the measured SM 9.0 the graphs stay on
    shutil.rmtree(tmp_path / "OUT")
    path.write_text(path.read_text().replace("gpu: A100-80", "gpu: H200"))
    assert cli("build", path, "-o", tmp_path / "OUT").exit_code == 0
    doc = json.loads((tmp_path / "OUT" / "tiny-llama-vllm" / "1" / "model.json").read_text())
    assert doc["enforce_eager"] is False


def _model_json(cli, path, tmp_path) -> dict:
    shutil.rmtree(tmp_path / "OUT", ignore_errors=True)
    r = cli("build", path, "-o", tmp_path / "OUT")
    assert r.exit_code == 0, r.output
    return json.loads((tmp_path / "OUT" / "tiny-llama-vllm" / "1" / "model.json").read_text())


def test_inductors_combo_kernels_and_their_timing_are_off_in_model_json(cli, tmp_path):
    """vLLM 0.22 turns on Inductor's combo kernels and times them at compile unless either key is given
    (config/compilation.py:957-967): two fresh compiles of the invariant fp16 8B model on one H100 then answered
    differently (docs/runs/2026-12-07-compile-reproducibility-h100.json). An invariant recipe's model.json gives
    both false, merged into the recipe's own compilation_config (a mapping or its JSON text)."""
    from tritonbuild.backends.vllm.invariant.table import INDUCTOR_DETERMINISTIC, INDUCTOR_FORCED

    assert INDUCTOR_FORCED == {"combo_kernels": False, "benchmark_combo_kernel": False}
    # and Inductor's deterministic mode (row inductor_deterministic): two more fresh compiles with combo kernels off
    # still gave the fp16 model other log-probs (docs/runs/2026-12-07-fresh-compile-lm-head-h100.json)
    forced = {**INDUCTOR_FORCED, **INDUCTOR_DETERMINISTIC}
    assert forced["deterministic"] is True
    doc = _model_json(cli, _recipe(tmp_path, more="gpu: H100\n"), tmp_path)
    assert doc["compilation_config"] == {"inductor_compile_config": forced}
    for given in (
        "  extra:\n    compilation_config:\n      compile_ranges_endpoints: [8]\n"
        "      inductor_compile_config: {max_autotune: false}\n",
        '  extra:\n    compilation_config: \'{"compile_ranges_endpoints": [8], '
        '"inductor_compile_config": {"max_autotune": false}}\'\n',
    ):
        doc = _model_json(cli, _recipe(tmp_path, given, "gpu: H100\n"), tmp_path)
        assert doc["compilation_config"] == {
            "compile_ranges_endpoints": [8],
            "inductor_compile_config": {"max_autotune": False, **forced},
        }
    # given false by hand: the same; the default determinism: vLLM's own choice, nothing written
    given = (
        "  extra:\n    compilation_config:\n      inductor_compile_config: {combo_kernels: false, "
        "deterministic: true}\n"
    )
    doc = _model_json(cli, _recipe(tmp_path, given, "gpu: H100\n"), tmp_path)
    assert doc["compilation_config"] == {"inductor_compile_config": forced}
    doc = _model_json(cli, _recipe(tmp_path, more="gpu: H100\n", determinism="default"), tmp_path)
    assert "compilation_config" not in doc


def _checkpoint(tmp_path, quantization_config: dict | None):
    from tests.conftest import EXAMPLES

    ckpt = tmp_path / "ckpt"
    shutil.copytree(EXAMPLES / "tiny-llama", ckpt)
    config = json.loads((ckpt / "config.json").read_text())
    if quantization_config is not None:
        config["quantization_config"] = quantization_config
    (ckpt / "config.json").write_text(json.dumps(config))
    return ckpt


def _ct(num_bits=4, symmetric=True, actorder=None, group_size=128, fmt="pack-quantized"):
    """A compressed-tensors quantization_config as llm-compressor writes it (compressed_tensors.json)."""
    return {
        "quant_method": "compressed-tensors",
        "format": fmt,
        "config_groups": {
            "group_0": {
                "targets": ["Linear"],
                "weights": {
                    "num_bits": num_bits,
                    "type": "int",
                    "symmetric": symmetric,
                    "strategy": "group",
                    "group_size": group_size,
                    "actorder": actorder,
                },
                "input_activations": None,
            }
        },
        "ignore": ["lm_head"],
    }


CHECKPOINTS = {
    "asymmetric": (_ct(symmetric=False), "zero points"),
    "act-order": (_ct(actorder="group"), "g_idx"),
    "8-bit": (_ct(num_bits=8), "8-bit"),
    "gptq-desc-act": (
        {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": True, "sym": True},
        "desc_act",
    ),
    "gptq-8-bit": (
        {"quant_method": "gptq", "bits": 8, "group_size": 128, "desc_act": False, "sym": True},
        "8-bit",
    ),
    "awq": (
        {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True},
        "zero points",
    ),
    "fp8": ({"quant_method": "fp8", "activation_scheme": "dynamic"}, "fp8"),
}


@pytest.mark.parametrize("case", sorted(CHECKPOINTS))
def test_a_pre_quantized_checkpoint_the_plugin_cannot_implement_is_refused(cli, tmp_path, case):
    config, word = CHECKPOINTS[case]
    ckpt = _checkpoint(tmp_path, config)
    path = _recipe(tmp_path, ckpt=ckpt)
    stderr = _refused(cli, path, "checkpoint.path", "checkpoint:", "quantization_config", word)
    assert "invariant" in stderr
    path.write_text(path.read_text().replace("determinism: invariant", "determinism: default"))
    assert "invariant" not in cli("plan", path).stderr


def _wide(ckpt):
    """The tiny checkpoint's config.json at widths the invariant W4A16 kernel takes (K a multiple of 128)."""
    config = json.loads((ckpt / "config.json").read_text())
    config.update(hidden_size=128, head_dim=32, intermediate_size=256)
    (ckpt / "config.json").write_text(json.dumps(config))
    return ckpt


def test_the_projects_int4_format_and_its_quantize_step_plan(cli, tmp_path):
    ckpt = _wide(_checkpoint(tmp_path, _ct(group_size=32)))
    r = cli("plan", _recipe(tmp_path, ckpt=ckpt))
    assert r.exit_code == 0, r.output
    (tmp_path / "q").mkdir()
    wide = _wide(_checkpoint(tmp_path / "q", None))
    path = _recipe(tmp_path / "q", ckpt=wide, more="quantize: {scheme: w4a16, group_size: 32}\n")
    r = cli("plan", path)
    assert r.exit_code == 0, r.output
    assert re.search("compressed-tensors", cli("plan", path, "--json").stdout)


def test_an_int4_model_with_a_layer_the_kernel_cannot_take_is_refused(cli, tmp_path):
    """The bundled tiny model's hidden size is 64: the invariant W4A16 kernel reads K in blocks of 128, so vLLM
    would give its attention linears to a batch-variant kernel. Refused at plan, at the key that made it INT4."""
    path = _recipe(tmp_path, more="quantize: {scheme: w4a16, group_size: 32}\n")
    stderr = _refused(
        cli,
        path,
        "quantize.group_size",
        "quantize:",
        "qkv_proj: K 64",
        "o_proj: K 64",
        "unquantized",
    )
    assert "down_proj" not in stderr  # K 128 with group 32: taken
    (tmp_path / "c").mkdir()
    path = _recipe(tmp_path / "c", ckpt=_checkpoint(tmp_path / "c", _ct(group_size=32)))
    _refused(cli, path, "checkpoint.path", "checkpoint:", "qkv_proj: K 64", "batch-variant")
    path.write_text(path.read_text().replace("determinism: invariant", "determinism: default"))
    assert cli("plan", path).exit_code == 0


def test_allow_unmeasured_lets_through_only_what_is_refused_as_not_measured(cli, tmp_path):
    """serving.allow_unmeasured (to make the GPU record of a setting no record measured: tensor parallel 2 in
    benchmarks/multi_gpu) takes the rows refused as not measured, never one known to break invariance."""
    from tritonbuild.backends.vllm.invariant.table import BY_ID, UNMEASURED

    assert BY_ID["parallel"].verdict == UNMEASURED and BY_ID["linear_backend"].verdict == "refuse"
    path = _recipe(tmp_path, "  tensor_parallel_size: 2\n  extra: {kv_cache_dtype: fp8}\n")
    stderr = _refused(cli, path, "engine_args.tensor_parallel_size", "tensor_parallel_size")
    assert "allow_unmeasured" in stderr
    path.write_text(
        path.read_text().replace(
            "determinism: invariant", "determinism: invariant, allow_unmeasured: true"
        )
    )
    r = cli("plan", path)
    assert r.exit_code == 0, r.output
    path.write_text(
        path.read_text().replace(
            "kv_cache_dtype: fp8", "kv_cache_dtype: fp8, linear_backend: marlin"
        )
    )
    _refused(cli, path, "engine_args.extra.linear_backend", "linear_backend")
