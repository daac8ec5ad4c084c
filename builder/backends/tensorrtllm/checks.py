"""Cross-checks between the engine's config.json, the recipe and the generated config.pbtxt files.

Each problem names both sides, so the fix is obvious: rebuild the engine or change the recipe.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from tritonbuild.backends.llm.gpus import GPU_SM
from tritonbuild.backends.llm.images import image_problem, image_versions
from tritonbuild.backends.tensorrtllm.llmapi_keys import route_problems
from tritonbuild.backends.tensorrtllm.quant import (
    FORMATS,
    LLMAPI_FORMATS,
    arch_problem,
    engine_algos,
)
from tritonbuild.backends.tensorrtllm.recipe import LLMRecipe
from tritonbuild.backends.tensorrtllm.route import LLMAPI_SINCE, version_tuple
from tritonbuild.backends.tensorrtllm.speculative import built_limits
from tritonbuild.backends.tensorrtllm.speculative import engine_problems as speculative_problems
from tritonbuild.backends.tensorrtllm.speculative import recipe_rules as speculative_rules
from tritonbuild.errors import BuildError


def _major_minor(v: str) -> tuple[str, ...]:
    return tuple(re.findall(r"\d+", str(v))[:3])


def check_recipe(recipe: LLMRecipe) -> list[tuple]:
    """Cross-field rules of a TensorRT-LLM recipe, each tied to the key to change (run at load)."""
    return _limit_rules(recipe) + _route_rules(recipe) + _gpu_and_image_rules(recipe)


def _limit_rules(recipe: LLMRecipe) -> list[tuple]:
    """The engine's limits, paged context FMHA and the GPUs against each other."""
    out = []
    engine, kv_cache, serving = recipe.engine, recipe.kv_cache, recipe.serving
    if engine.max_seq_len < engine.max_input_len:
        out.append(
            (
                ("engine", "max_seq_len"),
                f"max_seq_len {engine.max_seq_len} < max_input_len {engine.max_input_len}",
                "max_seq_len counts input + output tokens: raise it to at least max_input_len",
            )
        )
    if kv_cache.enable_block_reuse and not engine.use_paged_context_fmha:
        out.append(
            (
                ("kv_cache", "enable_block_reuse"),
                "KV block reuse needs an engine built with paged context "
                "FMHA (TensorRT-LLM asserts at load)",
                "set engine.use_paged_context_fmha: true",
            )
        )
    if serving.enable_chunked_context and not engine.use_paged_context_fmha:
        out.append(
            (
                ("serving", "enable_chunked_context"),
                "chunked context needs paged context FMHA",
                "set engine.use_paged_context_fmha: true",
            )
        )
    world = engine.tp_size * engine.pp_size
    if len(serving.gpu_device_ids) % world:
        out.append(
            (
                ("serving", "gpu_device_ids"),
                f"{len(serving.gpu_device_ids)} GPUs is not a multiple of "
                f"tp_size × pp_size = {world}",
                f"list {world} GPU ids per instance",
            )
        )
    seq = built_limits(recipe)["max_seq_len"] if recipe.runtime == "engine" else engine.max_seq_len
    if kv_cache.max_tokens is not None and kv_cache.max_tokens < seq:
        out.append(
            (
                ("kv_cache", "max_tokens"),
                f"max_tokens {kv_cache.max_tokens} cannot hold one sequence of "
                f"max_seq_len {seq}"
                + (
                    f" ({engine.max_seq_len} + max_draft_len, as trtllm-build builds it)"
                    if seq != engine.max_seq_len
                    else ""
                ),
                "raise kv_cache.max_tokens or lower engine.max_seq_len",
            )
        )
    return out


