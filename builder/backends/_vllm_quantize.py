"""INT4 weight-only quantization of a Hugging Face checkpoint into compressed-tensors' W4A16 pack-quantized layout
(what vLLM loads with quantization: compressed-tensors): the `vllm.quantize` build step.

Symmetric round to nearest per group of `group_size` inputs, the scale max|w| / 7.5 (compressed-tensors'
calculate_qparams for a signed 4-bit range), values clipped to [-8, 7], stored + 8 (vLLM's uint4b8) eight to an
int32 along the input dimension, element j in bits 4j..4j+3 (pack_to_int32, packed_dim 1). Each decoder linear
`model.layers.<n>.<LINEARS>.weight` becomes `weight_packed` (int32 [out, in/8]), `weight_scale` ([out, in/group],
fp16, bf16 for a bf16 weight) and `weight_shape` (int64 [2]); embeddings, norms and lm_head stay as they are.
Upstream's facts: tests/contracts/facts/compressed_tensors.json.

numpy only (bf16 decoded from its bits), streamed: the safetensors headers are read first, the output's headers
are computed from them, then each tensor is read, quantized in blocks of rows and written at its offset, so an
8B checkpoint never sits in memory. The same inputs give the same bytes (sorted names, fixed metadata)."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import numpy as np

from tritonbuild.backends.llm.safetensors import raw_header

# Bump when anything here changes what the step writes (the `vllm.quantize` cache key carries it).
QUANTIZER_VERSION = 1
SCHEME = "w4a16"
GROUP = 128
GROUP_SIZES = (32, 64, 128)
SHARD_BYTES = (
    4 << 30
)  # output shards hold at most this (a larger single tensor gets a shard of its own)
INDEX = "model.safetensors.index.json"
LINEARS = (
    "self_attn.q_proj",
    "self_attn.k_proj",
    "self_attn.v_proj",
    "self_attn.o_proj",
    "mlp.gate_proj",
    "mlp.up_proj",
    "mlp.down_proj",
)
ROW_PARALLEL = (
    "self_attn.o_proj",
    "mlp.down_proj",
)  # vLLM splits their inputs across tensor-parallel ranks
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
BLOCK_ELEMENTS = (
    1 << 24
)  # rows of a linear quantized at once: at most this many weights (64 MiB as float32)
CHUNK = 16 << 20
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pth", ".pt", ".gguf", ".bin.index.json")


def quantization_config(group_size: int = GROUP) -> dict:
    """config.json's quantization_config: compressed-tensors' QuantizationConfig of a W4A16 group scheme."""
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


# --- the algorithm (whole arrays) ------------------------------------------------------------------------------


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    """bfloat16 (as uint16 bits) → float32: the high half of the float32's bits."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(x: np.ndarray) -> np.ndarray:
    """float32 → bfloat16 bits (uint16), rounded to nearest even as torch's .to(torch.bfloat16) (finite values)."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    return ((bits + (0x7FFF + ((bits >> 16) & 1))) >> 16).astype(np.uint16)


def quantize_int4(
    w: np.ndarray, group: int = GROUP, scale_dtype: str = "F16"
) -> tuple[np.ndarray, np.ndarray]:
    """(int8 values in [-8, 7], scales [out, in / group]: fp16, or bf16 bits as uint16 for scale_dtype BF16):
    symmetric round to nearest per group, the scale max|w| / 7.5 as compressed-tensors' min-max observer takes it
    for a signed 4-bit range (an all-zero group gets scale 1; its values are 0 whatever the scale)."""
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
    """compressed-tensors' pack_to_int32 (packed_dim 1): value + 8, eight per int32, element j in bits 4j..4j+3."""
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
    """Every decoder linear as weight_packed / weight_scale / weight_shape; embeddings, norms, lm_head stay."""
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


# --- safetensors, streamed -------------------------------------------------------------------------------------


class FormatError(ValueError):
    """A weights file that is not the safetensors this step reads."""


def read_header(path: Path) -> tuple[int, dict]:
    """(where the data starts, {name: {dtype, shape, data_offsets}}) of a safetensors file, checked against its
    size; __metadata__ left out."""
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
    """The checkpoint's weight files: those its model.safetensors.index.json maps, else every top-level
    *.safetensors (read_json(rel) reads a JSON file of the checkpoint)."""
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


def _nbytes(dtype: str, shape: list[int]) -> int:
    return int(np.prod(shape, dtype=np.int64)) * ITEMSIZE[dtype]


