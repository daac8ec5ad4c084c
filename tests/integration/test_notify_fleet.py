"""publish --notify in a fleet where one server cannot run one model: real embedded tritonservers in explicit
mode on one published target; the server that refuses the model is reported, keeps its readiness (strict, as
Triton defaults), and neither this publish nor the next fails for it."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import pytest

from tests.conftest import PY_MODEL, PY_RECIPE
from tritonbuild import api
from tritonbuild.server.embedded import EmbeddedServer

pytestmark = [pytest.mark.triton, pytest.mark.slow]
# A model the server started with REFUSE_PICKY=1 cannot run (as a GPU-only model on a CPU server).
PICKY_MODEL = PY_MODEL.replace(
    "class TritonPythonModel:\n",
    """class TritonPythonModel:
    def initialize(self, args):
        import os

        if os.environ.get("REFUSE_PICKY"):
            raise RuntimeError("picky cannot run on this server")

""",
)


def _ready(server: EmbeddedServer, path: str = "/v2/health/ready") -> int:
    try:
        with urllib.request.urlopen(f"http://{server.http_url}{path}", timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as e:
        return e.code


def _picky_repo(cli, tmp_path):
    src = tmp_path / "picky-src"
    src.mkdir()
    (src / "model.py").write_text(PICKY_MODEL)
    (src / "picky.yaml").write_text(
        PY_RECIPE.replace("name: doubler", "name: picky")
        .replace("goldens/doubler.npz", "goldens/picky.npz")
        .lstrip()
    )
    out = tmp_path / "picky-repo"
    assert cli("build", src / "picky.yaml", "-o", out).exit_code == 0
    return out


def test_a_server_that_cannot_run_a_model_is_reported_and_keeps_its_readiness(
    cli, doubler_repo, tmp_path
):
    """Three servers: 'runs' serves everything; 'refuses' cannot run picky and runs without strict readiness (as
    the manifests' pods); 'mapped' cannot either, keeps Triton's strict readiness, and is mapped to doubler."""
    target = f"file://{tmp_path}/pub"
    receipt = api.publish(doubler_repo(1, verify=False), target, skip_verify=True)
    picky = _picky_repo(cli, tmp_path)
    refuse = {"REFUSE_PICKY": "1"}
    with (
        EmbeddedServer(receipt.triton_url, env=refuse, strict_readiness=False) as refuses,
        EmbeddedServer(receipt.triton_url) as runs,
        EmbeddedServer(receipt.triton_url, env=refuse) as mapped,
    ):
        for server in (refuses, runs, mapped):
            server.load("doubler")
        urls = [
            f"http://{refuses.http_url}",
            f"http://{runs.http_url}",
            f"http://{mapped.http_url}",
        ]
        notify = ["--notify", urls[0], "--notify", urls[1], "--notify", f"{urls[2]}#doubler"]
        r = cli("publish", picky, target, "--skip-verify", *notify, "--json")
        assert r.exit_code == 0, (
            r.stdout + r.stderr
        )  # failed with exit 7: one server could not run picky
        notified = {(n["server"], n["model"]): n for n in json.loads(r.stdout)["notified"]}
        assert notified[(urls[1], "picky")]["ok"]
        refused = notified[(urls[0], "picky")]
        assert (
            refused["cannot_run"]
            and not refused["ok"]
            and "cannot run 'picky'" in refused["message"]
        )
        assert "picky cannot run on this server" in refused["message"]  # Triton's own words
        assert notified[(urls[2], "picky")]["skipped"]  # mapped to doubler: never asked
        assert [_ready(server) for server in (refuses, runs, mapped)] == [200, 200, 200]
        assert _ready(refuses, "/v2/models/doubler/ready") == 200
        # the next publish (doubler v2) does not ask 'refuses' for picky again, and succeeds
        r = cli(
            "publish",
            doubler_repo(2, factor="3", verify=False),
            target,
            "--skip-verify",
            *notify,
            "--json",
        )
        assert r.exit_code == 0, r.stdout + r.stderr
        again = {(n["server"], n["model"]): n for n in json.loads(r.stdout)["notified"]}
        assert all(again[(url, "doubler")]["ok"] for url in urls)
        assert (
            again[(urls[0], "picky")]["skipped"]
            and "last load failed here" in again[(urls[0], "picky")]["message"]
        )
        # strict readiness drops for a moment while version 1 unloads (UNLOADING is not READY); then it is back
        assert [_settled_ready(server) for server in (refuses, runs, mapped)] == [200, 200, 200]


def _settled_ready(server: EmbeddedServer, within_s: float = 15.0) -> int:
    deadline = time.monotonic() + within_s
    while (status := _ready(server)) != 200 and time.monotonic() < deadline:
        time.sleep(0.2)
    return status


def test_a_publish_never_flips_readiness_over_a_model_it_did_not_change(
    cli, doubler_repo, tmp_path
):
    """One server, Triton's strict readiness, serving doubler; picky (which it cannot run) is published to the
    same target and never loaded there. Publishing doubler v2 with --notify loads doubler alone: picky was asked
    too (published, not READY), refused, the publish failed with exit 7 and readiness went 200 -> 400."""
    target = f"file://{tmp_path}/pub"
    receipt = api.publish(doubler_repo(1, verify=False), target, skip_verify=True)
    api.publish(_picky_repo(cli, tmp_path), target, skip_verify=True)
    with EmbeddedServer(receipt.triton_url, env={"REFUSE_PICKY": "1"}) as server:
        server.load("doubler")
        assert _ready(server) == 200
        url = f"http://{server.http_url}"
        r = cli(
            "publish",
            doubler_repo(2, factor="3", verify=False),
            target,
            "--skip-verify",
            "--notify",
            url,
            "--json",
        )
        assert r.exit_code == 0, r.stdout + r.stderr
        notified = json.loads(r.stdout)["notified"]
        assert [(n["model"], n["ok"]) for n in notified] == [("doubler", True)]
        assert _settled_ready(server) == 200
        assert _ready(server, "/v2/models/picky/ready") != 200  # never loaded: nothing asked of it
