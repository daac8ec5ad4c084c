"""The vllm.quantize step: an fp16/bf16 checkpoint + `quantize` → a compressed-tensors W4A16 pack-quantized
checkpoint packaged in the version directory (plan, run, cache, disk, refusals), held to upstream's facts
(tests/contracts/facts/compressed_tensors.json) and to compressed_tensors' own pack_to_int32 where it imports."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from benchmarks.vllm import tiny_llama
from tests.contracts.facts import load
from tritonbuild.backends.vllm.quantize import int4, plan, writer

FACTS = load("compressed_tensors")


def _recipe(
    tmp_path: Path,
    quantize: str = "{scheme: w4a16, group_size: 128}",
    extra: str = "",
    ckpt: str = "ck/tiny-llama-fp16",
) -> Path:
    if not (tmp_path / "ck").exists():
        tiny_llama.write_all(tmp_path / "ck")
    path = tmp_path / "r.yaml"
    path.write_text(
        f"name: tq\nversion: 1\nbackend: vllm\ncheckpoint: {{path: {ckpt}}}\n"
        f"quantize: {quantize}\n{extra}"
    )
    return path


def _read(path: Path) -> dict[str, np.ndarray]:
    """A safetensors file as numpy (BF16 as its uint16 bits)."""
    start, header = plan.read_header(path)
    raw = path.read_bytes()[start:]
    types = {
        "F16": np.float16,
        "BF16": np.uint16,
        "F32": np.float32,
        "I32": np.int32,
        "I64": np.int64,
    }
    return {
        name: np.frombuffer(
            raw[m["data_offsets"][0] : m["data_offsets"][1]], types[m["dtype"]]
        ).reshape(m["shape"])
        for name, m in header.items()
    }


def _read_dir(d: Path) -> dict[str, np.ndarray]:
    out = {}
    for f in sorted(d.glob("*.safetensors")):
        out.update(_read(f))
    return out


def _within_rtn_bound(
    fp: dict[str, np.ndarray], q: dict[str, np.ndarray], group: int, bf16: bool = False
) -> int:
    """Each decoder linear dequantized lies within half a step (scale / 2) of its weight, or at the clipped end;
    returns how many linears were checked."""
    checked = 0
    for name, w in fp.items():
        if (prefix := int4.linear_prefix(name)) is None:
            assert np.array_equal(q[name], w), name  # embeddings, norms, lm_head: as they were
            continue
        w32 = int4.bf16_to_f32(w) if bf16 else w.astype(np.float32)
        scale = q[f"{prefix}.weight_scale"]
        assert scale.dtype == (np.uint16 if bf16 else np.float16)
        assert q[f"{prefix}.weight_shape"].tolist() == list(w.shape)
        deq = int4.dequantize(q[f"{prefix}.weight_packed"], scale, w.shape, group)
        s = np.repeat(int4.bf16_to_f32(scale) if bf16 else scale.astype(np.float32), group, axis=1)
        assert np.all(np.abs(deq - w32) <= s / 2 + 1e-6 + np.abs(w32) * 2**-8), prefix
        checked += 1
    return checked


# --- plan ---------------------------------------------------------------------------------------------------------


def test_plan_shows_a_quantize_step_instead_of_package(cli, tmp_path):
    recipe = _recipe(tmp_path, "{group_size: 64}")
    human = cli("plan", recipe)
    assert human.exit_code == 0, human.stderr
    assert "vllm.quantize" in human.stdout and "vllm.package" not in human.stdout
    (model,) = json.loads(cli("plan", recipe, "--json").stdout)["models"]
    (step,) = model["steps"]
    assert step["kind"] == "vllm.quantize"
    assert {k: step["params"][k] for k in ("scheme", "group_size", "format", "quantizer")} == {
        "scheme": "w4a16",
        "group_size": 64,
        "format": "pack-quantized",
        "quantizer": plan.QUANTIZER_VERSION,
    }
    memory = model["extras"]["memory_plan"]
    assert memory["quantization"] == "compressed-tensors"
    fp16 = (tmp_path / "ck/tiny-llama-fp16").glob("*.safetensors")
    assert memory["weight_bytes"] < sum(f.stat().st_size for f in fp16)


def test_the_cache_key_covers_inputs_group_size_and_the_quantizer_version(
    cli, tmp_path, monkeypatch
):
    recipe = _recipe(tmp_path)

    def key() -> str:
        r = cli("plan", recipe, "--json")
        assert r.exit_code == 0, r.stderr
        return json.loads(r.stdout)["models"][0]["steps"][0]["cache_key"]

    first = key()
    assert key() == first
    recipe.write_text(recipe.read_text().replace("group_size: 128", "group_size: 64"))
    by_group = key()
    monkeypatch.setattr(plan, "QUANTIZER_VERSION", plan.QUANTIZER_VERSION + 1)
    by_version = key()
    monkeypatch.undo()
    weights = tmp_path / "ck/tiny-llama-fp16/model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    by_input = key()
    assert len({first, by_group, by_version, by_input}) == 4


# --- run ------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("group", [32, 64, 128])
def test_build_packages_a_w4a16_checkpoint_within_the_rtn_bound(cli, tmp_path, group):
    recipe = _recipe(tmp_path, f"{{group_size: {group}}}")
    r = cli("build", recipe, "-o", tmp_path / "OUT")
    assert r.exit_code == 0, r.stderr
    model = tmp_path / "OUT/tq/1/model"
    assert sorted(p.name for p in model.iterdir()) == [
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    config = json.loads((model / "config.json").read_text())
    assert config["quantization_config"] == int4.quantization_config(group)
    assert (
        json.loads((tmp_path / "OUT/tq/1/model.json").read_text())["quantization"]
        == "compressed-tensors"
    )
    fp16 = tiny_llama.tensors(tiny_llama.CONFIG)
    assert _within_rtn_bound(fp16, _read(model / "model.safetensors"), group) == 7 * 2


def test_group_128_is_the_benchmarks_int4_checkpoint_byte_for_byte(tmp_path):
    """tiny_llama.py's tiny-llama-int4 (whose goldens were recorded on the H200) is what the step writes."""
    paths = tiny_llama.write_all(tmp_path / "ck")
    writer.quantize_checkpoint({p.name: p for p in paths["fp16"].iterdir()}, tmp_path / "q", 128)
    for f in sorted(paths["int4"].iterdir()):
        assert (tmp_path / "q" / f.name).read_bytes() == f.read_bytes(), f.name


