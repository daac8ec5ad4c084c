"""INT4 weight-only quantization into compressed-tensors' W4A16 pack-quantized layout (what vLLM
loads with quantization: compressed-tensors), on whole arrays: the arithmetic of the `vllm.quantize`
step, which `vllm/quantize/writer.py` streams a checkpoint through.

Symmetric round to nearest per group of `group_size` inputs, the scale max|w| / 7.5
(compressed-tensors' calculate_qparams for a signed 4-bit range), values clipped to [-8, 7],
stored + 8 (vLLM's uint4b8) eight to an int32 along the input dimension, element j in bits
4j..4j+3 (pack_to_int32, packed_dim 1). Each decoder linear
`model.layers.<n>.<LINEARS>.weight` becomes `weight_packed` (int32 [out, in/8]), `weight_scale`
([out, in/group], fp16, bf16 for a bf16 weight) and `weight_shape` (int64 [2]); embeddings, norms
and lm_head stay as they are. numpy only, bf16 decoded from its bits. Upstream's facts:
tests/contracts/facts/compressed_tensors.json."""

from __future__ import annotations

import numpy as np

SCHEME = "w4a16"
GROUP = 128
LINEARS = (
    "self_attn.q_proj",
    "self_attn.k_proj",
    "self_attn.v_proj",
    "self_attn.o_proj",
    "mlp.gate_proj",
    "mlp.up_proj",
    "mlp.down_proj",
)


def quantization_config(group_size: int = GROUP) -> dict:
    """config.json's quantization_config: compressed-tensors' QuantizationConfig of a W4A16 group
    scheme."""
    return {
        "quant_method": "compressed-tensors",
        "format": "pack-quantized",
        "quantization_status": "compressed",
        "ignore": ["lm_head"],
        "kv_cache_scheme": None,
        "config_groups": {
            "group_0": {
                "targets": ["Linear"],
                "input_activations": None,
                "output_activations": None,
                "format": "pack-quantized",
                "weights": {
                    "num_bits": 4,
                    "type": "int",
                    "symmetric": True,
                    "strategy": "group",
                    "group_size": group_size,
                    "dynamic": False,
                    "actorder": None,
                    "observer": "minmax",
                },
            }
        },
    }


QUANTIZATION_CONFIG = quantization_config(GROUP)


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    """bfloat16 (as uint16 bits) → float32: the high half of the float32's bits."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(x: np.ndarray) -> np.ndarray:
    """float32 → bfloat16 bits (uint16), rounded to nearest even as torch's .to(torch.bfloat16)
    (finite values)."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    return ((bits + (0x7FFF + ((bits >> 16) & 1))) >> 16).astype(np.uint16)


def quantize_int4(
    w: np.ndarray, group: int = GROUP, scale_dtype: str = "F16"
) -> tuple[np.ndarray, np.ndarray]:
    """(int8 values in [-8, 7], scales [out, in / group]: fp16, or bf16 bits as uint16 for
    scale_dtype BF16): symmetric round to nearest per group, the scale max|w| / 7.5 as
    compressed-tensors' min-max observer takes it for a signed 4-bit range (an all-zero group gets
    scale 1; its values are 0 whatever the scale)."""
    out, inp = w.shape
    groups = w.astype(np.float32).reshape(out, inp // group, group)
    amax = np.abs(groups).max(axis=-1) / 7.5
    if scale_dtype == "BF16":
        scale = f32_to_bf16(amax)
        scale[scale == 0] = 0x3F80  # 1.0
        scale_f32 = bf16_to_f32(scale)
    else:
        scale = amax.astype(np.float16)
        scale[scale == 0] = 1
        scale_f32 = scale.astype(np.float32)
    q = np.clip(np.rint(groups / scale_f32[..., None]), -8, 7).astype(np.int8)
    return q.reshape(out, inp), scale


def pack_int4(q: np.ndarray) -> np.ndarray:
    """compressed-tensors' pack_to_int32 (packed_dim 1): value + 8, eight per int32, element j in
    bits 4j..4j+3."""
    out, inp = q.shape
    u = (q.astype(np.int32) + 8).astype(np.uint32).reshape(out, inp // 8, 8)
    return (u << (np.arange(8, dtype=np.uint32) * 4)).sum(axis=-1, dtype=np.uint32).view(np.int32)


def unpack_int4(packed: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    u = packed.view(np.uint32)[..., None] >> (np.arange(8, dtype=np.uint32) * 4) & 0xF
    return (u.reshape(packed.shape[0], -1)[:, : shape[1]].astype(np.int16) - 8).astype(np.int8)


def dequantize(
    packed: np.ndarray, scale: np.ndarray, shape: tuple[int, int], group: int = GROUP
) -> np.ndarray:
    """float32 weights back from weight_packed and weight_scale (fp16, or bf16 bits as uint16)."""
    s = bf16_to_f32(scale) if scale.dtype == np.uint16 else scale.astype(np.float32)
    q = unpack_int4(packed, shape).astype(np.float32).reshape(shape[0], -1, group)
    return (q * s[..., None]).reshape(shape)


def linear_prefix(name: str) -> str | None:
    """`model.layers.<n>.<linear>` for a decoder linear's weight, else None."""
    if not name.endswith(".weight") or ".layers." not in name:
        return None
    prefix = name[: -len(".weight")]
    return prefix if prefix.split("layers.")[-1].split(".", 1)[-1] in LINEARS else None


def int4_tensors(fp16: dict[str, np.ndarray], group: int = GROUP) -> dict[str, np.ndarray]:
    """Every decoder linear as weight_packed / weight_scale / weight_shape; embeddings, norms,
    lm_head stay."""
    out = {}
    for name, arr in fp16.items():
        if (prefix := linear_prefix(name)) is not None:
            q, scale = quantize_int4(arr, group)
            out.update(
                {
                    f"{prefix}.weight_packed": pack_int4(q),
                    f"{prefix}.weight_scale": scale,
                    f"{prefix}.weight_shape": np.array(arr.shape, dtype=np.int64),
                }
            )
        else:
            out[name] = arr
    return out
