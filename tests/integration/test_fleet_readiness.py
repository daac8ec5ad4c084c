"""A fleet on one publish target: three tritonservers started with the command line deploy-snippets writes
(the embedded tritonserver stands in for the stock image's), each judged by the manifest's own readiness probe,
under traffic through a publish and a rollback."""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
import threading
import time
import types
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.integration.test_publish_s3 import _expected, _infer
from tests.serving import TRAFFIC_GAP_S, serve_json, stop_serve
from tritonbuild import api
from tritonbuild.server.embedded import EmbeddedServer

pytestmark = [pytest.mark.s3, pytest.mark.slow, pytest.mark.triton]
OWN_FLAGS = ("--model-repository=", "--http-port=", "--grpc-port=", "--metrics-port=")


class ManifestServer(EmbeddedServer):
    """The embedded tritonserver run with the Deployment's own args; only the ports are the test's."""

    def __init__(self, args: list[str], log_path: Path):
        (repository,) = [
            arg.split("=", 1)[1] for arg in args if arg.startswith("--model-repository=")
        ]
        super().__init__(repository, log_path=log_path)
        self.manifest_args = [arg for arg in args if not arg.startswith(OWN_FLAGS)]

    def argv(self) -> list[str]:
        return self.launcher.command(
            self.repository,
            self._tmp,
            (self.http_port, self.grpc_port, self.metrics_port),
            self.manifest_args,
        )


def _deploy(
    repo: Path, target: str, tmp_path: Path, control: str = "poll"
) -> tuple[list[str], Path]:
    """(tritonserver's args in the Deployment, a folder holding the ConfigMap as the kubelet mounts it)."""
    path, _, left_out, _, _ = api.deploy_snippets(
        repo,
        tmp_path / "deploy",
        name="fleet",
        image="unused",
        target=target,
        replicas=3,
        poll_secs=1,
        control=control,
        endpoint=os.environ["AWS_ENDPOINT_URL"],  # the servers run here: moto's loopback is theirs
    )
    assert left_out == []
    docs = {doc["kind"]: doc for doc in yaml.safe_load_all(path.read_text())}
    (container,) = docs["Deployment"]["spec"]["template"]["spec"]["containers"]
    folder = tmp_path / "probe"
    folder.mkdir()
    for key, text in docs["ConfigMap"]["data"].items():
        (folder / key).write_text(text)
    for key, data in docs["ConfigMap"].get("binaryData", {}).items():
        (folder / key).write_bytes(base64.b64decode(data))
    return container["args"], folder


