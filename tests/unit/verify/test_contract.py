"""A model's answers against the outputs its config declares (verify/contract.py), checked before goldens are
compared or recorded (issue 43: float64 answers for a TYPE_FP32 output were recorded as goldens)."""

from __future__ import annotations

import numpy as np

from tests.unit.verify.manifests import manifest_model
from tritonbuild.verify.answers import check_model
from tritonbuild.verify.contract import violations

OUT = [{"name": "Y", "dtype": "fp32", "dims": [3]}]
IN = [{"name": "X", "dtype": "fp32", "dims": [3]}]


class _Runner:
    """Answers every request with what `answer` makes of its X."""

    def __init__(self, answer):
        self.answer = answer

    def infer(self, sample):
        return {"Y": self.answer(sample["X"])}

    def infer_concurrent(self, samples):
        return [self.infer(sample) for sample in samples]


def test_dtype_and_shape_against_the_declared_outputs():
    model = manifest_model("m", inputs=IN, outputs=OUT, max_batch_size=4)
    x = [{"X": np.zeros((2, 3), np.float32)}]
    assert violations(model, x, [{"Y": np.zeros((2, 3), np.float32)}]) == []
    (found,) = violations(model, x, [{"Y": np.zeros((2, 3), np.float64)}])
    assert "dtype float64" in found and "TYPE_FP32" in found and "'Y'" in found
    (found,) = violations(model, x, [{"Y": np.zeros((2, 4), np.float32)}])
    assert "shape [2, 4]" in found and "dims ['batch', 3]" in found
    (found,) = violations(
        model, x, [{"Y": np.zeros((1, 3), np.float32)}]
    )  # not the request's batch
    assert "shape [1, 3]" in found
    unbatched = manifest_model("m", inputs=IN, outputs=[{**OUT[0], "dims": [-1]}])
    assert (
        violations(unbatched, [{"X": np.zeros(3, np.float32)}], [{"Y": np.zeros(7, np.float32)}])
        == []
    )
    (found,) = violations(
        unbatched, [{"X": np.zeros(3, np.float32)}], [{"Y": np.zeros((1, 7), np.float32)}]
    )
    assert "dims [-1]" in found
    strings = manifest_model("m", outputs=[{"name": "S", "dtype": "bytes", "dims": [1]}])
    assert violations(strings, [{}], [{"S": np.array([b"a"], dtype=np.object_)}]) == []


def test_record_force_never_records_a_broken_contract(tmp_path):
    model = manifest_model("m", inputs=IN, outputs=OUT, max_batch_size=4, verify={"samples": 2})
    result = check_model(
        model, _Runner(lambda x: (x * 2).astype(np.float64)), tmp_path, record=True, force=True
    )
    assert result.passed is False and result.cause == "contract"
    assert result.recording is None and result.goldens_refused
    assert "--force included" in result.notes[0] and "TYPE_FP32" in result.notes[0]
    fine = check_model(model, _Runner(lambda x: x * 2), tmp_path, record=True, force=True)
    assert fine.passed and fine.recording is not None and fine.cause is None
    recording = fine.recording
    assert len(recording.answers) == len(recording.inputs) == 2
    assert all(
        np.array_equal(answer["Y"], sample["X"] * 2)
        for answer, sample in zip(recording.answers, recording.inputs, strict=True)
    )


def test_the_config_pbtxt_is_the_contract(tmp_path):
    """The declared outputs are read from the model's config.pbtxt (what Triton tells clients), not only from the
    manifest: a manifest edited to say fp64 does not make float64 answers for a TYPE_FP32 output right."""
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.pbtxt").write_text(
        'name: "m"\nbackend: "python"\nmax_batch_size: 4\n'
        'input [{ name: "X" data_type: TYPE_FP32 dims: [3] }]\n'
        'output [{ name: "Y" data_type: TYPE_FP32 dims: [3] }]\n'
    )
    edited = manifest_model("m", inputs=IN, outputs=[{**OUT[0], "dtype": "fp64"}], max_batch_size=4)
    x = [{"X": np.zeros((1, 3), np.float32)}]
    assert violations(edited, x, [{"Y": np.zeros((1, 3), np.float64)}]) == []  # the manifest alone
    (found,) = violations(edited, x, [{"Y": np.zeros((1, 3), np.float64)}], tmp_path)
    assert "TYPE_FP32" in found
