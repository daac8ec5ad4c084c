"""The `vllm.quantize` build step's writer: a Hugging Face checkpoint → the same checkpoint with its
decoder linears INT4 weight-only (compressed-tensors' W4A16 pack-quantized layout, `vllm/quantize/int4.py`),
laid out as `plan.layout` says.

Streamed: the safetensors headers are read first, the output's headers are computed from them, then
each tensor is read, quantized in blocks of rows and written at its offset, so an 8B checkpoint
never sits in memory. The same inputs give the same bytes (sorted names, fixed metadata), whatever
the thread count."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import numpy as np

from tritonbuild.backends.vllm.quantize.int4 import (
    bf16_to_f32,
    pack_int4,
    quantization_config,
    quantize_int4,
)
from tritonbuild.backends.vllm.quantize.plan import (
    INDEX,
    ITEMSIZE,
    SHARD_BYTES,
    FormatError,
    layout,
    problems,
    read_header,
    tensor_bytes,
    weight_files,
)

# Rows of a linear quantized at once: at most this many weights (64 MiB as float32).
BLOCK_ELEMENTS = 1 << 24
CHUNK = 16 << 20
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pth", ".pt", ".gguf", ".bin.index.json")


def _header_bytes(entries: list) -> tuple[bytes, dict[str, int]]:
    header, offset, at = {"__metadata__": {"format": "pt"}}, 0, {}
    for name, dtype, shape, _src in entries:
        n = tensor_bytes(dtype, shape)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        at[name] = offset
        offset += n
    head = json.dumps(header, separators=(",", ":")).encode()
    return struct.pack("<Q", len(head) + (-len(head) % 8)) + head + b" " * (-len(head) % 8), at


def _read_rows(fd: int, start: int, meta: dict, r0: int, r1: int) -> np.ndarray:
    """Rows r0..r1 of a 2-D float tensor as float32 (pread: safe from several threads on one
    descriptor)."""
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
    """One linear quantized block of rows by block (at: absolute offsets of its outputs in the
    output file)."""
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
    """Threads quantizing linears at once (numpy releases the GIL on whole-array work): the CPUs
    this process may use, at most 8 (each holds a block of up to BLOCK_ELEMENTS weights and its
    temporaries, ~0.4 GB); TRITONBUILD_QUANTIZE_THREADS overrides."""
    if env := os.environ.get("TRITONBUILD_QUANTIZE_THREADS"):
        return max(1, int(env))
    cpus = (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    )
    return max(1, min(8, cpus))


def _write_shard(
    path: Path, entries: list, headers: dict, starts: dict, fds: dict, group: int, pool
) -> int:
    """One output file: its header, then every tensor (copies here, linears on the pool); returns
    its bytes."""
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
                    tensor_bytes(dtype, shape),
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
    return sum(tensor_bytes(dtype, shape) for _, dtype, shape, _ in entries)


def quantize_weights(
    src: dict[str, Path], dest: Path, group: int, shard_bytes: int = SHARD_BYTES
) -> list[str]:
    """Quantize the weight files src (name → path) into dest, the linears on workers() threads, each
    holding one block of rows in memory at a time; returns the files written (with
    model.safetensors.index.json when sharded). The bytes do not depend on the thread count: every
    block lands at its own offset."""
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
    """The whole step: ckpt_files (relative name → path) → dest holding the quantized checkpoint:
    its weights, config.json with quantization_config, every other file (tokenizer, generation
    config, ...) as it is. The input weights' own index, any .safetensors it does not map and other
    weight files (.bin, .pth: e.g. Llama 3's original/consolidated.00.pth) are left out."""
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
        if rel in ("config.json", INDEX) or rel.endswith(WEIGHT_SUFFIXES):
            continue  # the fp16 weights stay behind
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest / rel)
