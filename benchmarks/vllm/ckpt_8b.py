"""Llama-3-8B-geometry checkpoints made on the GPU (h200_8b.sh ckpt-8b): seeded random fp16 weights (std 0.02)
as safetensors shards, and the INT4 W4A16 copy in compressed-tensors' pack-quantized layout, quantized and packed
with torch exactly as tiny_llama.py's quantize_int4 / pack_int4 do on the CPU (symmetric round to nearest, group
128, scale max|w| / 7.5, value + 8, eight per int32 low nibble first; lm_head kept fp16; same quantization_config).

    python benchmarks/vllm/ckpt_8b.py DIR     # DIR/llama-3-8b-fp16, DIR/llama-3-8b-int4 (needs torch + CUDA)

The tokenizer is recipes/examples/tiny-llama's (a few hundred tokens); config.json keeps vocab_size 128256 (vLLM
takes a tokenizer smaller than the model's vocabulary). lm_head rows past the tokenizer's last id are zero, so
their logit is exactly 0 while the largest of the real ones is positive (hundreds of random logits): greedy
decoding never emits an id the tokenizer cannot detokenize, and the GEMMs keep Llama-3-8B's shapes.
Prints one JSON line: seconds to make + write each checkpoint and their sizes.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tiny_llama  # the CPU reference: config, quantization_config, tokenizer path, layer names

STD = 0.02
SHARD_BYTES = 4 << 30


def tokenizer_size(path: Path) -> int:
    tok = json.loads((path / "tokenizer.json").read_text())
    ids = list(tok["model"]["vocab"].values()) + [t["id"] for t in tok.get("added_tokens", [])]
    return max(ids) + 1


def config(tok_size: int) -> dict:
    # NOTE: fp16 (the tiny models' dtype, Machete's and the plugin's activations); bos/eos the tokenizer's
    return {
        **tiny_llama.LLAMA3_8B,
        "torch_dtype": "float16",
        "bos_token_id": 1,
        "eos_token_id": 2,
        "_tokenizer_size": tok_size,
    }


def shapes(cfg: dict) -> dict[str, tuple[int, ...]]:
    h, v = cfg["hidden_size"], cfg["vocab_size"]
    lin = tiny_llama.linear_shapes(cfg)
    out = {"model.embed_tokens.weight": (v, h), "model.norm.weight": (h,), "lm_head.weight": (v, h)}
    for n in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{n}."
        out.update({p + f"{name}.weight": s for name, s in lin.items()})
        out.update(
            {p + "input_layernorm.weight": (h,), p + "post_attention_layernorm.weight": (h,)}
        )
    return out


def make_fp16(cfg: dict, seed: int, torch) -> dict:
    """Every tensor on the GPU, each from its own seeded generator (its index in sorted name order)."""
    out = {}
    for idx, (name, shape) in enumerate(sorted(shapes(cfg).items())):
        if len(shape) == 1:
            out[name] = torch.ones(shape, dtype=torch.float16, device="cuda")
            continue
        g = torch.Generator(device="cuda").manual_seed(seed * 100003 + idx)
        out[name] = (torch.randn(shape, generator=g, device="cuda", dtype=torch.float32) * STD).to(
            torch.float16
        )
    out["lm_head.weight"][cfg["_tokenizer_size"] :] = 0
    return out


def quantize_int4(w, torch, group: int = tiny_llama.GROUP):
    """tiny_llama.quantize_int4 in torch: (int32 q in [-8, 7], fp16 scales [out, in / group])."""
    out, inp = w.shape
    groups = w.float().reshape(out, inp // group, group)
    scale = (groups.abs().amax(dim=-1) / 7.5).to(torch.float16)
    scale[scale == 0] = 1
    q = torch.clamp(torch.round(groups / scale.float()[..., None]), -8, 7).to(torch.int32)
    return q.reshape(out, inp), scale


def pack_int4(q, torch):
    """tiny_llama.pack_int4 in torch: value + 8, eight per int32, element j in bits 4j..4j+3 (as uint32 bits)."""
    out, inp = q.shape
    u = (q + 8).to(torch.int64).reshape(out, inp // 8, 8)
    packed = (u << (torch.arange(8, device=q.device, dtype=torch.int64) * 4)).sum(dim=-1)
    packed = torch.where(packed >= 2**31, packed - 2**32, packed)
    return packed.to(torch.int32)


def int4_tensors(fp16: dict, torch) -> dict:
    out = {}
    for name, arr in fp16.items():
        prefix = name.removesuffix(".weight")
        if prefix.split("layers.")[-1].split(".", 1)[-1] in tiny_llama.LINEARS and name.endswith(
            ".weight"
        ):
            q, scale = quantize_int4(arr, torch)
            out.update(
                {
                    f"{prefix}.weight_packed": pack_int4(q, torch),
                    f"{prefix}.weight_scale": scale,
                    f"{prefix}.weight_shape": torch.tensor(list(arr.shape), dtype=torch.int64),
                }
            )
        else:
            out[name] = arr
    return out


def write(dest: Path, cfg: dict, tensors: dict, torch) -> int:
    from safetensors.torch import save_file

    dest.mkdir(parents=True, exist_ok=True)
    public = {k: v for k, v in cfg.items() if not k.startswith("_")}
    (dest / "config.json").write_text(json.dumps(public, indent=2, sort_keys=True) + "\n")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(tiny_llama.TOKENIZER / name, dest / name)
    shards, cur, size = [], {}, 0
    for name in sorted(tensors):
        t = tensors[name]
        nbytes = t.numel() * t.element_size()
        if cur and size + nbytes > SHARD_BYTES:
            shards.append(cur)
            cur, size = {}, 0
        cur[name] = t
        size += nbytes
    shards.append(cur)
    weight_map, total = {}, 0
    for n, shard in enumerate(shards, 1):
        fname = f"model-{n:05d}-of-{len(shards):05d}.safetensors"
        save_file(
            {k: v.contiguous().cpu() for k, v in shard.items()},
            str(dest / fname),
            metadata={"format": "pt"},
        )
        weight_map.update(dict.fromkeys(shard, fname))
        total += (dest / fname).stat().st_size
    (dest / "model.safetensors.index.json").write_text(
        json.dumps(
            {"metadata": {"total_size": total}, "weight_map": weight_map}, indent=1, sort_keys=True
        )
        + "\n"
    )
    return total


def main(root: Path, seed: int = 0, int4: bool = True) -> dict:
    import torch

    cfg = config(tokenizer_size(tiny_llama.TOKENIZER))
    t0 = time.perf_counter()
    fp16 = make_fp16(cfg, seed, torch)
    torch.cuda.synchronize()
    t_make = time.perf_counter() - t0
    fp16_bytes = write(root / "llama-3-8b-fp16", cfg, fp16, torch)
    t_fp16 = time.perf_counter() - t0
    if not int4:  # the recipes quantize with the vllm.quantize build step
        return {
            "fp16_s": round(t_fp16, 1),
            "fp16_make_s": round(t_make, 1),
            "fp16_bytes": fp16_bytes,
            "tokenizer_size": cfg["_tokenizer_size"],
            "vocab_size": cfg["vocab_size"],
            "seed": seed,
            "std": STD,
        }
    t1 = time.perf_counter()
    int4 = int4_tensors(fp16, torch)
    torch.cuda.synchronize()
    t_quant = time.perf_counter() - t1
    int4_bytes = write(
        root / "llama-3-8b-int4",
        {**cfg, "quantization_config": tiny_llama.QUANTIZATION_CONFIG},
        int4,
        torch,
    )
    t_int4 = time.perf_counter() - t1
    return {
        "fp16_s": round(t_fp16, 1),
        "fp16_make_s": round(t_make, 1),
        "fp16_bytes": fp16_bytes,
        "int4_s": round(t_int4, 1),
        "int4_quantize_s": round(t_quant, 1),
        "int4_bytes": int4_bytes,
        "tokenizer_size": cfg["_tokenizer_size"],
        "vocab_size": cfg["vocab_size"],
        "seed": seed,
        "std": STD,
    }


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--no-int4"]
    print(
        json.dumps(
            main(Path(args[0] if args else "/tmp/vw/ckpt"), int4="--no-int4" not in sys.argv)
        )
    )
