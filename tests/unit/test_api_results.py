"""The api's typed results (core/results.py) print as the dicts they replace: same keys, a key that applied only
sometimes still left out when it does not apply, nested results turned into dicts too."""

from __future__ import annotations

import json

from tritonbuild.cli.app import Application
from tritonbuild.plan.matrix import MatrixEntry
from tritonbuild.publish.inspect import TargetCheck, TargetListing, TargetModel
from tritonbuild.publish.rollback import RollbackResult
from tritonbuild.repository.adopt import AdoptResult
from tritonbuild.server.status import ModelStatus, ServerStatus


def test_keys_as_before_and_conditional_keys_only_when_they_apply():
    assert AdoptResult(recipes=[{"name": "m"}]).to_dict() == {
        "recipes": [{"name": "m"}],
        "goldens": None,
    }
    recorded = AdoptResult(
        recipes=[], goldens={"m": True}, recorded_by={"m": "embedded"}, passed=True
    )
    assert set(recorded.to_dict()) == {"recipes", "goldens", "recorded_by", "passed"}
    rolled = RollbackResult(
        target="file:///t",
        model="m",
        live=1,
        previous=2,
        config_restored="m/config-v1.pbtxt",
        interface_changed=False,
        notified=[],
    )
    assert "lock_broken" not in rolled.to_dict()
    assert set(TargetCheck(target="t", objects_checked=3, problems=[], passed=True).to_dict()) == {
        "target",
        "objects_checked",
        "problems",
        "passed",
    }
    assert set(
        MatrixEntry("r.yaml", "m", "python", "cpu", "cpu", ["python.package"]).to_dict()
    ) == {"recipe", "model", "backend", "gpu", "runner", "steps"}


def test_nested_results_print_as_json(capsys):
    status = ServerStatus(
        server="http://h:8000",
        live=True,
        ready=True,
        version="2.51.0",
        extensions=[],
        models=[ModelStatus(name="m", version="1", state="UNAVAILABLE", reason="x", metrics={})],
        metrics="http://h:8002/metrics",
        notes=[],
    )
    listing = TargetListing(
        target="t",
        triton_url="t",
        manifest_sha256=None,
        lock=None,
        models=[
            TargetModel(
                name="m",
                live=1,
                serving=[1],
                complete=[1],
                present=[1],
                notes=[],
                published_from=None,
                verification=None,
            )
        ],
    )
    Application().emit_json({"status": status, "ls": listing})
    printed = json.loads(capsys.readouterr().out)
    assert printed["status"]["models"] == [
        {"name": "m", "version": "1", "state": "UNAVAILABLE", "reason": "x", "metrics": {}}
    ]  # no config: the model is not READY
    assert printed["ls"]["models"][0]["serving"] == [1] and printed["ls"]["lock"] is None
