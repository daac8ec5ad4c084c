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

ROOT = Path(__file__).resolve().parents[2]
TOKENIZER = ROOT / "recipes" / "examples" / "tiny-llama"
GROUP = 128
CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256,
          "intermediate_size": 512, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
          "num_hidden_layers": 2, "vocab_size": 384, "max_position_embeddings": 1024, "rms_norm_eps": 1e-5,
          "rope_theta": 10000.0, "tie_word_embeddings": False, "torch_dtype": "float16", "bos_token_id": 1,
          "eos_token_id": 2}
LLAMA3_8B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
             "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
             "num_hidden_layers": 32, "vocab_size": 128256, "max_position_embeddings": 8192, "rms_norm_eps": 1e-5,
             "rope_theta": 500000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
             "bos_token_id": 128000, "eos_token_id": 128001}
LINEARS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
           "mlp.up_proj", "mlp.down_proj")
SAFETENSORS_DTYPES = {np.dtype(np.float16): "F16", np.dtype(np.int32): "I32", np.dtype(np.int64): "I64"}
# compressed-tensors' own config of a W4A16 group-128 scheme (QuantizationConfig, format pack-quantized)
QUANTIZATION_CONFIG = {
    "quant_method": "compressed-tensors", "format": "pack-quantized", "quantization_status": "compressed",
    "ignore": ["lm_head"], "kv_cache_scheme": None,
    "config_groups": {"group_0": {"targets": ["Linear"], "input_activations": None, "output_activations": None,
                                  "format": "pack-quantized",
                                  "weights": {"num_bits": 4, "type": "int", "symmetric": True, "strategy": "group",
                                              "group_size": GROUP, "dynamic": False, "actorder": None,
                                              "observer": "minmax"}}}}


def tensors(cfg: dict, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded fp16 weights, each linear scaled 1/sqrt(fan-in) so that logits keep a spread through the layers."""
    rng = np.random.default_rng(seed)
    h, i, v, hd = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"], cfg["head_dim"]
    q, kv = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd

    def w(out: int, inp: int) -> np.ndarray:
        return (rng.standard_normal((out, inp)) / np.sqrt(inp)).astype(np.float16)

    shapes = {"self_attn.q_proj": (q, h), "self_attn.k_proj": (kv, h), "self_attn.v_proj": (kv, h),
              "self_attn.o_proj": (h, q), "mlp.gate_proj": (i, h), "mlp.up_proj": (i, h), "mlp.down_proj": (h, i)}
    out = {"model.embed_tokens.weight": (rng.standard_normal((v, h))).astype(np.float16),
           "model.norm.weight": np.ones(h, np.float16), "lm_head.weight": w(v, h)}
    for n in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{n}."
        out.update({p + f"{name}.weight": w(*shapes[name]) for name in LINEARS})
        out.update({p + "input_layernorm.weight": np.ones(h, np.float16),
                    p + "post_attention_layernorm.weight": np.ones(h, np.float16)})
    return out


def write_safetensors(path: Path, arrays: dict[str, np.ndarray]) -> None:
    header, offset, blobs = {"__metadata__": {"format": "pt"}}, 0, []
    for name in sorted(arrays):
        arr = np.ascontiguousarray(arrays[name])
        data = arr.tobytes()
        header[name] = {"dtype": SAFETENSORS_DTYPES[arr.dtype], "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    path.write_bytes(struct.pack("<Q", len(head)) + head + b"".join(blobs))


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    dtypes = {v: k for k, v in SAFETENSORS_DTYPES.items()}
    out = {}
    for name, meta in header.items():
        if name != "__metadata__":
            a, b = meta["data_offsets"]
            out[name] = np.frombuffer(raw[8 + n + a:8 + n + b], dtype=dtypes[meta["dtype"]]).reshape(meta["shape"])
    return out


def quantize_int4(w: np.ndarray, group: int = GROUP) -> tuple[np.ndarray, np.ndarray]:
    """(int8 values in [-8, 7], fp16 scales [out, in / group]): symmetric round to nearest per group, the scale
    max|w| / 7.5 as compressed-tensors' min-max observer takes it for a signed 4-bit range."""
    out, inp = w.shape
    groups = w.astype(np.float32).reshape(out, inp // group, group)
    scale = (np.abs(groups).max(axis=-1) / 7.5).astype(np.float16)
    scale[scale == 0] = 1
    q = np.clip(np.rint(groups / scale.astype(np.float32)[..., None]), -8, 7).astype(np.int8)
    return q.reshape(out, inp), scale


def pack_int4(q: np.ndarray) -> np.ndarray:
    """compressed-tensors' pack_to_int32 (packed_dim 1): value + 8, eight per int32, element j in bits 4j..4j+3."""
    out, inp = q.shape
    u = (q.astype(np.int32) + 8).astype(np.uint32).reshape(out, inp // 8, 8)
    return (u << (np.arange(8, dtype=np.uint32) * 4)).sum(axis=-1, dtype=np.uint32).view(np.int32)


def unpack_int4(packed: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    u = packed.view(np.uint32)[..., None] >> (np.arange(8, dtype=np.uint32) * 4) & 0xF
    return (u.reshape(packed.shape[0], -1)[:, :shape[1]].astype(np.int16) - 8).astype(np.int8)


def dequantize(packed: np.ndarray, scale: np.ndarray, shape: tuple[int, int], group: int = GROUP) -> np.ndarray:
    q = unpack_int4(packed, shape).astype(np.float32).reshape(shape[0], -1, group)
    return (q * scale.astype(np.float32)[..., None]).reshape(shape)


def int4_tensors(fp16: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every decoder linear as weight_packed / weight_scale / weight_shape; embeddings, norms, lm_head stay fp16."""
    out = {}
    for name, arr in fp16.items():
        prefix = name.removesuffix(".weight")
        if prefix.split("layers.")[-1].split(".", 1)[-1] in LINEARS and name.endswith(".weight"):
            q, scale = quantize_int4(arr)
            out.update({f"{prefix}.weight_packed": pack_int4(q), f"{prefix}.weight_scale": scale,
                        f"{prefix}.weight_shape": np.array(arr.shape, dtype=np.int64)})
        else:
            out[name] = arr
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
    return {"fp16": _write(root / "tiny-llama-fp16", CONFIG, fp16),
            "int4": _write(root / "tiny-llama-int4", {**CONFIG, "quantization_config": QUANTIZATION_CONFIG},
                           int4_tensors(fp16)),
            "llama-3-8b": _write(root / "llama-3-8b", LLAMA3_8B, None)}


if __name__ == "__main__":
    for kind, path in write_all(Path(sys.argv[1] if len(sys.argv) > 1 else "checkpoints")).items():
        print(kind, path)
