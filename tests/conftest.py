from __future__ import annotations

import json
import math
import os
import resource
import shutil
import socket
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from tritonbuild.server import toolenv

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "recipes" / "examples"
# Bytecode (issue 44 item 7). Where PYTHONDONTWRITEBYTECODE is set (this machine's environment sets it), no
# interpreter the suite starts writes a .pyc, so each compiles all it imports from source again: a torch export
# step took ~10 CPU seconds instead of ~4, `import torch` ~4 instead of ~2. The suite's processes (xdist workers,
# CLI runs, build steps, verify workers) keep their bytecode under PYTHONPYCACHEPREFIX instead, in
# .tritonbuild-pycache/ (ignored by git): never beside a source file, so no directory a test reads or a user's
# repository gets a __pycache__/. A prefix the caller gives is kept; processes that ignore the environment (-I, -E,
# Triton's Python stub) are as they were.
if os.environ.get("PYTHONDONTWRITEBYTECODE") and not os.environ.get("PYTHONPYCACHEPREFIX"):
    os.environ.pop("PYTHONDONTWRITEBYTECODE")
    os.environ["PYTHONPYCACHEPREFIX"] = sys.pycache_prefix = str(ROOT / ".tritonbuild-pycache")
    sys.dont_write_bytecode = False
# the example LLM recipe's keys for the engine route's own models (BLS, pre/postprocessing instances), which the
# LLM-API route refuses (backends/tensorrtllm/llmapi/keys.py): gone where a test turns it into an LLM-API recipe
ENGINE_ROUTE_SERVING = (
    "  bls: true\n",
    "  instances: {preprocessing: 2, postprocessing: 2, bls: 1}\n",
)


def llmapi_recipe(text: str) -> str:
    """The example LLM recipe's text without its engine-route serving keys (see ENGINE_ROUTE_SERVING)."""
    for line in ENGINE_ROUTE_SERVING:
        assert line in text, line
        text = text.replace(line, "")
    return text


def route_recipe(text: str) -> str:
    """llmapi_recipe where the text asks for runtime: pytorch, the text as it is otherwise."""
    return llmapi_recipe(text) if "\nruntime: pytorch" in text else text


# The embedded server's environment (server/toolenv.py) is found where it was made before the run
# (ci/test.sh: tritonbuild embedded install), whatever build cache each test sets: tests never make it.
os.environ.setdefault("TRITONBUILD_ENVS_DIR", str(toolenv.envs_dir()))


def _triton_available() -> str | None:
    if toolenv.available() is None:
        return f"the embedded server's environment is not made in {toolenv.envs_dir()}: tritonbuild embedded install"
    return None


def pytest_collection_modifyitems(config, items):
    reasons = {
        "triton": _triton_available(),
        "s3": None if shutil.which("moto_server") else "moto_server is not installed",
        "gpu": None if shutil.which("nvidia-smi") else "no NVIDIA GPU here",
    }
    for item in items:
        for marker, reason in reasons.items():
            if reason and marker in item.keywords:
                item.add_marker(pytest.mark.skip(reason=reason))
    # The heaviest scopes first (a module, or a class for its methods: what --dist loadscope hands a worker at a
    # time), by the busy seconds a measured run gave them (tests/scope_weights.json, ci/timeline.py --weights),
    # whatever their markers (the Triton corpus is not marked slow and ran last); then the other slow tests, then
    # the rest. A stable sort: the order within a scope is kept. The full run's workers take a scope at a time in
    # this order, so the long ones start at once instead of ending the run on one worker.
    weight = _scope_weights()

    def order(item) -> tuple[int, float]:
        if seconds := weight.get(_scope(item.nodeid), 0):
            return 0, -seconds
        return (1 if "slow" in item.keywords else 2), 0

    items.sort(key=order)


def _scope(nodeid: str) -> str:
    parts = nodeid.split("::")
    return "::".join(parts[:2]) if len(parts) > 2 else parts[0]


def _scope_weights() -> dict[str, float]:
    path = Path(__file__).with_name("scope_weights.json")
    return json.loads(path.read_text())["seconds"] if path.is_file() else {}


# Where CI time goes (ci/timeline.py reads it): TRITONBUILD_TEST_TIMELINE=FILE appends one JSON line per test
# phase run (its node id, the xdist worker and its pid, start and end in seconds since the epoch, and the CPU
# seconds it and the processes it waited for used: what a 2-core machine pays), from the process that ran it
# (xdist's controller, which replays its workers' hooks, writes nothing).
_TIMELINE = os.environ.get("TRITONBUILD_TEST_TIMELINE")
_started: dict[str, tuple[float, float]] = {}


