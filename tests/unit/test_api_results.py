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


def test_cache_gc_and_verify_results_hold_what_the_store_reports(tmp_path):
    from tritonbuild.api import maintenance
    from tritonbuild.core.cas import Store

    blob = (
        tmp_path / "cache" / "blobs" / "ab" / ("ab" + "0" * 62)
    )  # a blob whose name is not its hash
    blob.parent.mkdir(parents=True)
    blob.write_bytes(b"not what the name says")
    checked = maintenance.cache_verify(tmp_path / "cache")
    assert (checked.blobs_checked, checked.corrupt_blobs) == (1, [blob.name])
    assert set(checked.to_dict()) == {"blobs_checked", "corrupt_blobs", "evicted_records"}
    collected = maintenance.cache_gc(0, tmp_path / "cache")
    assert collected.evicted_records == [] and collected.kept_records == 0
    assert collected.to_dict() == Store(tmp_path / "cache").gc(0)  # nothing left to free: the same


def test_embedded_environment_result_is_the_summary_it_replaces(tmp_path, monkeypatch):
    from tritonbuild.api import maintenance
    from tritonbuild.server import toolenv

    monkeypatch.setenv("TRITONBUILD_ENVS_DIR", str(tmp_path / "envs"))
    monkeypatch.setattr(toolenv, "current", lambda *_: None)
    shown = maintenance.embedded_environment(make=False)
    assert shown.path is None and not shown.made and shown.envs_dir == str(tmp_path / "envs")
    assert shown.to_dict() == toolenv.summary(make=False)  # no target_image key without one
    assert "target_image" not in shown.to_dict()


def test_embedded_prune_result_is_what_envprune_did(tmp_path, monkeypatch):
    from tritonbuild.api import maintenance

    monkeypatch.setenv("TRITONBUILD_ENVS_DIR", str(tmp_path / "envs"))
    (tmp_path / "envs" / "mirror-py3.10-aaaaaaaaaaaa").mkdir(parents=True)  # never finished
    pruned = maintenance.embedded_prune(30, dry_run=True)
    assert pruned.to_dict() == {
        "envs_dir": str(tmp_path / "envs"),
        "removed": ["mirror-py3.10-aaaaaaaaaaaa"],
        "freed_bytes": 0,
        "kept": 0,
        "dry_run": True,
    }


class _Server:
    """What Serving.start asks of an EmbeddedServer, without a tritonserver."""

    http_url, grpc_url, metrics_url = "127.0.0.1:8000", "127.0.0.1:8001", "127.0.0.1:8002/metrics"
    version, repository, strict_readiness, log_path = "2.51.0", "/r", True, "/tmp/s.log"

    def __init__(self, control):
        self.control, self.loaded, self.started, self.checked = control, [], False, []
        self.startup_models: list[str] = []
        self.launcher = _Launcher()

    def start(self):
        # tritonserver loads --load-model's models before it listens: what start() was asked to load
        self.started = True
        self.loaded = list(self.startup_models)

    def check_loaded(self, models):
        self.checked = list(models)

    def describe(self):
        return "tritonserver 2.51.0 (embedded)"


class _Launcher:
    def python_side(self):
        return {"ran": "3.12", "own": False, "target": None}


def test_serve_ready_loads_only_under_explicit_control_and_prints_the_old_keys():
    from tritonbuild.api.serving import Serving

    explicit, polling = _Server("explicit"), _Server("poll")
    ready = Serving(explicit, ["a", "b"], ["llm"]).start()
    # loaded as the server starts, then checked in its repository index
    assert explicit.started and explicit.loaded == ["a", "b"] and explicit.checked == ["a", "b"]
    assert ready.http == "http://127.0.0.1:8000" and ready.not_loaded == ["llm"]
    assert set(ready.to_dict()) == {
        "http",
        "grpc",
        "metrics",
        "tritonserver",
        "version",
        "repository",
        "loaded",
        "not_loaded",
        "model_control_mode",
        "strict_readiness",
        "log",
        "python_side",
    }
    assert Serving(polling, ["a"]).start().model_control_mode == "poll" and polling.loaded == []
    assert polling.checked == []
