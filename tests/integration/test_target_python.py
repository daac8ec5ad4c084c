"""verify --triton-image: the embedded tritonserver's Python side runs the target image's Python, so
a model.py that image's Python refuses fails here as it would there, and one it accepts passes.
Needs the 3.10 and 3.12 environments (ci/test.sh makes them where pyenv has those Pythons:
`tritonbuild embedded install --triton-image 24.10-py3` and `25.01`); skipped without them."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

from tests.serving import serve_json, stop_serve
from tritonbuild.server import toolenv

MISSING = [minor for minor in ("3.10", "3.12") if toolenv.available(minor) is None]
pytestmark = [
    pytest.mark.triton,
    pytest.mark.slow,
    pytest.mark.skipif(
        bool(MISSING),
        reason=f"no embedded environment for Python {', '.join(MISSING)}: tritonbuild embedded "
        "install --triton-image 24.10-py3 / 25.01-py3",
    ),
]

MODEL = """
import numpy as np
import triton_python_backend_utils as pb_utils

{syntax}


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "X").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", (x * 2).astype(np.float32))]))
        return out
"""
CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 4
input [{{ name: "X" data_type: TYPE_FP32 dims: [3] }}]
output [{{ name: "Y" data_type: TYPE_FP32 dims: [3] }}]
"""
# PEP 695 (Python 3.12): a SyntaxError on 3.10 and 3.11
TYPE_ALIAS = "type Scale = float"
# PEP 654 (Python 3.11): a SyntaxError on 3.10
EXCEPT_STAR = textwrap.dedent(
    """
    def _grouped():
        try:
            pass
        except* ValueError:
            pass
    """
)
RECIPE = """
name: grouped
version: 1
backend: python
source: {path: model.py}
max_batch_size: 4
inputs: [{name: X, dtype: fp32, dims: [3]}]
outputs: [{name: Y, dtype: fp32, dims: [3]}]
verify: {repeats: 1, samples: 2}
"""


def _verify(cli, *args):
    r = cli("verify", *map(str, args), "--json")
    return r.exit_code, json.loads(r.stdout)


def test_a_312_only_model_fails_for_a_24xx_image_and_passes_for_25xx(cli, tmp_path):
    model = tmp_path / "repo" / "aliased"
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text(CONFIG.format(name="aliased"))
    (model / "1" / "model.py").write_text(MODEL.format(syntax=TYPE_ALIAS))
    code, report = _verify(cli, tmp_path / "repo", "--triton-image", "24.10-py3")
    (row,) = [check for check in report["static"] if check["check"] == "triton-core"]
    assert code == 6 and not row["ok"] and "SyntaxError" in row["detail"], row
    side = report["python_side"]
    assert (side["ran"], side["target"], side["matches"]) == ("3.10", "3.10", True)
    assert side["target_image"] == "nvcr.io/nvidia/tritonserver:24.10-py3"
    code, report = _verify(cli, tmp_path / "repo", "--triton-image", "25.01")
    (row,) = [check for check in report["static"] if check["check"] == "triton-core"]
    assert code == 0 and row["ok"] and "initialize() ran" in row["detail"], row
    assert (report["python_side"]["ran"], report["python_side"]["target"]) == ("3.12", "3.12")
    r = cli("verify", tmp_path / "repo", "--triton-image", "25.01")
    assert "Python side: Python 3.12, as the target image" in r.stdout, r.stdout
    proc, info = serve_json(tmp_path / "repo", "--triton-image", "25.01")
    try:
        assert info["loaded"] == ["aliased"] and info["python_side"]["ran"] == "3.12", info
    finally:
        stop_serve(proc)


@pytest.mark.skipif(
    sys.version_info < (3, 11), reason="the build compiles model.py with 3.11+ syntax"
)
def test_a_built_model_this_python_accepts_fails_for_the_image_whose_python_refuses_it(
    cli, write, tmp_path
):
    """A 3.11 except* built and verified on 3.11 passes (today's default); the 24.10 image's Python
    3.10 refuses it at load, and so does verify with that target; the 25.01 image's 3.12 takes it.
    """
    write("model.py", MODEL.format(syntax=EXCEPT_STAR))
    out = tmp_path / "OUT"
    assert cli("build", write("grouped.yaml", RECIPE), "-o", out).exit_code == 0
    assert cli("verify", out, "--record").exit_code == 0
    code, report = _verify(cli, out, "--triton-image", "nvcr.io/nvidia/tritonserver:24.10-py3")
    (model,) = report["models"]
    assert code == 6 and not model["loaded"] and "SyntaxError" in model["load_error"], model
    assert report["python_side"]["ran"] == "3.10"
    code, report = _verify(cli, out, "--triton-image", "25.01-py3")
    assert code == 0 and report["models"][0]["passed"], report["models"]
    assert report["python_side"]["ran"] == "3.12"


IMPORTING = """
import numpy as np
import tokenizers
import triton_python_backend_utils as pb_utils
import yaml


class TritonPythonModel:
    def initialize(self, args):
        self.k = yaml.safe_load("k: 2")["k"]
        self.version = tokenizers.__version__

    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "X").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", (x * self.k).astype(np.float32))]))
        return out
"""


@pytest.mark.parametrize("image, minor", [("24.10-py3", "3.10"), ("25.01", "3.12")])
def test_a_model_importing_packages_installed_here_loads_on_the_images_python(
    cli, tmp_path, image, minor
):
    """On another minor the stub cannot read this environment's packages: what the model imports
    (tokenizers, PyYAML) is installed for that Python at the versions installed here, beside the
    environment; before, the model failed to load on 'No module named tokenizers'."""
    from importlib import metadata

    model = tmp_path / "repo" / "tok"
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text(CONFIG.format(name="tok"))
    (model / "1" / "model.py").write_text(IMPORTING)
    code, report = _verify(cli, tmp_path / "repo", "--triton-image", image)
    (row,) = [check for check in report["static"] if check["check"] == "triton-core"]
    assert code == 0 and row["ok"] and "initialize() ran" in row["detail"], row
    assert report["python_side"]["ran"] == minor
    shown = json.loads(
        cli(
            "embedded", "show", "--triton-image", image, "--for", tmp_path / "repo", "--json"
        ).stdout
    )
    assert shown["python_minor"] == minor and shown["mirror_path"], shown
    assert f"tokenizers=={metadata.version('tokenizers')}" in shown["mirrored"]
    assert f"pyyaml=={metadata.version('pyyaml')}" in shown["mirrored"]


def test_serve_a_published_target_on_the_images_python_with_what_its_models_import(
    cli, write, tmp_path
):
    """serve URL --triton-image: the models' Python files are read from the target, and what they
    import here is installed for the image's Python, as for a local repository."""
    write("model.py", IMPORTING)
    out = tmp_path / "OUT"
    assert cli("build", write("grouped.yaml", RECIPE), "-o", out).exit_code == 0
    assert cli("verify", out, "--record").exit_code == 0
    published = tmp_path / "target"
    assert cli("publish", out, f"file://{published}").exit_code == 0
    proc, info = serve_json(f"file://{published}", "--triton-image", "25.01")
    try:
        assert info["loaded"] == ["grouped"] and info["python_side"]["ran"] == "3.12", info
    finally:
        stop_serve(proc)
