"""adopt keeps what Triton keeps, checked against Triton itself: a hand-written repository (add_sub with a labels
file on OUTPUT0 and no instance_group, and an ensemble over it) is loaded by the embedded tritonserver as it is,
then adopted, built, verified, and loaded again: the served configs (GET v2/models/NAME/config) agree on every
field of the original's, the labels file included, and Triton's classification extension answers with the labels
from the built repository."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.contracts import repositories
from tests.contracts.facts import load
from tritonbuild.server.embedded import EmbeddedServer
from tritonbuild.triton.client import Server

pytestmark = pytest.mark.triton

LABELS = "zero\none\ntwo\nthree\n"
MODELS = ("add_sub", "add_sub_twice")


def write_classifier_repository(root: Path) -> Path:
    """add_sub whose OUTPUT0 has label_filename (beside config.pbtxt, as Triton reads it: core model.cc) and whose
    config has no instance_group, and the add_sub_twice ensemble over it."""
    model = repositories.write_add_sub(root)
    config = (model / "config.pbtxt").read_text()
    assert "instance_group {" in config  # the recorded add_sub has one: removed here
    config = re.sub(r"instance_group \{[^}]*\}\n", "", config).replace(
        'name: "OUTPUT0"', 'name: "OUTPUT0"\n  label_filename: "classes.txt"'
    )
    assert "instance_group" not in config and "backend" in config
    (model / "config.pbtxt").write_text(config)
    (model / "classes.txt").write_text(LABELS)
    repositories.write_add_sub_ensemble(root)
    return root


def served_configs(repository: Path) -> dict[str, dict]:
    with EmbeddedServer(repository) as server:
        for name in MODELS:
            server.load(name)
        with Server(f"http://{server.http_url}", timeout=30) as client:
            configs = {name: client.model_config(name) for name in MODELS}
        top2 = _classify(server.http_url)
    return configs | {"_classification": top2}


def _visible_gpus() -> int:
    """The GPUs the server sees (Triton's KIND_AUTO resolves to KIND_GPU over all of them when there is one)."""
    if shutil.which("nvidia-smi") is None:
        return 0
    listed = subprocess.run(
        ["nvidia-smi", "-L"], capture_output=True, text=True, check=False
    ).stdout
    return sum(line.startswith("GPU ") for line in listed.splitlines())


def _classify(url: str) -> list:
    body = {
        "inputs": [
            {"name": "INPUT0", "shape": [4], "datatype": "FP32", "data": [1, 5, 2, 0]},
            {"name": "INPUT1", "shape": [4], "datatype": "FP32", "data": [0, 0, 2, 9]},
        ],
        "outputs": [{"name": "OUTPUT0", "parameters": {"classification": 2}}],
    }
    req = urllib.request.Request(
        f"http://{url}/v2/models/add_sub/infer", data=json.dumps(body).encode(), method="POST"
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())["outputs"][0]["data"]


def test_adopted_repository_is_served_as_the_original(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    repo = write_classifier_repository(tmp_path / "models")
    original = served_configs(repo)
    # sums 1, 5, 4, 9: the top two are index 3 and 1, with the labels file's names
    assert original["_classification"] == ["9.000000:3:three", "5.000000:1:one"]

    r = cli("adopt", repo, "-o", tmp_path / "recipes", "--json")
    assert r.exit_code == 0, r.stdout + r.stderr
    rows = {row["name"]: row for row in json.loads(r.stdout)["recipes"]}
    assert json.loads(r.stdout)["goldens"] == {"add_sub": True, "add_sub_twice": True}
    # what Triton will do with the absent instance_group is said, not decided by adopt
    (note,) = rows["add_sub"]["notes"]
    assert "no instance_group: left to Triton" in note and "KIND_GPU" in note
    spec = yaml.safe_load((tmp_path / "recipes" / "add_sub.yaml").read_text())
    assert spec["instances"] == [] and spec["labels"] == {"OUTPUT0": "add_sub/classes.txt"}
    r = cli("adopt", repo, "-o", tmp_path / "recipes-text")
    assert "note: no instance_group: left to Triton" in r.stdout

    out = tmp_path / "OUT"
    r = cli("build", tmp_path / "recipes", "-o", out)
    assert r.exit_code == 0, r.stderr
    assert (out / "add_sub" / "classes.txt").read_text() == LABELS
    r = cli("verify", out, "--json")
    assert r.exit_code == 0, r.stdout
    assert all(model["passed"] for model in json.loads(r.stdout)["models"])

    built = served_configs(out)
    assert built["_classification"] == original["_classification"]
    for name in MODELS:
        for field, value in original[name].items():
            assert built[name].get(field) == value, (name, field, built[name].get(field))
    # Triton's own default where the config had none (facts: the group is named after the model; KIND_GPU over
    # every visible GPU, else KIND_CPU); the ensemble gets none at all
    facts = load("triton_instance_groups")
    (group,) = built["add_sub"]["instance_group"]
    gpus = _visible_gpus()
    assert group["name"] == "add_sub" and group["count"] == facts["count"]["default"]
    assert (group["kind"], len(group.get("gpus", []))) == (
        ("KIND_GPU", gpus) if gpus else ("KIND_CPU", 0)
    )
    assert not built["add_sub_twice"].get("instance_group")
    assert built["add_sub"]["output"][0]["label_filename"] == "classes.txt"