def _route_rules(recipe: LLMRecipe) -> list[tuple]:
    """What the chosen route (engine or the LLM API) cannot do with the recipe's quantization, KV
    cache, speculative mode and keys, and the image's TensorRT-LLM it needs."""
    out = []
    kv_cache = recipe.kv_cache
    if recipe.runtime == "pytorch" and recipe.quantization == "int4_weight_only":
        out.append(
            (
                ("quantization",),
                "int4_weight_only (RTN W4A16) exists only on the TensorRT engine path; the "
                "PyTorch/LLM-API runtime loads checkpoints that ModelOpt already quantized (hf_quant_config.json)",
                "use runtime: engine, or a ModelOpt-quantized checkpoint with quantization: int4_awq or fp8",
            )
        )
    out += quantization_rules(recipe) + speculative_rules(recipe) + route_problems(recipe)
    trtllm = image_versions(recipe.image)["tensorrt_llm"]
    if recipe.runtime == "pytorch" and version_tuple(trtllm) < LLMAPI_SINCE:
        out.append(
            (
                ("runtime",),
                f"runtime: pytorch needs TensorRT-LLM 1.0 or newer (its LLM API on the PyTorch "
                f"backend); {recipe.image.triton_image} ships {trtllm}",
                "use runtime: engine, or an image with TensorRT-LLM 1.0+ (NGC 25.09 or newer)",
            )
        )
    if recipe.runtime == "pytorch" and kv_cache.dtype == "int8":
        out.append(
            (
                ("kv_cache", "dtype"),
                "the PyTorch/LLM-API runtime applies only an fp8 KV cache "
                "(TorchLlmArgs syncs kv_cache_config.dtype fp8 alone)",
                "use kv_cache.dtype: fp8 or auto",
            )
        )
    return out


def _gpu_and_image_rules(recipe: LLMRecipe) -> list[tuple]:
    """FP8 and bfloat16 against the GPU's compute capability, the image against its tables, and
    the fp8 weights' KV cache."""
    out = []
    kv_cache = recipe.kv_cache
    sm = GPU_SM[recipe.gpu]
    if sm < 8.9 and "fp8" in (recipe.quantization, kv_cache.dtype):
        key = ("quantization",) if recipe.quantization == "fp8" else ("kv_cache", "dtype")
        out.append(
            (
                key,
                f"FP8 needs a GPU of compute capability 8.9 or newer; {recipe.gpu} is {sm}",
                "use quantization: int4_weight_only / int4_awq and kv_cache.dtype: int8 or auto, or an "
                "H100/H200/L40S/L4",
            )
        )
    if sm < 8.0 and recipe.dtype == "bfloat16":
        out.append(
            (
                ("dtype",),
                f"bfloat16 needs compute capability 8.0 or newer; {recipe.gpu} is {sm}",
                "use dtype: float16",
            )
        )
    if (problem := image_problem(recipe.image)) is not None:
        out.append(
            (("image", "ships" if "image.ships" in problem[0] else "trtllm_version"), *problem)
        )
    if recipe.quantization == "fp8" and kv_cache.dtype == "int8":
        out.append(
            (
                ("kv_cache", "dtype"),
                "int8 KV cache with fp8 weights is not a TensorRT-LLM combination",
                "use kv_cache.dtype: fp8 or auto",
            )
        )
    return out


def quantization_rules(recipe: LLMRecipe) -> list[tuple]:
    """The quantization's route and GPU architecture (quant.FORMATS, from upstream's support matrices)."""
    out = []
    q = recipe.quantization
    if recipe.runtime == "pytorch" and q not in LLMAPI_FORMATS and q != "int4_weight_only":
        out.append(
            (
                ("quantization",),
                f"{q} ({FORMATS[q].what}) exists only on the TensorRT engine route; the "
                "PyTorch/LLM-API runtime has no such format",
                f"use runtime: engine, or one of {', '.join(LLMAPI_FORMATS)}",
            )
        )
    elif (problem := arch_problem(q, recipe.runtime, recipe.gpu, GPU_SM[recipe.gpu])) is not None:
        out.append((("quantization",), *problem))
    return out


