"""The perf_analyzer --input-data JSON `export perf-data` writes (builder/verify/interop.py), read back the way
perf_analyzer's parser reads it (facts/perf_analyzer.json), and, where perf_analyzer runs, by perf_analyzer itself
against the embedded tritonserver: the goldens pass its output validation and an altered one fails it."""

from __future__ import annotations

import base64
import json
import os
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import EXAMPLES
from tests.contracts.facts import load
from tritonbuild import api
from tritonbuild.core.npz import read_npz, write_npz
from tritonbuild.errors import UsageError
from tritonbuild.repository.manifest import read_repository
from tritonbuild.verify.goldens import from_npz_arrays, to_npz_arrays
from tritonbuild.verify.interop import encode_tensor, perf_analyzer_data

FACTS = load("perf_analyzer")
MODEL = "feature-normalizer"


@pytest.fixture
def built(tmp_path) -> Path:
    out = tmp_path / "out"
    api.build_repository([EXAMPLES / f"{MODEL}.yaml"], out)
    return out


def _decode(entry: dict) -> tuple[bytes, list[int] | None]:
    """One tensor of an entry as perf_analyzer's ReadTensorData takes it: (raw bytes, shape given or None)."""
    if "b64" in entry:
        return base64.b64decode(entry["b64"]), entry.get("shape")
    assert "content" in entry, "an object entry without b64 must carry 'content'"
    return base64.b64decode(entry["content"]["b64"]), entry.get("shape")


def test_goldens_export_as_batch1_entries_with_every_output_as_validation(built):
    document, summary = perf_analyzer_data(built, MODEL)
    assert FACTS["document"]["required"] in document and FACTS["document"]["optional"] in document
    assert len(document["data"]) == len(document["validation_data"]) == summary["requests"] == 4
    inputs, outputs = from_npz_arrays(read_npz(built / summary["goldens"]))
    manifest = {m.name: m for m in read_repository(built, UsageError).models}[MODEL]
    assert (
        FACTS["shape"]["excludes_batch_dim_when_max_batch_size_gt_0"]
        and manifest.max_batch_size > 0
    )
    for i, (entry, expected) in enumerate(
        zip(document["data"], document["validation_data"], strict=True)
    ):
        assert set(entry) == {
            t.name for t in manifest.inputs
        }  # unknown names are refused, missing ones too
        assert set(expected) == {t.name for t in manifest.outputs}  # outputs are never optional
        raw, shape = _decode(entry["RAW"])
        assert shape == manifest.inputs[0].dims == list(inputs[i]["RAW"].shape[1:])
        assert raw == inputs[i]["RAW"][0].astype("<f4").tobytes()
        raw, _ = _decode(expected["NORMALIZED"])
        assert raw == outputs[i]["NORMALIZED"][0].astype("<f4").tobytes()
    assert f"-b {FACTS['validation']['use_batch']}" in summary["perf_analyzer"]


def test_a_golden_sample_of_several_rows_becomes_that_many_batch1_entries(built):
    spec = read_repository(built, UsageError).models[0]
    rows = np.arange(3 * 16, dtype=np.float32).reshape(3, 16)
    write_npz(built / spec.goldens, to_npz_arrays([{"RAW": rows}], [{"NORMALIZED": -rows}]))
    document, summary = perf_analyzer_data(built, MODEL)
    assert summary["samples"] == 1 and summary["requests"] == len(document["data"]) == 3
    for r in range(3):
        assert _decode(document["data"][r]["RAW"]) == (rows[r].tobytes(), [16])
        assert _decode(document["validation_data"][r]["NORMALIZED"])[0] == (-rows[r]).tobytes()


def test_bytes_elements_carry_perf_analyzers_four_byte_length():
    assert FACTS["bytes"]["element"].startswith("4-byte length")
    raw = base64.b64decode(
        encode_tensor(np.array([[b"ab", b""], [b"\x00xyz", b"q"]], dtype=np.object_), "bytes")
    )
    elements, at = [], 0
    while at < len(raw):
        (n,) = struct.unpack_from("<I", raw, at)
        elements.append(raw[at + 4 : at + 4 + n])
        at += 4 + n
    assert elements == [b"ab", b"", b"\x00xyz", b"q"]