def _cpu_seconds() -> float:
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def pytest_configure(config):
    global _TIMELINE
    if (
        _TIMELINE
        and getattr(config.option, "dist", "no") != "no"
        and not hasattr(config, "workerinput")
    ):
        _TIMELINE = None


def pytest_runtest_logstart(nodeid, location):
    if _TIMELINE:
        _started[nodeid] = (time.time(), _cpu_seconds())


def pytest_runtest_logfinish(nodeid, location):
    if _TIMELINE and nodeid in _started:
        start, cpu = _started.pop(nodeid)
        line = {
            "test": nodeid,
            "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
            "pid": os.getpid(),  # joins process accounting's records (a child's parent pid)
            "start": start,
            "end": time.time(),
            "cpu": round(_cpu_seconds() - cpu, 3),
        }
        with open(_TIMELINE, "a") as out:
            out.write(json.dumps(line) + "\n")


@pytest.fixture(scope="session", autouse=True)
def _session_cache(tmp_path_factory):
    """Fixtures wider than a test (module/class builds) get a session build cache, never the user's."""
    mp = pytest.MonkeyPatch()
    mp.setenv("TRITONBUILD_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))
    yield
    mp.undo()


@pytest.fixture(autouse=True)
def _isolate(tmp_path_factory, monkeypatch, request):
    """Each test its own build cache (and so its own file-hash cache, which lives beside it): no test sees
    another's steps, so results do not depend on which tests ran before."""
    monkeypatch.setenv("TRITONBUILD_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    # and its own machine key for verification reports (made by the first verify, in XDG_CONFIG_HOME)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("config")))
    # publish's wait before its first switch (publish/protocol.py settle) and --keep's grace after a switch
    # (publish/prune.py) are for polling tritonservers: a test with none switches and prunes at once; a test
    # with a server (marked triton) keeps the defaults, or sets its own
    for name in ("TRITONBUILD_SWITCH_SETTLE_S", "TRITONBUILD_PRUNE_GRACE_S"):
        if request.node.get_closest_marker("triton") is None:
            monkeypatch.setenv(name, "0")
        else:
            monkeypatch.delenv(name, raising=False)


@pytest.fixture
def cli():
    """Run the CLI in-process; returns click's Result (exit_code, stdout, stderr)."""
    from tritonbuild.cli import main

    def run(*args: str):
        return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)

    return run


@pytest.fixture
def write(tmp_path):
    """write('name.yaml', text) → path, with the text dedented."""

    def _write(name: str, text: str | bytes) -> Path:
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            p.write_bytes(text)
        else:
            p.write_text(textwrap.dedent(text).lstrip())
        return p

    return _write


@pytest.fixture
def silent_endpoint():
    """Accepts TCP connections and never answers a byte."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    held, stop = [], threading.Event()

    def accept():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                continue

    threading.Thread(target=accept, daemon=True).start()
    yield f"http://127.0.0.1:{srv.getsockname()[1]}"
    stop.set()
    for c in held:
        c.close()
    srv.close()


PY_MODEL = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "X").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", (x * 2 + 1).astype(np.float32))]))
        return out
"""

PY_RECIPE = """
name: doubler
version: 1
backend: python
source: {path: model.py}
max_batch_size: 4
inputs: [{name: X, dtype: fp32, dims: [3]}]
outputs: [{name: Y, dtype: fp32, dims: [3]}]
verify: {goldens: goldens/doubler.npz, repeats: 2, samples: 3, batch_invariance: require}
"""


@pytest.fixture
def py_recipe(write):
    """A minimal valid Python-backend recipe in tmp_path; returns its path."""
    write("model.py", PY_MODEL)
    return write("doubler.yaml", PY_RECIPE)


@pytest.fixture
def in_root(monkeypatch):
    monkeypatch.chdir(ROOT)
    return ROOT


os.environ.setdefault("PYTHONHASHSEED", "0")


def write_eagle_head(d: Path, like: Path, fc_in_multiple: int = 3) -> int:
    """A one-layer EAGLE head of the model at `like` (its config.json, 1 layer) in d, whose fc.weight is
    [hidden, fc_in_multiple × hidden] (3: an EAGLE-3 head, 2: an EAGLE-1/2 head), float16 zeros; its tensors' bytes."""
    config = json.loads((like / "config.json").read_text())
    hidden = config["hidden_size"]
    shapes = {
        "fc.weight": [hidden, fc_in_multiple * hidden],
        "midlayer.self_attn.q_proj.weight": [hidden, hidden],
        "norm.weight": [hidden],
    }
    header, offset = {}, 0
    for name, shape in shapes.items():
        size = 2 * math.prod(shape)
        header[name] = {"dtype": "F16", "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 1}))
    raw = json.dumps(header).encode()
    (d / "model.safetensors").write_bytes(len(raw).to_bytes(8, "little") + raw + bytes(offset))
    return offset
