"""The engine's config.json (as TensorRT-LLM writes it) against the recipe: limits, mapping, paged
KV cache, LoRA plugin, speculative mode, quantization and version. Each problem names both sides, so
the fix is obvious: rebuild the engine or change the recipe."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tritonbuild.backends.tensorrtllm.quant import engine_algos
from tritonbuild.backends.tensorrtllm.recipe.model import LLMRecipe
from tritonbuild.backends.tensorrtllm.speculative import built_limits
from tritonbuild.backends.tensorrtllm.speculative import engine_problems as speculative_problems
from tritonbuild.errors import BuildError


def _major_minor(v: str) -> tuple[str, ...]:
    return tuple(re.findall(r"\d+", str(v))[:3])


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
            f"engine world_size {world} needs rank0..rank{world - 1}.engine, found "
            f"{sorted(rank_files)}"
        )
    if len(s.gpu_device_ids) % world:
        out.append(
            f"serving.gpu_device_ids {s.gpu_device_ids} is not a multiple of the engine's world "
            f"size {world}"
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
            "recipe kv_cache.enable_block_reuse needs use_paged_context_fmha, which the engine "
            "was built without (build_config.plugin_config.use_paged_context_fmha = false)"
        )
    if s.enable_chunked_context and not paged_fmha:
        out.append(
            "recipe serving.enable_chunked_context needs use_paged_context_fmha, which the engine "
            "lacks"
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
            f"recipe kv_cache.max_tokens {kv.max_tokens} < engine max_seq_len "
            f"{bc.get('max_seq_len')}"
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
            f"engine pretrained_config.logits_dtype {logits}, recipe engine.logits_dtype "
            f"{e.logits_dtype}"
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
            f"engine built by TensorRT-LLM {version}, the serving image has "
            f"{r.image.trtllm_version} ({r.image.triton_image}): engines load only in the version "
            "that built them"
        )
    return out


def _lora_problems(r: LLMRecipe, bc: dict) -> list[str]:
    """A recipe with LoRA adapters needs an engine built with the LoRA plugin, for the modules it
    asks for."""
    if r.lora is None:
        return []
    if not (bc.get("plugin_config") or {}).get("lora_plugin"):
        return [
            "recipe lora needs an engine built with the LoRA plugin; this one was built without "
            "(build_config.plugin_config.lora_plugin unset): build it with trtllm-build "
            "--lora_plugin, as tritonbuild does"
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
