"""What the `vllm.quantize` step will write, from the safetensors headers alone (plan time, before
any weight is read): the checkpoint's weight files, why it cannot be quantized, the output files and
their tensors, the quantized weights' bytes. `vllm/quantize/writer.py` writes what `layout` lays out."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tritonbuild.backends.llm.safetensors import raw_header
from tritonbuild.backends.vllm.quantize.int4 import LINEARS, linear_prefix

# Bump when anything here, in vllm/quantize/int4.py or in vllm/quantize/writer.py changes what the step writes
# (the `vllm.quantize` cache key carries it).
QUANTIZER_VERSION = 1
GROUP_SIZES = (32, 64, 128)
# Output shards hold at most this (a larger single tensor gets a shard of its own).
SHARD_BYTES = 4 << 30
INDEX = "model.safetensors.index.json"
# vLLM splits these linears' inputs across tensor-parallel ranks.
ROW_PARALLEL = ("self_attn.o_proj", "mlp.down_proj")
SAFETENSORS_DTYPES = {
    np.dtype(np.float16): "F16",
    np.dtype(np.int32): "I32",
    np.dtype(np.int64): "I64",
}
ITEMSIZE = {
    "F64": 8,
    "F32": 4,
    "F16": 2,
    "BF16": 2,
    "I64": 8,
    "I32": 4,
    "I16": 2,
    "I8": 1,
    "U8": 1,
    "BOOL": 1,
    "U16": 2,
    "U32": 4,
    "U64": 8,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
}
FLOATS = ("F16", "BF16", "F32")


class FormatError(ValueError):
    """A weights file that is not the safetensors this step reads."""


def read_header(path: Path) -> tuple[int, dict]:
    """(where the data starts, {name: {dtype, shape, data_offsets}}) of a safetensors file, checked
    against its size; __metadata__ left out."""
    found = raw_header(path)
    if found is None:
        raise FormatError(
            f"{path.name}: not a safetensors file (no 8-byte length and JSON header that fit it)"
        )
    start, header = found
    size = path.stat().st_size
    for name, meta in header.items():
        a, b = meta["data_offsets"]
        count = int(np.prod(meta["shape"], dtype=np.int64))
        if (
            meta["dtype"] not in ITEMSIZE
            or b - a != count * ITEMSIZE[meta["dtype"]]
            or start + b > size
        ):
            raise FormatError(
                f"{path.name}: tensor {name} ({meta['dtype']} {meta['shape']}) does not match its "
                f"data_offsets {meta['data_offsets']}"
            )
    return start, header


def weight_files(rels: list[str], read_json) -> list[str]:
    """The checkpoint's weight files: those its model.safetensors.index.json maps, else every
    top-level *.safetensors (read_json(rel) reads a JSON file of the checkpoint)."""
    if INDEX in rels:
        return sorted(set(read_json(INDEX)["weight_map"].values()))
    return sorted(r for r in rels if "/" not in r and r.endswith(".safetensors"))


def _out_tensors(name: str, meta: dict, group: int) -> list[tuple[str, str, list[int]]]:
    """(name, dtype, shape) of what one input tensor becomes."""
    if linear_prefix(name) is None:
        return [(name, meta["dtype"], list(meta["shape"]))]
    p, (out, inp) = linear_prefix(name), meta["shape"]
    scale = "BF16" if meta["dtype"] == "BF16" else "F16"
    return [
        (f"{p}.weight_packed", "I32", [out, inp // 8]),
        (f"{p}.weight_scale", scale, [out, inp // group]),
        (f"{p}.weight_shape", "I64", [2]),
    ]


def tensor_bytes(dtype: str, shape: list[int]) -> int:
    """Bytes of a tensor of this safetensors dtype and shape."""
    return int(np.prod(shape, dtype=np.int64)) * ITEMSIZE[dtype]


def problems(headers: dict[str, dict], group: int, tp: int = 1) -> list[str]:
    """Why a checkpoint (its weight files' headers: file → {name: meta}) cannot be quantized with
    this group size and tensor parallelism; [] when it can."""
    found, out = 0, []
    for file, header in sorted(headers.items()):
        for name, meta in sorted(header.items()):
            prefix = linear_prefix(name)
            if prefix is None:
                if ".layers." in name and name.endswith(".weight") and len(meta["shape"]) >= 2:
                    out.append(
                        f"{name} ({file}) is a {len(meta['shape'])}-D weight of a decoder layer "
                        f"that is none of the linears this quantizer knows ({', '.join(LINEARS)}): "
                        "vLLM would look for it quantized (targets Linear)"
                    )
                continue
            found += 1
            if meta["dtype"] not in FLOATS or len(meta["shape"]) != 2:
                out.append(
                    f"{name} ({file}) is {meta['dtype']} {meta['shape']}: quantize takes 2-D "
                    f"{'/'.join(FLOATS)} linears"
                )
                continue
            inp = meta["shape"][1]
            if inp % group:
                out.append(f"{prefix}: in_features {inp} is not a multiple of group_size {group}")
            elif tp > 1 and prefix.endswith(ROW_PARALLEL) and (inp % tp or (inp // tp) % group):
                out.append(
                    f"{prefix}: in_features {inp} split over tensor_parallel_size {tp} is not a "
                    f"multiple of group_size {group} (vLLM splits a row-parallel layer's groups "
                    "across ranks)"
                )
    if not found and headers:
        out.append(
            f"no decoder linears (model.layers.<n>.{{{','.join(LINEARS)}}}.weight) in the weights"
        )
    return out


def layout(
    headers: dict[str, dict], group: int, shard_bytes: int = SHARD_BYTES
) -> list[tuple[str, list]]:
    """The output files: [(file name, [(name, dtype, shape, input file)...])], names sorted across
    the whole model and cut into shards of at most shard_bytes, never between the tensors one linear
    becomes."""
    units = sorted(
        [(*t, src) for t in _out_tensors(name, meta, group)]
        for src, header in headers.items()
        for name, meta in header.items()
    )
    shards, size = [[]], 0
    for unit in units:  # one input tensor's outputs, adjacent in name order
        n = sum(tensor_bytes(dtype, shape) for _, dtype, shape, _ in unit)
        if shards[-1] and size + n > shard_bytes:
            shards.append([])
            size = 0
        shards[-1].extend(unit)
        size += n
    if len(shards) == 1:
        return [("model.safetensors", shards[0])]
    return [
        (f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors", s) for i, s in enumerate(shards)
    ]


def output_bytes(headers: dict[str, dict], group: int) -> int:
    """Bytes of the quantized weights (the GPU's weights, for the memory plan)."""
    return sum(
        tensor_bytes(dtype, shape)
        for header in headers.values()
        for name, meta in header.items()
        for _, dtype, shape in _out_tensors(name, meta, group)
    )
