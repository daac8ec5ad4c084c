"""Speculative decoding. LLM-API route (runtime: pytorch): the LLM API's speculative_config (a draft
model, DraftTarget, or an EAGLE head, Eagle; max_draft_len) in model.yaml, the draft checkpoint
packaged beside the model, and what the draft adds to the GPU memory plan. Engine route: lookahead
decoding, built into the engine (trtllm-build --speculative_decoding_mode lookahead_decoding
--max_draft_len from W, N, G) and switched on in the tensorrtllm C++ backend (decoding_mode
lookahead, lookahead_window_size/ngram_size/verification_set_size). Medusa:
examples/medusa/convert_checkpoint.py folds the heads into the checkpoint, the engine is built with
--speculative_decoding_mode medusa, the backend gets decoding_mode medusa and medusa_choices. EAGLE
and draft-target engines are not generated; the recipe says so (route_problem in
recipe/speculative.py)."""

from __future__ import annotations

import json

from tritonbuild.backends.common import draft_checkpoint_dir, split_tree, tree_inputs
from tritonbuild.backends.tensorrtllm import medusa_heads
from tritonbuild.backends.tensorrtllm.recipe.model import LLMRecipe

# recipe mode → model.yaml's speculative_config.decoding_type (tests/contracts/facts/llm_args.json
# speculative_config). TensorRT-LLM 1.x (every image of the table): DecodingBaseConfig.from_dict's
# keys, which the generated model applies through update_llm_args_with_extra_dict as upstream's
# LLM-API model does (a raw dict is refused there: the classes declare decoding_type as a ClassVar
# and forbid extra fields); newer (main): the tags of the union discriminated on decoding_type,
# draft-target's being Draft_Target. Per release: llm_args.json `releases` (read at the tag; a test
# holds these tags to each) or `releases_unread` (1.0.0-1.2.1 so far: recorded with their pinned
# commits, not read).
DECODING_TYPES = {"draft_target": "DraftTarget", "eagle": "Eagle"}
DISCRIMINATED_TYPES = {"draft_target": "Draft_Target", "eagle": "Eagle"}
DRAFT_DIR = "draft"  # where the draft checkpoint lives in the LLM-API model's version directory


def speculative_config(r: LLMRecipe) -> dict | None:
    """model.yaml's speculative_config; speculative_model_dir relative to the version directory."""
    s = r.speculative
    if s is None:
        return None
    tags = DECODING_TYPES if from_dict_release(r) else DISCRIMINATED_TYPES
    return {
        "decoding_type": tags[s.mode],
        "max_draft_len": s.max_draft_len,
        "speculative_model_dir": DRAFT_DIR,
    }


def from_dict_release(r: LLMRecipe) -> bool:
    """Whether the image's TensorRT-LLM is a release of the image table (1.x,
    DecodingBaseConfig.from_dict), not newer (an image declared with image.ships beyond the
    table)."""
    from tritonbuild.backends.llm.images import TRTLLM_IMAGES, image_versions

    def key(version: str) -> tuple[int, ...]:
        return tuple(int(p) for p in version.split(".")[:3] if p.isdigit())

    newest = max(key(v[0]) for v in TRTLLM_IMAGES.values())
    return key(image_versions(r.image).get("tensorrt_llm", "0")) <= newest


# recipe mode → trtllm-build's --speculative_decoding_mode choice and the C++ backend's
# decoding_mode value
ENGINE_MODES = {"lookahead": ("lookahead_decoding", "lookahead"), "medusa": ("medusa", "medusa")}
# what examples/medusa/convert_checkpoint.py converts (Llama/Mixtral classes) and quantizes
# (weight-only only)
MEDUSA_MODEL_TYPES = ("llama", "mixtral")
MEDUSA_QUANTIZATIONS = ("none", "int8_weight_only", "int4_weight_only")
# build_config.speculative_decoding_mode in an engine's config.json: SpeculativeDecodingMode, an
# IntFlag of auto() members in this order, written as its int (facts/trtllm_speculative.json
# engine_config)
SPECULATIVE_DECODING_MODES = {
    1: "none",
    2: "draft_tokens_external",
    4: "medusa",
    8: "lookahead_decoding",
    16: "explicit_draft_tokens",
    32: "eagle",
}