def problems(headers: dict[str, dict], group: int, tp: int = 1) -> list[str]:
    """Why a checkpoint (its weight files' headers: file → {name: meta}) cannot be quantized with this group size
    and tensor parallelism; [] when it can."""
    found, out = 0, []
    for file, header in sorted(headers.items()):
        for name, meta in sorted(header.items()):
            prefix = linear_prefix(name)
            if prefix is None:
                if ".layers." in name and name.endswith(".weight") and len(meta["shape"]) >= 2:
                    out.append(
                        f"{name} ({file}) is a {len(meta['shape'])}-D weight of a decoder layer that is none "
                        f"of the linears this quantizer knows ({', '.join(LINEARS)}): vLLM would look for "
                        "it quantized (targets Linear)"
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
                    f"{prefix}: in_features {inp} split over tensor_parallel_size {tp} is not a multiple of "
                    f"group_size {group} (vLLM splits a row-parallel layer's groups across ranks)"
                )
    if not found and headers:
        out.append(
            f"no decoder linears (model.layers.<n>.{{{','.join(LINEARS)}}}.weight) in the weights"
        )
    return out


def layout(
    headers: dict[str, dict], group: int, shard_bytes: int = SHARD_BYTES
) -> list[tuple[str, list]]:
    """The output files: [(file name, [(name, dtype, shape, input file)...])], names sorted across the whole model
    and cut into shards of at most shard_bytes, never between the tensors one linear becomes."""
    units = sorted(
        [(*t, src) for t in _out_tensors(name, meta, group)]
        for src, header in headers.items()
        for name, meta in header.items()
    )
    shards, size = [[]], 0
    for unit in units:  # one input tensor's outputs, adjacent in name order
        n = sum(_nbytes(dtype, shape) for _, dtype, shape, _ in unit)
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
        _nbytes(dtype, shape)
        for header in headers.values()
        for name, meta in header.items()
        for _, dtype, shape in _out_tensors(name, meta, group)
    )


def _header_bytes(entries: list) -> tuple[bytes, dict[str, int]]:
    header, offset, at = {"__metadata__": {"format": "pt"}}, 0, {}
    for name, dtype, shape, _src in entries:
        n = _nbytes(dtype, shape)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        at[name] = offset
        offset += n
    head = json.dumps(header, separators=(",", ":")).encode()
    return struct.pack("<Q", len(head) + (-len(head) % 8)) + head + b" " * (-len(head) % 8), at


def _read_rows(fd: int, start: int, meta: dict, r0: int, r1: int) -> np.ndarray:
    """Rows r0..r1 of a 2-D float tensor as float32 (pread: safe from several threads on one descriptor)."""
    inp = meta["shape"][1]
    size = ITEMSIZE[meta["dtype"]]
    raw = _pread_exact(
        fd, (r1 - r0) * inp * size, start + meta["data_offsets"][0] + r0 * inp * size
    )
    arr = np.frombuffer(
        raw, dtype={"F16": np.float16, "BF16": np.uint16, "F32": np.float32}[meta["dtype"]]
    )
    arr = arr.reshape(r1 - r0, inp)
    return bf16_to_f32(arr) if meta["dtype"] == "BF16" else arr


def _pread_exact(fd: int, n: int, pos: int) -> bytes:
    parts = []
    while n:
        chunk = os.pread(fd, min(n, 1 << 30), pos)
        if not chunk:
            raise FormatError("weights file ended early")
        parts.append(chunk)
        n -= len(chunk)
        pos += len(chunk)
    return b"".join(parts) if len(parts) != 1 else parts[0]


def _pwrite_all(fd: int, data: bytes, pos: int) -> None:
    view = memoryview(data)
    while view:
        done = os.pwrite(fd, view, pos)
        view, pos = view[done:], pos + done