@pytest.mark.parametrize("dtype", ["fp16", "fp64", "int64", "uint16", "bool"])
def test_numeric_tensors_are_little_endian_row_major(dtype):
    from tritonbuild.verify.goldens import NP_DTYPES

    arr = (
        np.arange(6).reshape(2, 3) % 2 if dtype == "bool" else np.arange(6).reshape(2, 3)
    ).astype(NP_DTYPES[dtype])
    big = arr.astype(
        arr.dtype.newbyteorder(">")
    )  # the encoding must not depend on the array's byte order
    assert base64.b64decode(encode_tensor(big, dtype)) == arr.astype(
        arr.dtype.newbyteorder("<")
    ).tobytes(order="C")


def test_a_model_without_goldens_is_a_usage_error_and_writes_nothing(built, tmp_path, cli):
    (built / read_repository(built, UsageError).models[0].goldens).unlink()
    out = tmp_path / "data.json"
    r = cli("export", "perf-data", built, MODEL, "-o", out)
    assert r.exit_code == UsageError.exit_code, r.output
    assert "has no goldens" in r.stderr and "verify" in r.stderr and "Traceback" not in r.stderr
    assert not out.exists()
    r = cli("export", "perf-data", built, "nope", "-o", out, "--json")
    assert r.exit_code == UsageError.exit_code and json.loads(r.stdout)["error"] == "usage"


def test_a_variable_output_cannot_be_validated_so_it_asks_for_inputs_only(
    built, tmp_path, cli, monkeypatch
):
    manifest = read_repository(built, UsageError)
    model = manifest.models[0]
    variable = model.model_copy(
        update={"outputs": [model.outputs[0].model_copy(update={"dims": [-1]})]}
    )
    import tritonbuild.verify.interop as interop

    monkeypatch.setattr(interop, "_model", lambda root, name: variable)
    with pytest.raises(UsageError, match="variable dimension") as e:
        perf_analyzer_data(built, MODEL)
    assert "--no-validation" in e.value.hint
    document, summary = perf_analyzer_data(built, MODEL, validation=False)
    assert "validation_data" not in document and summary["requests"] == 4


def _perf_analyzer() -> list[str] | None:
    """perf_analyzer from $TRITONBUILD_PERF_ANALYZER or PATH, when it starts here."""
    found = os.environ.get("TRITONBUILD_PERF_ANALYZER") or shutil.which("perf_analyzer")
    if not found:
        return None
    try:
        ok = subprocess.run([found, "--version"], capture_output=True, timeout=30).returncode == 0
    except OSError:
        return None
    return [found] if ok else None


@pytest.mark.triton
def test_perf_analyzer_checks_the_goldens_and_fails_an_altered_one(built, tmp_path):
    from tritonbuild.server.embedded import EmbeddedServer

    pa = _perf_analyzer()
    if pa is None:
        pytest.skip(
            "perf_analyzer does not run here (set TRITONBUILD_PERF_ANALYZER; ci/perf_analyzer.sh makes one)"
        )
    good = tmp_path / "data.json"
    api.export_perf_data(built, MODEL, good)
    bad = tmp_path / "bad.json"
    document = json.loads(good.read_text())
    raw = bytearray(base64.b64decode(document["validation_data"][2]["NORMALIZED"]["b64"]))
    raw[0] ^= 1  # one bit of one expected value
    document["validation_data"][2]["NORMALIZED"]["b64"] = base64.b64encode(bytes(raw)).decode()
    bad.write_text(json.dumps(document))
    with EmbeddedServer(built) as server:
        server.load(MODEL)
        runs = {}
        for name, data in (("good", good), ("bad", bad)):
            runs[name] = subprocess.run(
                [
                    *pa,
                    "-m",
                    MODEL,
                    "-i",
                    "grpc",
                    "-u",
                    server.grpc_url,
                    "--input-data",
                    str(data),
                    "-b",
                    "1",
                    "--request-count",
                    "64",
                    "--concurrency-range",
                    "2",
                ],
                capture_output=True,
                text=True,
                timeout=180,
            )
    assert runs["good"].returncode == 0, runs["good"].stdout + runs["good"].stderr
    assert runs["bad"].returncode != 0
    assert "Output doesn't match expected output" in runs["bad"].stdout + runs["bad"].stderr