def engine_params_of(r: LLMRecipe) -> dict | None:
    """What the engine is built with (keys the trtllm.engine step), or None without speculative
    decoding."""
    s = r.speculative
    if s is None or s.mode not in ENGINE_MODES:
        return None
    out = {"mode": ENGINE_MODES[s.mode][0], "max_draft_len": s.draft_len}
    if s.mode == "medusa":
        out.update(num_medusa_heads=s.num_medusa_heads, num_medusa_layers=s.num_medusa_layers)
    return out


def built_limits(r: LLMRecipe) -> dict[str, int]:
    """max_seq_len and max_num_tokens as trtllm-build records them in the engine's build_config for
    the recipe's limits (argv.build_argv removes padding and enables context FMHA):
    check_max_num_tokens keeps max_num_tokens within [tokens_per_block, max_seq_len ×
    max_batch_size]; then, with speculative decoding, build() adds max_draft_len to max_seq_len and
    raises max_num_tokens to max_batch_size × (max_draft_len + 1) (facts/trtllm_speculative.json
    draft_limits)."""
    e = r.engine
    tokens = max(
        min(e.max_num_tokens, e.max_seq_len * e.max_batch_size), r.kv_cache.tokens_per_block
    )
    spec = engine_params_of(r)
    if spec is None:
        return {"max_seq_len": e.max_seq_len, "max_num_tokens": tokens}
    step = e.max_batch_size * (spec["max_draft_len"] + 1)
    return {
        "max_seq_len": e.max_seq_len + spec["max_draft_len"],
        "max_num_tokens": max(tokens, step),
    }


def limit_rules(r: LLMRecipe) -> list[tuple]:
    """A max_num_tokens trtllm-build would change under speculative decoding (each sequence's
    generation step carries max_draft_len + 1 tokens): a recipe error before the build, not an
    engine that differs from it."""
    spec, e = engine_params_of(r), r.engine
    built = built_limits(r)["max_num_tokens"]
    if spec is None or built == e.max_num_tokens:
        return []
    d = spec["max_draft_len"]
    low, high = (
        max(e.max_batch_size * (d + 1), r.kv_cache.tokens_per_block),
        e.max_seq_len * e.max_batch_size,
    )
    why = (
        f"max_num_tokens {e.max_num_tokens} would be built as {built}: with speculative.mode "
        f"{r.speculative.mode} (max_draft_len {d}) trtllm-build raises it to max_batch_size × "
        f"(max_draft_len + 1) = {e.max_batch_size} × {d + 1} = {e.max_batch_size * (d + 1)} after "
        f"keeping it within [tokens_per_block {r.kv_cache.tokens_per_block}, max_seq_len × "
        f"max_batch_size = {high}] (tensorrt_llm/builder.py build)"
    )
    if low > high:
        return [
            (
                ("engine", "max_seq_len"),
                why,
                f"raise engine.max_seq_len to at least {-(-low // e.max_batch_size)}"
                f" so that max_seq_len × max_batch_size reaches {low}, or lower the draft length",
            )
        ]
    return [
        (
            ("engine", "max_num_tokens"),
            why,
            f"set engine.max_num_tokens between {low} and {high}, or lower "
            "engine.max_batch_size or the draft length",
        )
    ]


def recipe_rules(r: LLMRecipe) -> list[tuple]:
    """(key path, message, hint): the limits trtllm-build would change (limit_rules), Medusa's
    converter rules, and what lookahead's support matrix (examples/lookahead/README.md) excludes: it
    runs with a paged KV cache under in-flight fused batching (facts/trtllm_speculative.json)."""
    if r.speculative is not None and r.speculative.mode == "medusa":
        return limit_rules(r) + _medusa_rules(r)
    if r.speculative is None or r.speculative.mode != "lookahead":
        return []
    out = limit_rules(r)  # the paged KV cache it needs is the only kind the recipe takes
    if r.serving.batching_strategy != "inflight_fused_batching":
        out.append(
            (
                ("serving", "batching_strategy"),
                "lookahead decoding runs under in-flight fused batching; "
                f"serving.batching_strategy is {r.serving.batching_strategy}",
                "set serving.batching_strategy: inflight_fused_batching",
            )
        )
    return out


