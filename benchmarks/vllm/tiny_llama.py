"""The tiny real model of the vLLM benchmark, made by the project: a Llama-architecture checkpoint with seeded
random fp16 weights (safetensors + config.json, the BPE tokenizer of recipes/examples/tiny-llama, trained on a few
lines), its INT4 weight-only version in compressed-tensors' pack-quantized W4A16 layout (symmetric round to
nearest, one fp16 scale per group of 128 inputs; vLLM loads it with quantization: compressed-tensors), and the
config.json of a real geometry (Llama-3-8B) for vLLM's load_format=dummy in the memory check.

    python benchmarks/vllm/tiny_llama.py DIR     # DIR/tiny-llama-fp16, DIR/tiny-llama-int4, DIR/llama-3-8b

Deterministic: the same bytes every time (numpy's seeded generator, sorted safetensors header). The geometry is
the smallest Marlin's INT4 kernels and FlashAttention take (inputs multiple of 128, head_dim 64).
"""

from __future__ import annotations

import json
import shutil
import struct
import sys
from pathlib import Path

import numpy as np

# The quantizer is the builder's (the vllm.quantize step); its names stay importable from here.
from tritonbuild.backends.vllm.quantize.int4 import (  # noqa: F401 - re-exported
    GROUP,
    LINEARS,
    QUANTIZATION_CONFIG,
    dequantize,
    int4_tensors,
    pack_int4,
    quantize_int4,
    unpack_int4,
)
from tritonbuild.backends.vllm.quantize.plan import SAFETENSORS_DTYPES

ROOT = Path(__file__).resolve().parents[2]
TOKENIZER = ROOT / "recipes" / "examples" / "tiny-llama"
CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "num_hidden_layers": 2,
    "vocab_size": 384,
    "max_position_embeddings": 1024,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "float16",
    "bos_token_id": 1,
    "eos_token_id": 2,
}
LLAMA3_8B = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "num_hidden_layers": 32,
    "vocab_size": 128256,
    "max_position_embeddings": 8192,
    "rms_norm_eps": 1e-5,
    "rope_theta": 500000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "bos_token_id": 128000,
    "eos_token_id": 128001,
}


def linear_shapes(cfg: dict) -> dict[str, tuple[int, int]]:
    """Each linear of a Llama layer (its name under the layer) → its weight's (out, in)."""
    h, i, hd = cfg["hidden_size"], cfg["intermediate_size"], cfg["head_dim"]
    q, kv = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd
    return {
        "self_attn.q_proj": (q, h),
        "self_attn.k_proj": (kv, h),
        "self_attn.v_proj": (kv, h),
        "self_attn.o_proj": (h, q),
        "mlp.gate_proj": (i, h),
        "mlp.up_proj": (i, h),
        "mlp.down_proj": (h, i),
    }


def tensors(cfg: dict, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded fp16 weights, each linear scaled 1/sqrt(fan-in) so that logits keep a spread through the layers."""
    rng = np.random.default_rng(seed)
    h, v = cfg["hidden_size"], cfg["vocab_size"]

    def w(out: int, inp: int) -> np.ndarray:
        return (rng.standard_normal((out, inp)) / np.sqrt(inp)).astype(np.float16)

    shapes = linear_shapes(cfg)
    out = {
        "model.embed_tokens.weight": (rng.standard_normal((v, h))).astype(np.float16),
        "model.norm.weight": np.ones(h, np.float16),
        "lm_head.weight": w(v, h),
    }
    for n in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{n}."
        out.update({p + f"{name}.weight": w(*shapes[name]) for name in LINEARS})
        out.update(
            {
                p + "input_layernorm.weight": np.ones(h, np.float16),
                p + "post_attention_layernorm.weight": np.ones(h, np.float16),
            }
        )
    return out


def write_safetensors(path: Path, arrays: dict[str, np.ndarray]) -> None:
    header, offset, blobs = {"__metadata__": {"format": "pt"}}, 0, []
    for name in sorted(arrays):
        arr = np.ascontiguousarray(arrays[name])
        data = arr.tobytes()
        header[name] = {
            "dtype": SAFETENSORS_DTYPES[arr.dtype],
            "shape": list(arr.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        blobs.append(data)
        offset += len(data)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    path.write_bytes(struct.pack("<Q", len(head)) + head + b"".join(blobs))


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    dtypes = {v: k for k, v in SAFETENSORS_DTYPES.items()}
    out = {}
    for name, meta in header.items():
        if name != "__metadata__":
            a, b = meta["data_offsets"]
            out[name] = np.frombuffer(
                raw[8 + n + a : 8 + n + b], dtype=dtypes[meta["dtype"]]
            ).reshape(meta["shape"])
    return out


def _write(dest: Path, config: dict, arrays: dict[str, np.ndarray] | None) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    if arrays is not None:
        write_safetensors(dest / "model.safetensors", arrays)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(TOKENIZER / name, dest / name)
    return dest


def write_all(root: Path, seed: int = 0) -> dict[str, Path]:
    """tiny-llama-fp16, tiny-llama-int4 (from the fp16 weights) and llama-3-8b (config only) under root."""
    fp16 = tensors(CONFIG, seed)
    return {
        "fp16": _write(root / "tiny-llama-fp16", CONFIG, fp16),
        "int4": _write(
            root / "tiny-llama-int4",
            {**CONFIG, "quantization_config": QUANTIZATION_CONFIG},
            int4_tensors(fp16),
        ),
        "llama-3-8b": _write(root / "llama-3-8b", LLAMA3_8B, None),
    }


if __name__ == "__main__":
    for kind, path in write_all(Path(sys.argv[1] if len(sys.argv) > 1 else "checkpoints")).items():
        print(kind, path)
