"""What `serving.determinism: invariant` takes: one table, setting x invariance -> refuse | force safe |
allow (measured), each row with the upstream fact behind it; checks.py applies it at plan.

A row is "allow (measured)" only where a GPU record shows it invariant (docs/runs/
2026-12-04-llm-determinism-h200.json: vLLM 0.22.0 on an H200, tensor parallel 1, attention left to
vLLM, CUDA graphs on, kv_cache_dtype auto, no LoRA, no speculative decoding, fp16 and the project's
INT4 W4A16 checkpoint). A refusal is a recipe error at its key (exit 3): the message says the
setting and the row's reason, the hint the row's fix. A forced-safe value is written into model.json
(`forced`). vLLM facts are cited from the 0.22.0 release (the wheel; its tests/ and docs/ from the
sdist of the same commit), Inductor's from torch 2.11.0 (the wheel vLLM 0.22's serving image runs),
recorded in tests/contracts/facts/vllm_invariance.json, which a contract test keeps equal to
`Row.cites`. The docs page (reference/vllm-invariance.md) is generated from
`ROWS` by ci/docs_reference.py."""

from __future__ import annotations

from dataclasses import dataclass

RECORD = "docs/runs/2026-12-04-llm-determinism-h200.json"
# benchmarks/vllm/inductor_bits.py on an H100: Llama's residual add + RMSNorm compiled as vLLM compiles
# a single size (max-autotune, coordinate-descent tuning) in 3 fresh processes: 3 different outputs
INDUCTOR_RECORD = "docs/runs/2026-12-06-inductor-bits-h100.json"
# two fresh compiles of the invariant 8B models on one H100, and Inductor's deterministic mode refusing
# vLLM's timing of combo kernels (benchmarks/vllm/compile_record.py)
COMPILE_RECORD = "docs/runs/2026-12-07-compile-reproducibility-h100.json"
# what model.json's compilation_config.inductor_compile_config gets for an invariant recipe (row
# combo_kernels): given, either key stops vLLM turning both on (vllm 0.22.0 config/compilation.py:957-967)
INDUCTOR_FORCED = {"combo_kernels": False, "benchmark_combo_kernel": False}
# and Inductor's deterministic mode (row inductor_deterministic): one launch configuration per generated
# reduction, chosen without timing it; model.json's options reach Inductor as the compile's config
# patches (vllm 0.22.0 compilation/compiler_interface.py:316, :641)
INDUCTOR_DETERMINISTIC = {"deterministic": True}
# two more fresh compiles on one H100, combo kernels off: fp16's log-probs still differed
# (benchmarks/vllm/fresh_compile_record.py)
FRESH_RECORD = "docs/runs/2026-12-07-fresh-compile-lm-head-h100.json"
PLUGIN = "builder/backends/vllm/invariant/plugin.py"
KERNEL = "builder/backends/vllm/invariant/w4a16.py"  # the W4A16 kernel the plugin serves
# the plugin's kernel: TritonbuildInvariantW4A16Kernel.get_min_capability() (PLUGIN, read by a test)
PLUGIN_MIN_SM = 8.0
MEASURED_SM = 9.0  # the record's H200 (H100: the same SM 9.0)
# attention backends whose supports_batch_invariance() is True in vLLM 0.22.0 (the others' is False)
VLLM_INVARIANT_ATTENTION = (
    "FLASH_ATTN",
    "TRITON_ATTN",
    "FLEX_ATTENTION",
    "TRITON_MLA",
    "FLASH_ATTN_MLA",
)
MEASURED_ATTENTION = ("FLASH_ATTN",)  # what vLLM picks on SM 8.0-9.x left unset (cuda.py:140-147)


@dataclass(frozen=True)
class Row:
    id: str
    setting: str  # the recipe key(s)
    when: str
    verdict: str  # refuse | refuse (not measured) | force safe | allow (measured)
    why: str
    fix: str
    # "vllm 0.22.0 PATH:LINES" (wheel), "vllm 0.22.0 sdist PATH:LINES", "torch 2.11.0 PATH:LINES", ours
    cites: tuple[str, ...]