def _medusa_rules(r: LLMRecipe) -> list[tuple]:
    """examples/medusa/convert_checkpoint.py quantizes weight-only and has no --dtype auto
    (facts/trtllm_scripts.json medusa)."""
    out = []
    if r.quantization not in MEDUSA_QUANTIZATIONS:
        out.append(
            (
                ("quantization",),
                f"examples/medusa/convert_checkpoint.py cannot make {r.quantization}",
                f"use one of {', '.join(MEDUSA_QUANTIZATIONS)} with speculative.mode medusa",
            )
        )
    if r.dtype == "auto":
        out.append(
            (
                ("dtype",),
                "examples/medusa/convert_checkpoint.py's --dtype has no auto",
                "set dtype: float16 or bfloat16 (the checkpoint's torch_dtype)",
            )
        )
    return out


def medusa_family_problem(r: LLMRecipe, model_type: str) -> tuple | None:
    """(key path, message, hint) when the Medusa converter cannot convert this family."""
    if r.speculative is None or r.speculative.mode != "medusa" or model_type in MEDUSA_MODEL_TYPES:
        return None
    return (
        ("speculative", "mode"),
        f"examples/medusa/convert_checkpoint.py converts {', '.join(MEDUSA_MODEL_TYPES)}"
        f", not {model_type}",
        "use speculative.mode lookahead, or runtime: pytorch with mode eagle",
    )


def medusa_convert_flags(spec: dict | None, heads_dir: str | None) -> list[str]:
    """The Medusa converter's own arguments for a trtllm.engine step's speculative params ([] for
    other modes)."""
    if not spec or spec["mode"] != "medusa":
        return []
    return [
        "--medusa_model_dir",
        str(heads_dir),
        "--num_medusa_heads",
        str(spec["num_medusa_heads"]),
        "--num_medusa_layers",
        str(spec["num_medusa_layers"]),
        "--max_medusa_token_len",
        str(spec["max_draft_len"]),
    ]


def heads_inputs(ctx, heads_dir) -> tuple[dict[str, str], dict[str, str]]:
    """(relative file → digest, step inputs) of the Medusa heads directory; ({}, {}) without one."""
    if heads_dir is None:
        return {}, {}
    return tree_inputs(heads_dir, ctx)


def heads_bytes(heads_dir) -> int:
    """The Medusa heads' weights: the size of the file the converter reads (0 without heads)."""
    return 0 if heads_dir is None else medusa_heads.weights_file(heads_dir).stat().st_size


def heads_dir(loaded, recipe_dir):
    """The recipe's Medusa heads directory, checked as the converter reads it (medusa_heads.check,
    once per plan: heads_bytes and heads_inputs take what it returns); None without Medusa."""
    s = loaded.recipe.speculative
    if s is None or s.mode != "medusa":
        return None
    d = recipe_dir(loaded, s.heads_checkpoint, ("speculative", "heads_checkpoint"))
    medusa_heads.check(loaded, d)
    return d


def split_heads(params: dict, inputs: dict[str, str]) -> tuple[dict[str, str], str | None]:
    """(the other inputs, the heads' directory) of a trtllm.engine step."""
    return split_tree((params.get("speculative") or {}).get("heads") or {}, inputs)


def build_argv(spec: dict | None) -> list[str]:
    """trtllm-build's speculative-decoding arguments for a trtllm.engine step's speculative
    params."""
    if not spec:
        return []
    return [
        "--speculative_decoding_mode",
        spec["mode"],
        "--max_draft_len",
        str(spec["max_draft_len"]),
    ]


def backend_params(r: LLMRecipe) -> dict[str, object]:
    """The tensorrt_llm model's parameters: decoding_mode and lookahead's (W, N, G) or Medusa's
    token tree."""
    s = r.speculative
    if s is None or s.mode not in ENGINE_MODES:
        return {}
    # csvStrToVecVecInt (utils.cc): {a, b} groups, comma-separated, no outer braces
    if s.mode == "medusa":
        return {
            "decoding_mode": "medusa",
            "medusa_choices": ", ".join(
                "{" + ", ".join(map(str, p)) + "}" for p in s.medusa_choices
            ),
        }
    return {
        "decoding_mode": ENGINE_MODES[s.mode][1],
        "lookahead_window_size": s.window_size,
        "lookahead_ngram_size": s.ngram_size,
        "lookahead_verification_set_size": s.verification_set_size,
    }


