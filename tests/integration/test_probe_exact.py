"""The golden probe (builder/publish/probe.py) against a real tritonserver, on the tensors a JSON
answer cannot carry exactly: an INT64 above 2**53 (a JSON number read as a double loses it) and a
BYTES element that is not UTF-8 (JSON text cannot hold it), stored as the project stores BYTES
goldens (core/npz.py: no pickle). Both must pass when right and fail when one bit is off."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from tests.conftest import ROOT
from tritonbuild.core.npz import write_npz

PROBE = ROOT / "builder" / "publish" / "probe.py"
BIG = 2**53 + 1  # the first int64 a double cannot hold
CONFIG = textwrap.dedent("""
    name: "echo"
    backend: "python"
    max_batch_size: 0
    input [
      { name: "N", data_type: TYPE_INT64, dims: [ 2 ] },
      { name: "S", data_type: TYPE_STRING, dims: [ 2 ] }
    ]
    output [
      { name: "N_OUT", data_type: TYPE_INT64, dims: [ 2 ] },
      { name: "S_OUT", data_type: TYPE_STRING, dims: [ 2 ] }
    ]
""")
MODEL = textwrap.dedent("""
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def execute(self, requests):
            responses = []
            for request in requests:
                n = pb_utils.get_input_tensor_by_name(request, "N").as_numpy()
                s = pb_utils.get_input_tensor_by_name(request, "S").as_numpy()
                responses.append(pb_utils.InferenceResponse(
                    [pb_utils.Tensor("N_OUT", n), pb_utils.Tensor("S_OUT", s)]
                ))
            return responses
""")


def _golden(n_out: int, s_out: bytes) -> dict:
    s = np.array([b"\xff\x00raw", b""], dtype=object)
    return {
        "input.0.N": np.array([BIG, -BIG], dtype=np.int64),
        "input.0.S": s,
        "output.0.N_OUT": np.array([n_out, -BIG], dtype=np.int64),
        "output.0.S_OUT": np.array([s_out, b""], dtype=object),
    }


def _probe(folder, url) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(PROBE), "--folder", str(folder), "--url", url],
        capture_output=True,
        text=True,
        cwd="/",
    )


# the probe names why an answer differs (issue 41); these goldens carry no fingerprint
UNKNOWN = "recorded where: unknown (goldens older than fingerprints)"


@pytest.mark.triton
@pytest.mark.slow
def test_int64_beyond_doubles_and_non_utf8_bytes_are_compared_bit_for_bit(tmp_path):
    from tritonbuild.server.embedded import EmbeddedServer

    repository = tmp_path / "repository"
    (repository / "echo" / "1").mkdir(parents=True)
    (repository / "echo" / "config.pbtxt").write_text(CONFIG)
    (repository / "echo" / "1" / "model.py").write_text(MODEL)
    folder = tmp_path / "probe"
    folder.mkdir()
    (folder / "expect.json").write_text(
        json.dumps({"models": [{"name": "echo", "goldens": {"1": "golden.npz"}}]})
    )
    with EmbeddedServer(repository, control="none") as server:
        url = f"http://{server.http_url}"
        write_npz(folder / "golden.npz", _golden(BIG, b"\xff\x00raw"))
        right = _probe(folder, url)
        assert (right.returncode, right.stderr) == (0, ""), right.stderr
        write_npz(folder / "golden.npz", _golden(BIG - 1, b"\xff\x00raw"))  # what a double reads
        off = _probe(folder, url)
        assert (off.returncode, off.stderr) == (
            1,
            f"not ready: echo v1: output N_OUT differs from its golden ({UNKNOWN})\n",
        )
        write_npz(folder / "golden.npz", _golden(BIG, b"\xfe\x00raw"))
        off = _probe(folder, url)
        assert (off.returncode, off.stderr) == (
            1,
            f"not ready: echo v1: output S_OUT differs from its golden ({UNKNOWN})\n",
        )