W, S, T = "vllm 0.22.0 ", "vllm 0.22.0 sdist ", "torch 2.11.0 "
# Inductor as vLLM 0.22's image runs it (torch 2.11.0): deterministic mode's definition, the generated
# kernel's meta carrying it, the runtime filter that keeps one reduction configuration under it, the
# candidate configurations a reduction gets, and the timing that keeps the fastest of several
_DETERMINISTIC_CITES = (
    W + "vllm/compilation/compiler_interface.py:316",
    W + "vllm/compilation/compiler_interface.py:641",
    T + "torch/_inductor/config.py:852-854",
    T + "torch/_inductor/codegen/triton.py:5298",
    T + "torch/_inductor/runtime/triton_heuristics.py:3370-3376",
    T + "torch/_inductor/runtime/triton_heuristics.py:3226-3252",
    T + "torch/_inductor/runtime/triton_heuristics.py:1173-1178",
    FRESH_RECORD,
)
# refused only because no GPU record measured it: serving.allow_unmeasured lets plan take it, to make
# that record (verify under load says whether it holds)
UNMEASURED = "refuse (not measured)"
_DEFAULT = "or set serving.determinism: default"
ROWS = (
    Row(
        "linear_backend",
        "engine_args.extra.linear_backend, engine_args.extra.kernel_config.linear_backend",
        "anything but auto",
        "refuse",
        "vLLM then keeps only that backend's kernels in choose_mp_linear_kernel (the invariant W4A16 "
        "kernel is in none): the W4A16 layers run on a batch-variant kernel (Machete on SM 9.0, measured "
        "variant)",
        f"remove linear_backend (auto), {_DEFAULT}",
        (
            W + "vllm/model_executor/kernels/linear/__init__.py:641-650",
            W + "vllm/config/kernel.py:192",
            RECORD,
        ),
    ),
    Row(
        "attention_refused",
        "engine_args.extra.attention_backend, engine_args.extra.attention_config.backend",
        "a backend whose supports_batch_invariance() is False (FLASHINFER, FLASHMLA, "
        "CUTLASS_MLA, TORCH_SDPA, ...)",
        "refuse",
        "its supports_batch_invariance() is False, so vLLM's batch-invariant mode refuses it: the engine "
        "does not start ('batch invariance not "
        f"supported'); it accepts only {', '.join(VLLM_INVARIANT_ATTENTION)}",
        f"remove the attention backend (vLLM picks FLASH_ATTN), or set FLASH_ATTN, {_DEFAULT}",
        (
            W + "vllm/v1/attention/backend.py:239-241",
            W + "vllm/v1/attention/backend.py:320-321",
            W + "vllm/platforms/cuda.py:303-316",
            W + "vllm/v1/attention/backends/flash_attn.py:108-110",
            W + "vllm/v1/attention/backends/triton_attn.py:304-306",
            W + "vllm/v1/attention/backends/flex_attention.py:107-109",
            W + "vllm/v1/attention/backends/mla/triton_mla.py:64-66",
            W + "vllm/v1/attention/backends/mla/flashattn_mla.py:59-61",
            S + "tests/v1/determinism/utils.py:26-35",
        ),
    ),
    Row(
        "attention_unmeasured",
        "engine_args.extra.attention_backend, engine_args.extra.attention_config.backend",
        "TRITON_ATTN, FLEX_ATTENTION, TRITON_MLA, FLASH_ATTN_MLA",
        UNMEASURED,
        "vLLM accepts it in batch-invariant mode, but no GPU record measured it",
        f"remove the attention backend (vLLM picks FLASH_ATTN), or set FLASH_ATTN, {_DEFAULT}",
        (W + "vllm/v1/attention/backends/triton_attn.py:304-306", RECORD),
    ),
    Row(
        "attention_measured",
        "engine_args.extra.attention_backend",
        "unset or FLASH_ATTN",
        "allow (measured)",
        "what vLLM picks first on SM 8.0-9.x; the record ran it",
        "",
        (W + "vllm/platforms/cuda.py:140-147", RECORD),
    ),
    Row(
        "gpu_below_sm80",
        "gpu",
        "compute capability below 8.0 (T4)",
        "refuse",
        "the invariant W4A16 kernel needs compute capability 8.0 (its get_min_capability), so vLLM "
        "skips it and Marlin (7.5) runs; FLASH_ATTN needs 8.0 too, and vLLM's own batch-invariance "
        "tests skip below 8.0",
        f"target an H100 or H200 (gpu), {_DEFAULT}",
        (
            PLUGIN + ":57-58",
            W + "vllm/model_executor/kernels/linear/__init__.py:659-667",
            W + "vllm/model_executor/kernels/linear/mixed_precision/marlin.py:32-33",
            W + "vllm/v1/attention/backends/flash_attn.py:202-203",
            S + "tests/v1/determinism/utils.py:16-21",
        ),
    ),
    Row(
        "gpu_sm8x_eager",
        "gpu, engine_args.enforce_eager",
        "compute capability 8.x (A100, A10G, L4, L40S), enforce_eager unset",
        "force safe",
        "below compute capability 9.0 vLLM's batch-invariant mode does not support CUDA graphs (its own "
        "tests run it eager there; its docs name 9.0+): model.json gets enforce_eager: true. Not "
        "measured on such a GPU by tritonbuild",
        "",
        (
            S + "tests/v1/determinism/utils.py:16-21",
            S + "docs/features/batch_invariance.md:19-24",
            W + "vllm/model_executor/layers/batch_invariant.py:915-921",
        ),
    ),
    Row(
        "gpu_sm8x_graphs",
        "engine_args.enforce_eager",
        "false on compute capability 8.x",
        "refuse",
        "CUDA graphs on below compute capability 9.0: vLLM's batch-invariant mode does not support "
        "them there (its own tests run eager)",
        f"remove engine_args.enforce_eager (it is then written true), {_DEFAULT}",
        (S + "tests/v1/determinism/utils.py:16-21",),
    ),
    Row(
        "gpu_sm90",
        "gpu",
        "H100, H200 (compute capability 9.0)",
        "allow (measured)",
        "the record's GPU, CUDA graphs on",
        "",
        (RECORD,),
    ),
    Row(
        "gpu_unmeasured",
        "gpu",
        "compute capability above 9.0 (B200)",
        UNMEASURED,
        "vLLM's batch-invariant mode takes another path there (cuBLAS without split-K, FlashInfer "
        "first among attention backends) and no GPU record measured it",
        f"target an H100 or H200 (gpu), {_DEFAULT}",
        (
            W + "vllm/model_executor/layers/batch_invariant.py:922-927",
            W + "vllm/platforms/cuda.py:132-139",
        ),
    ),
    Row(
        "lora",
        "lora",
        "any adapter",
        "refuse",
        "vLLM's LoRA shrink kernel picks its block_k by the step's token count (256 below 128 "
        "tokens, else 32) even in batch-invariant mode: an adapter's answer depends on the batch",
        f"remove lora, {_DEFAULT}",
        (W + "vllm/lora/ops/triton_ops/utils.py:218-226",),
    ),
    Row(
        "parallel",
        "engine_args.tensor_parallel_size, engine_args.pipeline_parallel_size",
        "above 1",
        UNMEASURED,
        "not measured: batch-invariant mode changes the all-reduce (custom all-reduce off, NCCL pinned "
        "to one channel and tree), which no GPU record ran",
        f"use tensor_parallel_size and pipeline_parallel_size 1 (a GPU that holds the model), {_DEFAULT}",
        (
            W + "vllm/config/parallel.py:928-930",
            W + "vllm/model_executor/layers/batch_invariant.py:961-979",
            RECORD,
        ),
    ),
    Row(
        "speculative",
        "speculative",
        "any method",
        UNMEASURED,
        "not measured: drafts are verified by vLLM's rejection sampler, which batch-invariant mode "
        "does not touch (nothing under vllm/v1/spec_decode or vllm/v1/sample reads "
        "VLLM_BATCH_INVARIANT), and no GPU record ran speculative decoding",
        f"remove speculative, {_DEFAULT}",
        (W + "vllm/v1/sample/rejection_sampler.py:392-400", RECORD),
    ),
    Row(
        "kv_cache_dtype",
        "engine_args.extra.kv_cache_dtype",
        "anything but auto",
        UNMEASURED,
        "not measured: a quantized KV cache (fp8*, *_per_token_head, nvfp4) stores keys and values "
        "with scales (the per-token-head ones computed at runtime); the record ran auto",
        f"remove kv_cache_dtype (auto), {_DEFAULT}",
        (W + "vllm/config/cache.py:18-34", W + "vllm/utils/torch_utils.py:76-81", RECORD),
    ),
    Row(
        "compile_sizes",
        "engine_args.extra.compilation_config.compile_sizes, "
        "engine_args.extra.compilation_config.inductor_compile_config",
        "compile_sizes given, or inductor_compile_config with max_autotune or "
        "coordinate_descent_tuning on",
        "refuse",
        "vLLM compiles each of compile_sizes as its own graph with Inductor's max-autotune and "
        "coordinate-descent tuning on (VLLM_ENABLE_INDUCTOR_MAX_AUTOTUNE and "
        "VLLM_ENABLE_INDUCTOR_COORDINATE_DESCENT_TUNING, 1 by default): Inductor times a kernel's "
        "candidate configs on the device and keeps the fastest, and they add a row in different "
        "orders. Compiled that way, Llama's residual add + RMSNorm gave three different outputs in "
        "three fresh processes on one H100 (with TORCHINDUCTOR_DETERMINISTIC=1 too); vLLM's default "
        "dynamic-size compile, which times nothing, gave one",
        "remove compile_sizes and the tuning options (vLLM then compiles one dynamic-size graph), "
        + _DEFAULT,
        (
            W + "vllm/compilation/compiler_interface.py:753-760",
            W + "vllm/envs.py:1834-1841",
            W + "vllm/config/compilation.py:558-570",
            INDUCTOR_RECORD,
        ),
    ),
    Row(
        "combo_kernels",
        "engine_args.extra.compilation_config.inductor_compile_config",
        "combo_kernels and benchmark_combo_kernel both unset",
        "force safe",
        "with torch 2.9 or later on a GPU, vLLM turns on Inductor's combo kernels and their benchmarking "
        "unless either key is given: the compile keeps a horizontal fusion only if it timed faster on the "
        "device, so a fresh compile may pick other kernels, and other bits. Inductor's deterministic mode "
        "refuses exactly that timing in vLLM's compile of Llama-3-8B; two fresh compiles of the invariant "
        "fp16 model on one H100 gave different answers. model.json gets both false",
        "",
        (W + "vllm/config/compilation.py:957-967", COMPILE_RECORD),
    ),
    Row(
        "combo_kernels_on",
        "engine_args.extra.compilation_config.inductor_compile_config.combo_kernels, "
        "engine_args.extra.compilation_config.inductor_compile_config.benchmark_combo_kernel, "
        "engine_args.extra.compilation_config",
        "combo_kernels or benchmark_combo_kernel true, or compilation_config not a mapping",
        "refuse",
        "a horizontal fusion kept if it timed faster (benchmark_combo_kernel), or combined kernels whose "
        "launch configs Inductor tunes by timing: a fresh compile may choose otherwise, and the bits "
        "with it; a compilation_config that is not a mapping cannot carry both keys false",
        "remove them (model.json then gets both false); give compilation_config as a mapping; "
        + _DEFAULT,
        (W + "vllm/config/compilation.py:957-967", COMPILE_RECORD),
    ),
    Row(
        "inductor_deterministic",
        "engine_args.extra.compilation_config.inductor_compile_config",
        "deterministic unset",
        "force safe",
        "Inductor may give a reduction kernel it generates several launch configurations (block sizes, "
        "warps: each its own order of additions) and at the first run keeps the one that timed fastest "
        "on the device, so a fresh compile may choose another and answer in other bits: two fresh "
        "compiles of the invariant fp16 8B model on one H100, combo kernels off, gave the same tokens "
        "and different log-probs. Its deterministic mode keeps one configuration chosen without "
        "timing; model.json gets deterministic true",
        "",
        _DETERMINISTIC_CITES,
    ),
    Row(
        "inductor_deterministic_off",
        "engine_args.extra.compilation_config.inductor_compile_config.deterministic",
        "deterministic false",
        "refuse",
        "Inductor would choose its reductions' launch configurations by timing them on the device: "
        "another compile may answer in other bits",
        "remove it (model.json then gets deterministic true); " + _DEFAULT,
        _DETERMINISTIC_CITES,
    ),
    Row(
        "checkpoint_quantized",
        "checkpoint.path",
        "config.json's quantization_config: zero points "
        "(asymmetric, AWQ), activation order (g_idx, GPTQ desc_act), 8-bit, or another method than "
        "compressed-tensors W4A16",
        "refuse",
        "the invariant W4A16 kernel's can_implement refuses it (symmetric uint4b8, no zero points, no "
        "g_idx, fp16/bf16 activations only) and vLLM takes its next, batch-variant kernel; other "
        "methods never reach it",
        "use an fp16/bf16 checkpoint with quantize: {scheme: w4a16} (tritonbuild's INT4), "
        f"{_DEFAULT}",
        (
            PLUGIN + ":61-73",
            W + "vllm/model_executor/layers/quantization/compressed_tensors/schemes/"
            "compressed_tensors_wNa16.py:35-36",
            W + "vllm/model_executor/layers/quantization/compressed_tensors/schemes/"
            "compressed_tensors_wNa16.py:103-106",
            W + "vllm/model_executor/layers/quantization/awq_marlin.py:429-430",
            W + "vllm/model_executor/layers/quantization/auto_gptq.py:346-347",
        ),
    ),
    Row(
        "int4_layer_shape",
        "quantize.group_size, checkpoint.path",
        "an INT4 model with a decoder linear whose inputs per rank are not a multiple of 128, or a group "
        "size that is not a multiple of 32 dividing them (tiny models: hidden 64)",
        "refuse",
        "the invariant W4A16 kernel reads K in 128-input layout blocks; vLLM gives a layer it cannot "
        "take to its next W4A16 kernel (the first whose can_implement accepts), which is batch-variant",
        f"serve the model unquantized (no quantize: vLLM's batch-invariant linears), {_DEFAULT}",
        (KERNEL + ":33-37", W + "vllm/model_executor/kernels/linear/__init__.py:653-674"),
    ),
    Row(
        "checkpoint_int4",
        "checkpoint.path, quantize",
        "quantize: {scheme: w4a16}, or a compressed-"
        "tensors symmetric 4-bit checkpoint without activation order, every linear's shape taken",
        "allow (measured)",
        "the record's INT4 checkpoint (made by quantize) ran the invariant kernel",
        "",
        (RECORD,),
    ),
    Row(
        "checkpoint_fp16",
        "checkpoint.path",
        "no quantization_config",
        "allow (measured)",
        "vLLM's batch-invariant linears; the record's fp16 configuration",
        "",
        (RECORD,),
    ),
)
BY_ID = {row.id: row for row in ROWS}