def engine_problems(r: LLMRecipe, build_config: dict) -> list[str]:
    """What a built engine's config.json says against the recipe's speculative decoding (mode and
    draft length)."""
    want = engine_params_of(r) or {"mode": "none", "max_draft_len": 0}
    have = build_config.get("speculative_decoding_mode", 1)
    have = (
        SPECULATIVE_DECODING_MODES.get(have, f"{have} (unknown)")
        if isinstance(have, int)
        else str(have)
    )
    if have != want["mode"]:
        asked = (
            f" (speculative.mode {r.speculative.mode})"
            if want["mode"] != "none"
            else " (no speculative)"
        )
        return [
            f"the engine was built with speculative_decoding_mode {have}, the recipe asks for "
            f"{want['mode']}{asked}"
        ]
    if (
        want["mode"] != "none"
        and int(build_config.get("max_draft_len") or 0) != want["max_draft_len"]
    ):
        return [
            f"the engine's max_draft_len {build_config.get('max_draft_len')} differs from the "
            f"{want['max_draft_len']} the recipe's speculative.{r.speculative.mode} needs"
        ]
    return []


def _draft_dir(loaded, recipe_dir):
    what = "model" if loaded.recipe.speculative.mode == "draft_target" else "EAGLE head"
    return draft_checkpoint_dir(
        loaded,
        recipe_dir,
        ("speculative", "draft_checkpoint"),
        f"the LLM API loads the draft {what}",
    )


# EagleDecodingConfig.num_capture_layers without eagle3_layers_to_capture
EAGLE3_CAPTURED_LAYERS = 3


def eagle_head_bytes(loaded, recipe_dir) -> int | None:
    """An EAGLE head's weights as its safetensors hold them (it shares the target's embedding and,
    without its own, its lm_head), after checking it is the EAGLE-3 head the PyTorch backend runs:
    Eagle3DraftModel's fc takes the target's hidden states of 3 captured layers (fc.weight [hidden,
    3 × hidden_in], facts/llm_args.json speculative_config.eagle3_head). None for other modes."""
    from tritonbuild.backends.llm.safetensors import raw_header
    from tritonbuild.errors import PlanError

    if loaded.recipe.speculative is None or loaded.recipe.speculative.mode != "eagle":
        return None
    d = _draft_dir(loaded, recipe_dir)
    config = json.loads((d / "config.json").read_text())
    tensors = {}
    for f in sorted(d.glob("*.safetensors")):
        tensors.update((raw_header(f) or (0, {}))[1])
    hidden = config.get("hidden_size")
    want = [hidden, EAGLE3_CAPTURED_LAYERS * config.get("target_hidden_size", hidden or 0)]
    got = (tensors.get("fc.weight") or {}).get("shape")
    if got != want:
        what = "no fc.weight (not an EAGLE head)" if got is None else f"fc.weight {got}, not {want}"
        raise PlanError(
            f"speculative.draft_checkpoint {d}: {what}: the LLM API's PyTorch backend runs EAGLE-3 "
            "heads only (Eagle3DraftModel: fc over 3 captured layers; an EAGLE-1/2 head's fc "
            "takes 2 × hidden)",
            where=loaded.where(("speculative", "draft_checkpoint")),
            hint="use an EAGLE-3 head trained for this model, or speculative.mode draft_target "
            "with a smaller model of the same tokenizer",
        )
    return sum(t["data_offsets"][1] - t["data_offsets"][0] for t in tensors.values())


def draft_step(loaded, ctx, recipe_dir) -> list[tuple[str, dict, dict[str, str]]]:
    """The draft checkpoint keyed by content (its path out of the key), packaged as <v>/draft/; an
    EAGLE head is checked first (eagle_head_bytes)."""
    if loaded.recipe.speculative is None or loaded.recipe.speculative.draft_checkpoint is None:
        return []
    eagle_head_bytes(loaded, recipe_dir)
    d = _draft_dir(loaded, recipe_dir)
    files, inputs = tree_inputs(d, ctx)
    return [("trtllm.draft", {"files": sorted(files)}, inputs)]


def draft_config(loaded, recipe_dir) -> dict | None:
    """The draft checkpoint's config.json (for the memory plan), or None without speculative
    decoding."""
    if loaded.recipe.speculative is None or loaded.recipe.speculative.draft_checkpoint is None:
        return None
    return json.loads((_draft_dir(loaded, recipe_dir) / "config.json").read_text())