def test_sharded_bf16_input_gives_sharded_deterministic_output(tmp_path, monkeypatch):
    """Input in two shards with an index, bf16: read through its bits; output cut into shards with an index; the
    same inputs give the same bytes, on one thread or four with many blocks per linear; each linear's three
    tensors stay in one shard."""
    fp16 = tiny_llama.tensors(tiny_llama.CONFIG)
    bf16 = {k: int4.f32_to_bf16(v.astype(np.float32)) for k, v in fp16.items()}
    src = tmp_path / "src"
    src.mkdir()
    names = sorted(bf16)
    half = {"a.safetensors": names[: len(names) // 2], "b.safetensors": names[len(names) // 2 :]}
    for fname, keys in half.items():
        _write_bf16(src / fname, {k: bf16[k] for k in keys})
    (src / plan.INDEX).write_text(
        json.dumps({"metadata": {}, "weight_map": {k: f for f, ks in half.items() for k in ks}})
    )
    (src / "config.json").write_text(json.dumps({**tiny_llama.CONFIG, "torch_dtype": "bfloat16"}))
    (src / "stray.safetensors").write_bytes(b"not in the index")
    (src / "original").mkdir()
    (src / "original/consolidated.00.pth").write_bytes(b"fp16 weights, another format")
    (src / "generation_config.json").write_text("{}")
    files = {p.relative_to(src).as_posix(): p for p in src.rglob("*") if p.is_file()}
    for out, threads, block in (("q1", "1", writer.BLOCK_ELEMENTS), ("q2", "4", 2048)):
        monkeypatch.setenv("TRITONBUILD_QUANTIZE_THREADS", threads)
        monkeypatch.setattr(writer, "BLOCK_ELEMENTS", block)
        writer.quantize_checkpoint(files, tmp_path / out, 64, shard_bytes=150_000)
    listing = sorted(p.name for p in (tmp_path / "q1").iterdir())
    shards = [n for n in listing if n.startswith("model-")]
    assert len(shards) > 1 and plan.INDEX in listing and "generation_config.json" in listing
    assert "stray.safetensors" not in listing and "original" not in listing
    for name in listing:
        assert (tmp_path / "q1" / name).read_bytes() == (tmp_path / "q2" / name).read_bytes(), name
    index = json.loads((tmp_path / "q1" / plan.INDEX).read_text())
    for shard in shards:
        assert (tmp_path / "q1" / shard).stat().st_size <= 150_000 + 4096 or len(
            plan.read_header(tmp_path / "q1" / shard)[1]
        ) <= 3  # one linear (or tensor) larger than a shard
        for name in plan.read_header(tmp_path / "q1" / shard)[1]:
            assert index["weight_map"][name] == shard
    q = _read_dir(tmp_path / "q1")
    assert index["metadata"]["total_size"] == sum(a.nbytes for a in q.values())
    assert _within_rtn_bound(bf16, q, 64, bf16=True) == 14


def _write_bf16(path: Path, arrays: dict[str, np.ndarray]) -> None:
    import struct

    header, offset, blobs = {}, 0, []
    for name in sorted(arrays):
        data = arrays[name].tobytes()
        header[name] = {
            "dtype": "BF16",
            "shape": list(arrays[name].shape),
            "data_offsets": [offset, offset + len(data)],
        }
        blobs.append(data)
        offset += len(data)
    head = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(head)) + head + b"".join(blobs))