def _status(server: EmbeddedServer, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://{server.http_url}{path}", timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return 0


def _serving(servers, version: str) -> bool:
    try:
        return all(_infer(server.http_url, [1, 2, 3])[0] == version for server in servers)
    except OSError:
        return False


def _converge(servers, version: str, since: float) -> float:
    deadline = since + 60
    while time.monotonic() < deadline:
        if _serving(servers, version):
            return time.monotonic() - since
        time.sleep(0.1)
    raise AssertionError(f"the servers did not all serve version {version} within 60 s")


def test_a_publish_never_takes_the_whole_fleet_out(doubler_repo, bucket, tmp_path, record_property):
    from tritonbuild.publish.probe import check

    target = f"s3://{bucket}/fleet"
    factors = {"1": 2.0, "2": 3.0, "3": 4.0}
    v1 = doubler_repo(1, factor="2")
    v2 = doubler_repo(2, factor="3", extra=b"x" * (48 << 20))
    v3 = doubler_repo(3, factor="4")
    api.publish(v1, target)
    args, folder = _deploy(v1, target, tmp_path)
    servers = [ManifestServer(args, tmp_path / f"server{i}.log") for i in range(3)]
    answers, failures, samples, probes, stop = [], [], [], [], threading.Event()
    try:
        for server in servers:
            server.start()
        deadline = time.monotonic() + 60
        while any(check(folder, f"http://{server.http_url}", 5) for server in servers):
            assert time.monotonic() < deadline, "the probe never passed"
            time.sleep(0.2)
        # the probe as the kubelet runs it: python3 with the mounted files, exit 0
        probe = subprocess.run(
            [
                sys.executable,
                str(folder / "probe.py"),
                "--folder",
                str(folder),
                "--url",
                f"http://{servers[0].http_url}",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert probe.returncode == 0, probe.stderr

        def traffic(server):  # a request every TRAFFIC_GAP_S at most, per server
            while not stop.wait(TRAFFIC_GAP_S):
                try:
                    answers.append(_infer(server.http_url, [1, 2, 3]))
                except Exception as e:  # noqa: BLE001 - every failure is counted
                    failures.append(repr(e))

        def sample():  # every 100 ms: the server's readiness and the model's, on each server
            while not stop.is_set():
                samples.append(
                    [
                        (
                            _status(server, "/v2/health/ready"),
                            _status(server, "/v2/models/doubler/ready"),
                        )
                        for server in servers
                    ]
                )
                time.sleep(0.1)

        def probe_all():  # the manifest's probe, as often as it runs
            while not stop.is_set():
                probes.append(
                    [not check(folder, f"http://{server.http_url}", 5) for server in servers]
                )

        threads = [threading.Thread(target=traffic, args=(server,)) for server in servers]
        threads += [threading.Thread(target=sample), threading.Thread(target=probe_all)]
        for thread in threads:
            thread.start()
        started = time.monotonic()
        api.publish(v2, target)
        to_v2 = _converge(servers, "2", started)
        started = time.monotonic()
        api.rollback(target, "doubler", 1)
        to_v1 = _converge(servers, "1", started)
        started = time.monotonic()
        # prunes version 2 (before the switch; version 1, live, waits for the next publish) while the
        # servers poll; at once: every server has loaded the rollback's version 1 (converged above), so
        # none is copying doubler/ (the grace after a switch is for a publisher that cannot know that)
        with pytest.MonkeyPatch.context() as env:
            env.setenv("TRITONBUILD_PRUNE_GRACE_S", "0")
            receipt = api.publish(v3, target, keep=1)
        assert [(a.version, a.action) for a in receipt.actions if a.action == "prune"] == [
            (2, "prune")
        ]
        to_v3 = _converge(servers, "3", started)
        time.sleep(3.0)
        stop.set()
        for thread in threads:
            thread.join()
    finally:
        stop.set()
        for server in servers:
            server.cleanup()
    convergence = {
        "publish_s": round(to_v2, 1),
        "rollback_s": round(to_v1, 1),
        "pruning_publish_s": round(to_v3, 1),
    }
    record_property("convergence", convergence)  # in the junit report; -s shows it on stderr too
    sys.stderr.write(
        f"fleet converged {convergence}; {len(answers)} answers, {len(samples)} readiness samples, "
        f"{len(probes)} probe rounds\n"
    )
    assert failures == [] and len(answers) > 100
    assert all(y == _expected(factors[version]) for version, y in answers)  # never a mixed answer
    assert len(samples) > 50 and len(probes) > 10
    answered = [
        server for row in samples for server, _ in row if server
    ]  # 0: no answer in 5 s (a loaded CI)
    assert len(answered) > 0.9 * 3 * len(samples)
    assert set(answered) == {200}  # strict readiness off: it never answered not-ready
    assert not any(all(model not in (200, 0) for _, model in row) for row in samples), (
        "the model was down everywhere"
    )
    assert not any(not any(row) for row in probes), "every pod's probe failed at once"
    logs = [server.log_path.read_text() for server in servers]
    for (
        log
    ) in logs:  # each version loaded once per server per switch: no reload while a version uploads
        loads = _loads(log, "doubler")
        assert [loads.count((version, "full")) for version in (1, 2, 3)] == [2, 1, 1], log
        assert (
            _errors_after_start(
                log,
                pruned=("doubler/2",),  # its goldens and stored config inside it
            )
            == []
        )


def _loads(log: str, model: str) -> list[tuple[int, str]]:
    """Each 'loading: MODEL:V' of a tritonserver log, in order, as (V, 'full') where the model's instances
    started before its 'successfully loaded' (a load) or (V, 'update') where none did: a served version that
    was not modified, polled again (a new version folder uploading beside it), is updated in place, with no
    new instance and no time unready (facts/kubernetes.json poll_side_files: model_lifecycle.cc 488-505)."""
    pending: list[list] = []
    done: list[tuple[int, str]] = []
    for line in log.splitlines():
        if (loading := re.search(rf'"loading: {re.escape(model)}:(\d+)"', line)) is not None:
            pending.append([int(loading.group(1)), "update"])
        elif f"TRITONBACKEND_ModelInstanceInitialize: {model}_" in line and pending:
            pending[-1][1] = "full"
        elif f"successfully loaded '{model}'" in line and pending:
            done.append(tuple(pending.pop(0)))
    return done


def test_a_served_versions_in_place_update_is_not_a_load():
    """Lines of a run's server log (2026-12-06, at b0b3640): the start's load, an update in place while
    version 2 uploaded, version 2's load, the rollback's load of version 1."""
    log = "\n".join(
        f'I1206 21:{t} 16939 {line}'
        for t, line in (
            ("31:49.245143", 'model_lifecycle.cc:472] "loading: doubler:1"'),
            ("31:50.854052", 'python_be.cc:2249] "TRITONBACKEND_ModelInstanceInitialize: doubler_0_0 (CPU device 0)"'),
            ("31:51.105771", "model_lifecycle.cc:839] \"successfully loaded 'doubler'\""),
            ("32:06.876113", 'model_lifecycle.cc:472] "loading: doubler:1"'),
            ("32:06.876712", "model_lifecycle.cc:839] \"successfully loaded 'doubler'\""),
            ("32:09.777121", 'model_lifecycle.cc:472] "loading: doubler:2"'),
            ("32:12.790043", 'python_be.cc:2249] "TRITONBACKEND_ModelInstanceInitialize: doubler_0_0 (CPU device 0)"'),
            ("32:13.322440", "model_lifecycle.cc:839] \"successfully loaded 'doubler'\""),
            ("32:14.746037", "model_lifecycle.cc:624] \"successfully unloaded 'doubler' version 1\""),
            ("32:19.227371", 'model_lifecycle.cc:472] "loading: doubler:1"'),
            ("32:22.986537", 'python_be.cc:2249] "TRITONBACKEND_ModelInstanceInitialize: doubler_0_0 (CPU device 0)"'),
            ("32:23.154399", "model_lifecycle.cc:839] \"successfully loaded 'doubler'\""),
        )
    )  # fmt: skip
    assert _loads(log, "doubler") == [(1, "full"), (1, "update"), (2, "full"), (1, "full")]


def _errors_after_start(log: str, pruned: tuple[str, ...]) -> list[str]:
    """Triton's ERROR lines once the models loaded, less the one a prune can cause: the poll lists a model
    directory, the prune deletes an entry, and stating it fails; core's GetPathModifiedTime then counts the
    entry as not modified (facts/kubernetes.json poll_prune_race), so nothing reloads."""
    started = log.index("successfully loaded")
    race = "Failed to determine modification time for"
    return [
        line
        for line in log[started:].splitlines()
        if re.match(r"E\d{4} ", line)
        and not (
            race in line and any(re.search(f"/{re.escape(path)}['/]", line) for path in pruned)
        )
    ]


@pytest.mark.parametrize("strict", [True, False])
def test_serve_strict_readiness_switch_while_a_publish_loads(doubler_repo, tmp_path, strict):
    """serve --no-strict-readiness: Triton's default (strict) reports the whole server not-ready while a
    published version loads, though the model keeps answering; without it the server stays ready."""
    target = f"file://{tmp_path}/pub"
    api.publish(doubler_repo(1, verify=False), target, skip_verify=True)
    proc, info = serve_json(
        target,
        "--model-control-mode",
        "poll",
        "--repository-poll-secs",
        "1",
        "--log-file",
        tmp_path / "server.log",
        *([] if strict else ["--no-strict-readiness"]),
    )
    samples, stop, sampler = [], threading.Event(), None
    try:
        assert info["strict_readiness"] is strict
        server = types.SimpleNamespace(http_url=info["http"].removeprefix("http://"))
        deadline = time.monotonic() + 60
        while _status(server, "/v2/models/doubler/ready") != 200:
            assert time.monotonic() < deadline, "doubler never became ready"
            time.sleep(0.2)

        def sample():
            while not stop.is_set():
                samples.append(
                    (
                        _status(server, "/v2/health/ready"),
                        _status(server, "/v2/models/doubler/ready"),
                    )
                )
                time.sleep(0.05)

        sampler = threading.Thread(target=sample)
        sampler.start()
        started = time.monotonic()
        api.publish(doubler_repo(2, factor="3", verify=False), target, skip_verify=True)
        _converge([server], "2", started)
        time.sleep(0.5)
    finally:
        # NOTE: the sampler stops before the server does: a sample in flight when the server was told to
        # stop read 0 for the model (a clean clone's run: {0, 200} at this test's end, not during the publish)
        stop.set()
        if sampler is not None:
            sampler.join()
        stop_serve(proc)
    server_ready = {status for status, _ in samples}
    assert len(samples) > 20
    assert {model for _, model in samples} == {200}  # the model answers throughout, strict or not
    assert server_ready == ({200, 400} if strict else {200}), server_ready
    # a local target: each version loads once (the Python stub wrote __pycache__/ into the version directory it
    # imported model.py from, and Triton's next poll saw the model modified and loaded it again)
    log = (tmp_path / "server.log").read_text()
    assert log.count("TRITONBACKEND_ModelInstanceInitialize: doubler_") == 2, log[
        -3000:
    ]  # version 1, version 2


def test_the_explicit_mode_manifest_loads_everything_at_start_and_follows_notify(
    doubler_repo, bucket, tmp_path
):
    """The explicit-mode Deployment's args (--load-model=*) on the embedded tritonserver: every model loads at
    start, the probe passes, and publish --notify moves it to the new version while the probe keeps passing."""
    from tritonbuild.publish.probe import check

    target = f"s3://{bucket}/explicit"
    v1 = doubler_repo(1, factor="2")
    api.publish(v1, target)
    args, folder = _deploy(v1, target, tmp_path, control="explicit")
    assert "--load-model=*" in args and "--model-control-mode=explicit" in args
    with ManifestServer(args, tmp_path / "server.log") as server:
        url = f"http://{server.http_url}"
        deadline = time.monotonic() + 60
        while problems := check(folder, url, 5):
            assert time.monotonic() < deadline, problems
            time.sleep(0.2)
        _a_wrong_golden_makes_it_not_ready(folder, url)
        receipt = api.publish(doubler_repo(2, factor="3"), target, notify=(url,))
        assert [(n["model"], n["ok"]) for n in receipt.notified] == [("doubler", True)]
        assert _infer(server.http_url, [1, 2, 3]) == ("2", _expected(3.0))
        assert (
            check(folder, url, 5) == []
        )  # version 2 has no golden in the ConfigMap: readiness only


def _a_wrong_golden_makes_it_not_ready(folder: Path, url: str) -> None:
    """The probe compares bit for bit: a golden output one ulp off makes the pod not ready; restored, ready."""
    import numpy as np

    from tritonbuild.core.npz import read_npz, write_npz
    from tritonbuild.publish.probe import check

    (golden,) = folder.glob("golden-*.npz")
    kept = golden.read_bytes()
    arrays = read_npz(golden)
    key = next(key for key in arrays if key.startswith("output.0."))
    arrays[key] = np.nextafter(arrays[key], np.float32(np.inf))
    write_npz(golden, arrays)
    assert any("differs from its golden" in problem for problem in check(folder, url, 5))
    golden.write_bytes(kept)
    assert check(folder, url, 5) == []
