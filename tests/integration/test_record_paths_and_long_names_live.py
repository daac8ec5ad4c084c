"""Against the real tritonserver: 'verify --record' writes goldens only beside the recipe that was
built, and the longest model name we accept (NAME_MAX, 255 bytes) loads and answers."""

from __future__ import annotations

import json

import pytest

from tests.conftest import PY_MODEL, PY_RECIPE
from tests.serving import TRAFFIC_GAP_S

pytestmark = [pytest.mark.triton, pytest.mark.slow]


def test_record_refuses_a_manifest_pointing_goldens_elsewhere(cli, py_recipe, tmp_path):
    out = tmp_path / "OUT"
    assert cli("build", py_recipe, "-o", out).exit_code == 0
    manifest_path = out / "tritonbuild-manifest.json"
    manifest = json.loads(manifest_path.read_text())
    outside = tmp_path.parent / f"{tmp_path.name}-outside.npz"
    manifest["models"][0]["goldens_source"] = str(outside)
    manifest_path.write_text(json.dumps(manifest))
    r = cli("verify", out, "--record")
    assert r.exit_code == 6 and "refusing to write there" in r.stderr, r.stdout + r.stderr
    assert not outside.exists() and not outside.with_name(outside.name + ".sha256").exists()


def test_record_refuses_when_the_recipe_changed_since_the_build(cli, py_recipe, tmp_path):
    out = tmp_path / "OUT"
    assert cli("build", py_recipe, "-o", out).exit_code == 0
    py_recipe.write_text(py_recipe.read_text().replace("repeats: 2", "repeats: 3"))
    r = cli("verify", out, "--record")
    assert r.exit_code == 6 and "changed since the build" in r.stderr, r.stdout + r.stderr
    assert not (tmp_path / "goldens" / "doubler.npz").exists()


def test_a_255_byte_model_name_loads_and_answers_in_tritonserver(cli, write, tmp_path):
    name = "m" * 255
    write("model.py", PY_MODEL)
    recipe = write(
        "long.yaml",
        PY_RECIPE.replace("name: doubler", f"name: {name}").replace(
            "goldens/doubler.npz", "goldens/long.npz"
        ),
    )
    out = tmp_path / "OUT"
    assert cli("build", recipe, "-o", out).exit_code == 0
    r = cli("verify", out, "--record", "--json")
    assert r.exit_code == 0, r.stdout + r.stderr
    (m,) = json.loads(r.stdout)["models"]
    assert m["name"] == name and m["loaded"] and m["path"] == "live-embedded", m


def test_rebuilding_out_under_a_polling_tritonserver_never_fails_a_request(
    cli, py_recipe, tmp_path, write
):
    """OUT is exchanged atomically: a Triton polling it keeps serving through rebuilds (each with a changed model,
    so Triton reloads it) and ends on the last build's answer."""
    import threading
    import time
    import urllib.request

    from tritonbuild.server.embedded import EmbeddedServer

    def infer(url: str) -> list[float]:
        body = json.dumps(
            {"inputs": [{"name": "X", "shape": [1, 3], "datatype": "FP32", "data": [1, 2, 3]}]}
        )
        req = urllib.request.Request(
            f"http://{url}/v2/models/doubler/infer", data=body.encode(), method="POST"
        )
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read())["outputs"][0]["data"]

    out = tmp_path / "OUT"
    assert cli("build", py_recipe, "-o", out).exit_code == 0
    seen, failures, stop = [], [], threading.Event()
    with EmbeddedServer(out, control="poll", poll_secs=1) as server:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                infer(server.http_url)
                break
            except Exception:  # noqa: BLE001 - still loading
                time.sleep(0.2)

        def client():
            while not stop.wait(TRAFFIC_GAP_S):
                try:
                    seen.append(infer(server.http_url))
                except Exception as e:  # noqa: BLE001
                    failures.append(repr(e))

        thread = threading.Thread(target=client)
        thread.start()
        try:
            for offset in ("2", "3"):
                write("model.py", PY_MODEL.replace("x * 2 + 1", f"x * 2 + {offset}"))
                assert cli("build", py_recipe, "-o", out).exit_code == 0
                time.sleep(3)  # a few polls: Triton sees the new tree and reloads
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not (seen and seen[-1] == [5.0, 7.0, 9.0]):
                time.sleep(0.2)
        finally:
            stop.set()
            thread.join()
    assert failures == [], failures[:3]
    assert len(seen) > 20 and seen[-1] == [5.0, 7.0, 9.0]