def _lora_problems(r: LLMRecipe, bc: dict) -> list[str]:
    """A recipe with LoRA adapters needs an engine built with the LoRA plugin, for the modules it asks for."""
    if r.lora is None:
        return []
    if not (bc.get("plugin_config") or {}).get("lora_plugin"):
        return [
            "recipe lora needs an engine built with the LoRA plugin; this one was built without "
            "(build_config.plugin_config.lora_plugin unset): build it with trtllm-build --lora_plugin, as "
            "tritonbuild does"
        ]
    lc = bc.get("lora_config") or {}
    out = []
    if (
        r.lora.target_modules
        and lc.get("lora_target_modules") is not None
        and set(r.lora.target_modules) - set(lc["lora_target_modules"])
    ):
        out.append(
            f"recipe lora.target_modules {r.lora.target_modules}, the engine's LoRA plugin has "
            f"{lc['lora_target_modules']}"
        )
    if (
        r.lora.max_lora_rank
        and lc.get("max_lora_rank") is not None
        and r.lora.max_lora_rank > lc["max_lora_rank"]
    ):
        out.append(
            f"recipe lora.max_lora_rank {r.lora.max_lora_rank} > the engine's {lc['max_lora_rank']}"
        )
    return out


def engine_problems(
    r: LLMRecipe, engine: dict, rank_files: list[str], prequant: dict | None = None
) -> list[str]:
    """engine config.json (as TensorRT-LLM writes it) vs the recipe (and the checkpoint's own
    quantization)."""
    bc = engine.get("build_config") or {}
    pc = engine.get("pretrained_config") or {}
    return [
        *_limit_problems(r, bc),
        *_mapping_problems(r, pc, rank_files),
        *_paged_problems(r, bc),
        *_lora_problems(r, bc),
        *speculative_problems(r, bc),
        *_kv_block_problems(r, bc),
        *_format_problems(r, engine, pc, prequant),
    ]


def _limit_problems(r: LLMRecipe, bc: dict) -> list[str]:
    """build_config's limits vs the recipe's, as trtllm-build records them (draft tokens
    included)."""
    out = []
    e = r.engine
    built = built_limits(r)
    for key in (
        "max_batch_size",
        "max_input_len",
        "max_seq_len",
        "max_num_tokens",
        "max_beam_width",
    ):
        got, want = bc.get(key), built.get(key, getattr(e, key))
        if got is not None and int(got) != want:
            out.append(
                f"engine build_config.{key} = {got}, recipe engine.{key} = {getattr(e, key)}"
                + (f" (which trtllm-build records as {want})" if want != getattr(e, key) else "")
            )
    return out


def _mapping_problems(r: LLMRecipe, pc: dict, rank_files: list[str]) -> list[str]:
    """The engine's tensor/pipeline parallel mapping vs the recipe, its rank files and the GPUs."""
    out = []
    e, s = r.engine, r.serving
    mapping = pc.get("mapping") or {}
    tp, pp = int(mapping.get("tp_size", 1)), int(mapping.get("pp_size", 1))
    world = int(mapping.get("world_size", tp * pp))
    if (tp, pp) != (e.tp_size, e.pp_size):
        out.append(
            f"engine mapping tp_size={tp} pp_size={pp}, recipe engine.tp_size={e.tp_size} "
            f"pp_size={e.pp_size}"
        )
    if len(rank_files) != world:
        out.append(
            f"engine world_size {world} needs rank0..rank{world - 1}.engine, found {sorted(rank_files)}"
        )
    if len(s.gpu_device_ids) % world:
        out.append(
            f"serving.gpu_device_ids {s.gpu_device_ids} is not a multiple of the engine's world size {world}"
        )
    return out


def _paged_problems(r: LLMRecipe, bc: dict) -> list[str]:
    """What KV block reuse, chunked context and inflight batching need of the engine's paged KV
    cache and context FMHA."""
    out = []
    kv, s = r.kv_cache, r.serving
    plugin = bc.get("plugin_config") or {}
    paged_fmha = bool(plugin.get("use_paged_context_fmha", False))
    if kv.enable_block_reuse and not paged_fmha:
        out.append(
            "recipe kv_cache.enable_block_reuse needs use_paged_context_fmha, which the engine was built "
            "without (build_config.plugin_config.use_paged_context_fmha = false)"
        )
    if s.enable_chunked_context and not paged_fmha:
        out.append(
            "recipe serving.enable_chunked_context needs use_paged_context_fmha, which the engine lacks"
        )
    kv_type = str(bc.get("kv_cache_type", "PAGED")).upper()
    if kv_type != "PAGED" and s.batching_strategy != "V1":
        out.append(
            f"engine kv_cache_type {kv_type} cannot serve {s.batching_strategy} (needs PAGED)"
        )
    return out