def test_bf16_round_trip_rounds_to_nearest_even():
    x = np.array([1.0, -2.5, 3.14159, 1 + 2**-8, 1 + 3 * 2**-8, 0.0], dtype=np.float32)
    back = int4.bf16_to_f32(int4.f32_to_bf16(x))
    assert back.tolist() == [1.0, -2.5, 3.140625, 1.0, 1 + 4 * 2**-8, 0.0]


def test_a_second_build_is_a_cache_hit_without_quantizing(cli, tmp_path, monkeypatch):
    recipe = _recipe(tmp_path)
    first = cli("build", recipe, "-o", tmp_path / "A", "--json")
    assert first.exit_code == 0, first.stderr

    def refuse(*args, **kwargs):
        raise AssertionError("quantized again")

    monkeypatch.setattr(writer, "quantize_checkpoint", refuse)
    second = cli("build", recipe, "-o", tmp_path / "B", "--json")
    assert second.exit_code == 0, second.stderr
    (step,) = json.loads(second.stdout)["models"][0]["steps"]
    assert (step["kind"], step["status"]) == ("vllm.quantize", "cached")
    weights = "tq/1/model/model.safetensors"
    assert (tmp_path / "A" / weights).read_bytes() == (tmp_path / "B" / weights).read_bytes()


# --- disk: the output is stored once and linked into the repository -------------------------------------------------


def test_the_packaged_weights_are_the_stores_blob_not_a_copy(cli, tmp_path, monkeypatch):
    """The step's output moves into the store (no copy) and assemble links it into the version directory: a
    hardlink here (ext4: no reflinks) once blobs count as large (HASH_ON_HIT_MAX, 64 MiB, lowered for the tiny
    model); a reflink where the filesystem has them (then its own inode, sharing the extents)."""
    from tritonbuild.core import cas

    monkeypatch.setattr(cas, "HASH_ON_HIT_MAX", 0)
    cache = tmp_path / "cache"
    r = cli("--cache-dir", cache, "build", _recipe(tmp_path), "-o", tmp_path / "OUT", "--json")
    assert r.exit_code == 0, r.stderr
    weights = tmp_path / "OUT/tq/1/model/model.safetensors"
    manifest = json.loads((tmp_path / "OUT/tritonbuild-manifest.json").read_text())
    blob = cas.Store(cache).blob_path(manifest["files"]["tq/1/model/model.safetensors"]["sha256"])
    probe = tmp_path / "probe"
    reflinks = cas._reflink(blob, probe)
    if not reflinks:
        assert os.stat(weights).st_ino == os.stat(blob).st_ino and os.stat(blob).st_nlink == 2
    assert not list((cache / "tmp").glob("tb-*"))  # the step's workdir is gone