MIXED_MODEL = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            text = pb_utils.get_input_tensor_by_name(r, "TEXT").as_numpy()
            x = pb_utils.get_input_tensor_by_name(r, "X").as_numpy()
            echo = np.array([t[::-1] + b"!" for t in text.reshape(-1)], dtype=np.object_).reshape(text.shape)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("ECHO", echo),
                                                   pb_utils.Tensor("Y", (x * 3).astype(np.float16))]))
        return out
"""

MIXED_RECIPE = """
name: mixed
version: 1
backend: python
source: {path: model.py}
max_batch_size: 0
inputs: [{name: TEXT, dtype: bytes, dims: [2]}, {name: X, dtype: fp16, dims: [2, 3]}]
outputs: [{name: ECHO, dtype: bytes, dims: [2]}, {name: Y, dtype: fp16, dims: [2, 3]}]
verify: {goldens: goldens/mixed.npz, samples: 3}
"""


@pytest.mark.triton
def test_perf_analyzer_checks_bytes_and_fp16_of_a_model_that_does_not_batch(write, tmp_path):
    from tritonbuild.server.embedded import EmbeddedServer

    pa = _perf_analyzer()
    if pa is None:
        pytest.skip(
            "perf_analyzer does not run here (set TRITONBUILD_PERF_ANALYZER; ci/perf_analyzer.sh makes one)"
        )
    write("model.py", MIXED_MODEL)
    # NOTE: goldens written here, not by 'verify --record': it cannot store BYTES goldens yet (core/npz.py
    # refuses object arrays). Whether they are the model's answers is what perf_analyzer checks below.
    rng = np.random.default_rng(0)
    inputs = [
        {
            "TEXT": np.array([b"a\x00b%d" % i, b"\xff" * (i + 1)]),
            "X": rng.random((2, 3)).astype(np.float16),
        }
        for i in range(3)
    ]
    outputs = [
        {
            "ECHO": np.array([t[::-1] + b"!" for t in sample["TEXT"]]),
            "Y": (sample["X"] * 3).astype(np.float16),
        }
        for sample in inputs
    ]
    (tmp_path / "goldens").mkdir()
    write_npz(tmp_path / "goldens" / "mixed.npz", to_npz_arrays(inputs, outputs))
    out = tmp_path / "out"
    api.build_repository([write("mixed.yaml", MIXED_RECIPE)], out)
    data = tmp_path / "data.json"
    summary = api.export_perf_data(out, "mixed", data)
    document = json.loads(data.read_text())
    assert summary.requests == 3 and "-b" not in summary.perf_analyzer
    assert document["data"][0]["X"]["shape"] == [
        2,
        3,
    ]  # no batch dimension to leave out: the full shape
    with EmbeddedServer(out) as server:
        server.load("mixed")
        run = subprocess.run(
            [
                *pa,
                "-m",
                "mixed",
                "-i",
                "grpc",
                "-u",
                server.grpc_url,
                "--input-data",
                str(data),
                "--request-count",
                "30",
            ],
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert run.returncode == 0, run.stdout + run.stderr
        echo = bytearray(base64.b64decode(document["validation_data"][1]["ECHO"]["b64"]))
        echo[-1] ^= 1  # the last byte of the second string
        document["validation_data"][1]["ECHO"]["b64"] = base64.b64encode(bytes(echo)).decode()
        data.write_text(json.dumps(document))
        run = subprocess.run(
            [
                *pa,
                "-m",
                "mixed",
                "-i",
                "grpc",
                "-u",
                server.grpc_url,
                "--input-data",
                str(data),
                "--request-count",
                "30",
            ],
            capture_output=True,
            text=True,
            timeout=180,
        )
    assert run.returncode != 0 and "Output doesn't match expected output" in run.stdout + run.stderr