def _kv_block_problems(r: LLMRecipe, bc: dict) -> list[str]:
    """The KV cache's block size and token cap vs the engine."""
    out = []
    e, kv = r.engine, r.kv_cache
    plugin = bc.get("plugin_config") or {}
    tpb = plugin.get("tokens_per_block")
    if tpb is not None and int(tpb) != kv.tokens_per_block:
        out.append(
            f"engine tokens_per_block {tpb}, recipe kv_cache.tokens_per_block {kv.tokens_per_block}"
        )
    if kv.max_tokens is not None and kv.max_tokens < int(bc.get("max_seq_len", e.max_seq_len)):
        out.append(
            f"recipe kv_cache.max_tokens {kv.max_tokens} < engine max_seq_len {bc.get('max_seq_len')}"
        )
    return out


def _format_problems(r: LLMRecipe, engine: dict, pc: dict, prequant: dict | None) -> list[str]:
    """The engine's logits dtype, quantization algorithm and TensorRT-LLM version vs the recipe and
    the serving image."""
    out = []
    e = r.engine
    logits = pc.get("logits_dtype", "float32")
    if logits != e.logits_dtype:
        out.append(
            f"engine pretrained_config.logits_dtype {logits}, recipe engine.logits_dtype {e.logits_dtype}"
        )
    algo = (pc.get("quantization") or {}).get("quant_algo")
    if algo not in (expected := engine_algos(r.quantization, prequant)):
        out.append(
            f"engine quantization {algo!r}, recipe quantization {r.quantization} "
            f"(expects {sorted(x for x in expected if x)})"
        )
    version = engine.get("version")
    if version is None or _major_minor(version) != _major_minor(r.image.trtllm_version):
        out.append(
            f"engine built by TensorRT-LLM {version}, the serving image has {r.image.trtllm_version} "
            f"({r.image.triton_image}): engines load only in the version that built them"
        )
    return out


def config_problems(configs: dict[str, object], names) -> list[str]:
    """Generated (or hand-edited) configs of one group vs each other: decoupled mode, batch sizes."""
    out = []
    llm, bls = configs.get(names.tensorrt_llm), configs.get(names.bls)
    if (
        llm is not None
        and bls is not None
        and llm.model_transaction_policy.decoupled != bls.model_transaction_policy.decoupled
    ):
        out.append(
            f"{names.tensorrt_llm} decoupled={llm.model_transaction_policy.decoupled} but {names.bls} "
            f"decoupled={bls.model_transaction_policy.decoupled}: streaming must be set on both"
        )
    ens = configs.get(names.ensemble)
    if ens is not None:
        for step in ens.ensemble_scheduling.step:
            other = configs.get(step.model_name)
            if (
                other is not None
                and other.max_batch_size
                and ens.max_batch_size > other.max_batch_size
            ):
                out.append(
                    f"ensemble max_batch_size {ens.max_batch_size} > {step.model_name}'s "
                    f"{other.max_batch_size}"
                )
    return out


def check_engine_dir(engine_dir: Path, recipe: LLMRecipe, prequant: dict | None = None) -> dict:
    """config.json present and parseable; rank*.engine count = tp × pp; cross-checks against the
    recipe."""
    cfg = engine_dir / "config.json"
    if not cfg.is_file():
        raise BuildError(
            f"{engine_dir} has no config.json: not a TensorRT-LLM engine directory",
            hint="point --engine at the directory trtllm-build (or LLM.save) wrote",
        )
    engine = json.loads(cfg.read_text())
    ranks = sorted(p.name for p in engine_dir.glob("rank*.engine"))
    problems = engine_problems(recipe, engine, ranks, prequant)
    if problems:
        raise BuildError(
            "the engine does not match the recipe:\n  " + "\n  ".join(problems),
            hint="rebuild the engine from this recipe, or change the recipe to the engine's values",
        )
    return engine