def test_put_file_moves_a_step_output_and_copies_a_shared_file(tmp_path):
    from tritonbuild.core.cas import Store

    store = Store(tmp_path / "cache")
    mine = tmp_path / "out.bin"
    mine.write_bytes(b"x" * 1000)
    ino = mine.stat().st_ino
    digest, size = store.put_file(mine, move=True)
    assert size == 1000 and not mine.exists() and store.blob_path(digest).stat().st_ino == ino
    shared = tmp_path / "shared.bin"
    shared.write_bytes(b"y" * 10)
    os.link(shared, tmp_path / "other-link")
    digest, _ = store.put_file(
        shared, move=True
    )  # a link to a file not ours: copied, left as it was
    assert (
        shared.exists()
        and shared.stat().st_mode & 0o200
        and store.blob_path(digest).stat().st_ino != shared.stat().st_ino
    )


# --- refusals -------------------------------------------------------------------------------------------------------


def test_an_already_quantized_checkpoint_is_a_plan_error_at_the_key(cli, tmp_path):
    recipe = _recipe(tmp_path, ckpt="ck/tiny-llama-int4")
    r = cli("build", recipe, "-o", tmp_path / "OUT")
    assert r.exit_code == 4
    assert (
        f"{recipe}:5" in r.stderr
        and "already has a quantization_config (quant_method 'compressed-tensors')" in r.stderr
    )
    assert not (tmp_path / "OUT").exists()


def test_a_group_size_that_does_not_divide_a_linear_is_a_plan_error_naming_it(cli, tmp_path):
    cfg = {
        **tiny_llama.CONFIG,
        "hidden_size": 192,
        "num_attention_heads": 3,
        "num_key_value_heads": 1,
    }
    ck = tmp_path / "odd"
    tiny_llama._write(ck, cfg, tiny_llama.tensors(cfg))
    recipe = _recipe(tmp_path, ckpt="odd")
    r = cli("plan", recipe)
    assert r.exit_code == 4
    assert (
        f"{recipe}:5" in r.stderr
        and "model.layers.0.mlp.gate_proj: in_features 192 is not a multiple of group_size 128"
        in r.stderr
        and "(and 9 more)" in r.stderr
    )
    assert cli("plan", _recipe(tmp_path, "{group_size: 64}", ckpt="odd")).exit_code == 0


def test_group_sizes_split_over_tensor_parallel_ranks():
    header = {
        "model.layers.0.mlp.down_proj.weight": {"dtype": "F16", "shape": [256, 384]},
        "model.layers.0.self_attn.q_proj.weight": {"dtype": "F16", "shape": [256, 256]},
    }
    assert plan.problems({"m": header}, 128, tp=1) == []
    assert plan.problems({"m": header}, 64, tp=2) == []
    (problem,) = plan.problems({"m": header}, 128, tp=2)
    assert problem.startswith(
        "model.layers.0.mlp.down_proj: in_features 384 split over tensor_parallel_size 2"
    )
    moe = {"model.layers.0.block_sparse_moe.gate.weight": {"dtype": "F16", "shape": [8, 256]}}
    assert (
        "none of the linears this quantizer knows"
        in plan.problems({"m": {**header, **moe}}, 128)[0]
    )


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (
            "engine_args: {quantization: awq}\n",
            "engine_args.quantization is 'awq' but quantize writes a compressed-tensors checkpoint",
        ),
        ("", "group_size"),
    ],
)
def test_recipe_errors_carry_file_and_line(cli, tmp_path, edit, words):
    recipe = _recipe(tmp_path, "{group_size: 48}" if not edit else "{group_size: 128}", extra=edit)
    r = cli("plan", recipe)
    assert r.exit_code == 3 and f"{recipe}:" in r.stderr and words in r.stderr, r.stderr