def _write_linear(
    src_fd: int, start: int, meta: dict, out_fd: int, at: dict, prefix: str, group: int
) -> None:
    """One linear quantized block of rows by block (at: absolute offsets of its outputs in the output file)."""
    rows, inp = meta["shape"]
    scale_dtype = "BF16" if meta["dtype"] == "BF16" else "F16"
    step = max(1, BLOCK_ELEMENTS // inp)
    for r0 in range(0, rows, step):
        r1 = min(rows, r0 + step)
        q, scale = quantize_int4(_read_rows(src_fd, start, meta, r0, r1), group, scale_dtype)
        _pwrite_all(
            out_fd, pack_int4(q).tobytes(), at[f"{prefix}.weight_packed"] + r0 * (inp // 8) * 4
        )
        _pwrite_all(out_fd, scale.tobytes(), at[f"{prefix}.weight_scale"] + r0 * (inp // group) * 2)
    _pwrite_all(out_fd, np.array([rows, inp], dtype="<i8").tobytes(), at[f"{prefix}.weight_shape"])


def _copy_bytes(src_fd: int, pos: int, n: int, out_fd: int, dest: int) -> None:
    while n:
        chunk = _pread_exact(src_fd, min(n, CHUNK), pos)
        _pwrite_all(out_fd, chunk, dest)
        n, pos, dest = n - len(chunk), pos + len(chunk), dest + len(chunk)


def workers() -> int:
    """Threads quantizing linears at once (numpy releases the GIL on whole-array work): the CPUs this process may
    use, at most 8 (each holds a block of up to BLOCK_ELEMENTS weights and its temporaries, ~0.4 GB);
    TRITONBUILD_QUANTIZE_THREADS overrides."""
    if env := os.environ.get("TRITONBUILD_QUANTIZE_THREADS"):
        return max(1, int(env))
    cpus = (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    )
    return max(1, min(8, cpus))


def _write_shard(
    path: Path, entries: list, headers: dict, starts: dict, fds: dict, group: int, pool
) -> int:
    """One output file: its header, then every tensor (copies here, linears on the pool); returns its bytes."""
    head, at = _header_bytes(entries)
    out_fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        _pwrite_all(out_fd, head, 0)
        absolute = {name: len(head) + offset for name, offset in at.items()}
        jobs = []
        for name, dtype, shape, source in entries:
            meta = headers[source].get(name)
            if meta is not None:
                _copy_bytes(
                    fds[source],
                    starts[source] + meta["data_offsets"][0],
                    _nbytes(dtype, shape),
                    out_fd,
                    absolute[name],
                )
            elif name.endswith(".weight_packed"):  # with its weight_scale and weight_shape
                prefix = name[: -len(".weight_packed")]
                jobs.append(
                    pool.submit(
                        _write_linear,
                        fds[source],
                        starts[source],
                        headers[source][prefix + ".weight"],
                        out_fd,
                        absolute,
                        prefix,
                        group,
                    )
                )
        for job in jobs:
            job.result()
        os.fsync(out_fd)
    finally:
        os.close(out_fd)
    return sum(_nbytes(dtype, shape) for _, dtype, shape, _ in entries)


def quantize_weights(
    src: dict[str, Path], dest: Path, group: int, shard_bytes: int = SHARD_BYTES
) -> list[str]:
    """Quantize the weight files src (name → path) into dest, the linears on workers() threads, each holding one
    block of rows in memory at a time; returns the files written (with model.safetensors.index.json when
    sharded). The bytes do not depend on the thread count: every block lands at its own offset."""
    from concurrent.futures import ThreadPoolExecutor

    starts, headers, seen = {}, {}, set()
    for name, path in src.items():
        starts[name], headers[name] = read_header(path)
        if twice := seen & set(headers[name]):
            raise FormatError(
                f"{name}: tensors also in another weight file: {', '.join(sorted(twice)[:3])}"
            )
        seen |= set(headers[name])
    if bad := problems(headers, group):
        raise FormatError("; ".join(bad))
    files = layout(headers, group, shard_bytes)
    fds = {name: os.open(path, os.O_RDONLY) for name, path in src.items()}
    try:
        with ThreadPoolExecutor(workers(), thread_name_prefix="quantize") as pool:
            total = sum(
                _write_shard(dest / fname, entries, headers, starts, fds, group, pool)
                for fname, entries in files
            )
    finally:
        for fd in fds.values():
            os.close(fd)
    written = [f for f, _ in files]
    if len(files) > 1:
        weight_map = {name: fname for fname, entries in files for name, *_ in entries}
        (dest / INDEX).write_text(
            json.dumps(
                {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))},
                indent=2,
            )
            + "\n"
        )
        written.append(INDEX)
    return written


def quantize_checkpoint(
    ckpt_files: dict[str, Path], dest: Path, group: int, shard_bytes: int = SHARD_BYTES
) -> None:
    """The whole step: ckpt_files (relative name → path) → dest holding the quantized checkpoint: its weights,
    config.json with quantization_config, every other file (tokenizer, generation config, ...) as it is. The input
    weights' own index, any .safetensors it does not map and other weight files (.bin, .pth: e.g. Llama 3's
    original/consolidated.00.pth) are left out."""
    import shutil

    def read_json(rel: str) -> dict:
        return json.loads(ckpt_files[rel].read_text())

    weights = weight_files(sorted(ckpt_files), read_json)
    if missing := [w for w in weights if w not in ckpt_files]:
        raise FormatError(
            f"{INDEX} maps weight files the checkpoint does not hold: {', '.join(missing)}"
        )
    if not weights:
        raise FormatError("no *.safetensors weights")
    dest.mkdir(parents=True, exist_ok=True)
    quantize_weights({w: ckpt_files[w] for w in weights}, dest, group, shard_bytes)
    config = read_json("config.json")
    config["quantization_config"] = quantization_config(group)
    (dest / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    for rel, path in sorted(ckpt_files.items()):
        if rel in ("config.json", INDEX) or rel.endswith(
            WEIGHT_SUFFIXES
        ):  # the fp16 weights stay behind
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest / rel)