def test_engine_args_quantization_compressed_tensors_goes_with_quantize(cli, tmp_path):
    recipe = _recipe(tmp_path, extra="engine_args: {quantization: compressed-tensors}\n")
    assert cli("plan", recipe).exit_code == 0


# --- upstream -------------------------------------------------------------------------------------------------------


def test_the_packer_follows_the_recorded_facts():
    facts = FACTS["pack_to_int32"]
    q = np.arange(-8, 8, dtype=np.int8).reshape(2, 8)
    packed = int4.pack_int4(q).view(np.uint32)
    assert facts["bit_shift_of_element_j"] == f"{facts['num_bits']} * j"
    for row in range(2):
        want = sum(
            (int(v) + facts["offset"]) << (facts["num_bits"] * j) for j, v in enumerate(q[row])
        )
        assert int(packed[row, 0]) == want
    assert packed.dtype.itemsize * 8 // facts["num_bits"] == facts["values_per_int32"]
    assert int4.pack_int4(q).dtype == np.dtype(facts["packed_dtype"])
    qp = FACTS["qparams"]
    w = np.array([[1.5, -3.0, 0.2, 7.49] * 8], dtype=np.float16)
    vals, scale = int4.quantize_int4(w, 32)
    assert float(scale[0, 0]) == pytest.approx(7.49 / qp["scale_divisor"], rel=1e-3)
    assert vals.min() >= qp["q_min"] and vals.max() <= qp["q_max"]


def test_the_checkpoint_follows_the_recorded_facts():
    config = int4.quantization_config(128)
    qc, reads = FACTS["quantization_config"], FACTS["vllm_reads"]
    assert set(config) - {"quantization_status"} <= set(qc["config_fields"]) | {
        "quantization_status"
    }
    assert (config["quant_method"], config["format"], config["quantization_status"]) == (
        qc["quant_method"],
        qc["format"],
        qc["quantization_status"],
    )
    assert set(reads["config_keys"]) <= set(config)
    (group,) = config["config_groups"].values()
    assert set(reads["group_keys"]) <= set(group) and group["targets"] == reads["targets"]
    assert config["ignore"] == reads["ignore"] and group["format"] == reads["wna16_needs"]["format"]
    assert {k: group["weights"][k] for k in qc["w4a16_weights"]} == qc["w4a16_weights"]
    assert group["input_activations"] is reads["wna16_needs"]["input_activations"]
    tensors = int4.int4_tensors(
        {"model.layers.0.mlp.up_proj.weight": np.ones((8, 128), np.float16)}
    )
    assert sorted(tensors) == sorted(
        f"model.layers.0.mlp.up_proj.{t}" for t in FACTS["compressor"]["tensors"]
    )
    assert tensors["model.layers.0.mlp.up_proj.weight_shape"].dtype == np.dtype(
        FACTS["compressor"]["weight_shape_dtype"]
    )


def test_the_packer_equals_compressed_tensors_pack_to_int32():
    pytest.importorskip("compressed_tensors")
    torch = pytest.importorskip("torch")
    from compressed_tensors.compressors.pack_quantized.helpers import (
        pack_to_int32,
        unpack_from_int32,
    )

    rng = np.random.default_rng(0)
    q = rng.integers(-8, 8, size=(64, 256), dtype=np.int8)
    theirs = pack_to_int32(torch.from_numpy(q), 4).numpy()
    assert np.array_equal(int4.pack_int4(q), theirs)
    back = unpack_from_int32(torch.from_numpy(theirs), 4, torch.Size(q.shape)).numpy()
    assert np.array_equal(int4.unpack_int4(theirs, q.shape), back)
