"""Stand-ins through which Triton's own core validates a config of any backend
(verify/triton_core.py loads them).

Triton checks a config (names, dims, reshape, batch inputs/outputs, batching and queue policies,
sequence-batching controls, instance groups, ensembles and their steps) in its core, at poll and at
load, before a backend library is asked anything (triton-inference-server/core r24.10:
src/model_config_utils.cc ValidateModelConfig, ValidateInstanceGroup, ValidateModelIOConfig;
src/ensemble_scheduler/ensemble_utils.cc ValidateEnsembleConfig). The embedded server has only the
Python backend, so each model is copied into a scratch repository as a *stand-in*: the same config
with `backend: python` and a model.py that only declares (zero outputs of the declared shapes). What
the stand-in changes, and therefore cannot prove (see standin_config):

- backend → python, platform KEPT (Triton lets an unknown backend pair with any platform, so
  platform-dependent
  rules — instance-group profiles, shape tensors, non-linear IO only for tensorrt_plan — still
  apply); default_model_filename set to model.py, runtime cleared. The rules that depend on the real
  backend name (platform/backend pair, empty backend) are static rules (triton/rules.py).
- instance groups: KIND_GPU → KIND_CPU (gpus cleared) when this machine has no GPU, and count > 1 →
  1 (the
  rule is count >= 1 after defaulting; stand-in instances are processes). GPU ids are not checked
  here.
- autocomplete: the onnxruntime/tensorrt/pytorch backends fill missing inputs/outputs/max_batch_size
  from the
  model file; the stand-in sees the config as written (or none: Triton then autocompletes a Python
  stand-in). A model the embedded server runs itself (a hand-written Python model, `as_is`) is not
  stood in for: it is copied whole, so its own auto_complete_config and initialize() run. A server
  of stand-ins with configs, and of Python models whose class provably has no auto_complete_config
  (declares_no_auto_complete), runs without the Python backend's auto-complete, which would hand
  each config back unchanged (verify/triton_core.py server_options).
- files beside config.pbtxt (label files, warmup data) are copied: Triton opens them at load.
- the model file itself (ONNX graph, engine, TorchScript) is not read: the backend's own checks of
  config vs
  file are out of reach here.
"""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

from google.protobuf import text_format

from tritonbuild.triton.config import CONFIG_FILE, ConfigParseError, parse, write_config
from tritonbuild.triton.model_dir import ModelDir, ModelDirs

STANDIN_FILE = "model.py"
# The model.py every stand-in runs: it declares, and answers zeros of the declared output shapes
# (warmup runs it).
STANDIN_MODEL = '''"""tritonbuild stand-in: carries another backend's config through Triton's core checks."""
import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        cfg = json.loads(args["model_config"])
        self.batching = int(cfg.get("max_batch_size", 0)) > 0
        self.decoupled = bool(cfg.get("model_transaction_policy", {}).get("decoupled", False))
        self.outputs = []
        for o in cfg.get("output", []):
            try:
                dtype = pb_utils.triton_string_to_numpy(o["data_type"])
            except Exception:
                continue
            self.outputs.append((o["name"], dtype, [max(int(d), 1) for d in o.get("dims", [])]))

    def execute(self, requests):
        responses = []
        for request in requests:
            batch = []
            if self.batching:
                first = next(iter(request.inputs()), None)
                batch = [first.shape()[0] if first is not None and len(first.shape()) else 1]
            tensors = []
            for name, dtype, dims in self.outputs:
                shape = batch + dims
                if dtype == np.object_:
                    data = np.full(shape, b"", dtype=np.object_)
                else:
                    data = np.zeros(shape, dtype=dtype)
                tensors.append(pb_utils.Tensor(name, data))
            response = pb_utils.InferenceResponse(output_tensors=tensors)
            if self.decoupled:
                request.get_response_sender().send(
                    response, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            else:
                responses.append(response)
        return None if self.decoupled else responses
'''

POLL_FAILED = "failed to poll from model repository"
# e.g. E1130 17:11:32.678269 16425 model_repository_manager.cc:1460] "Poll failed for model directory 'm': <cause>"
_POLL_RE = re.compile(r"""Poll failed for model directory '([^']+)': (.*?)"?\s*$""")


def standin_config(raw: bytes, *, have_gpu: bool) -> tuple[bytes, list[str]]:
    """The stand-in's config.pbtxt and what was changed. A config our proto cannot parse is passed
    through as written: Triton then reports its own parse error."""
    try:
        mc = parse(raw)
    except ConfigParseError:
        return raw, []
    changed = []
    if mc.platform == "ensemble" or mc.HasField("ensemble_scheduling"):
        return raw, changed
    if mc.backend != "python":
        changed.append(f"backend {mc.backend or '(empty)'} → python")
        mc.backend = "python"
    if mc.runtime:
        changed.append("runtime cleared")
        mc.ClearField("runtime")
    # NOTE: named explicitly: for a TensorFlow platform Triton's autofill would name
    # model.savedmodel/graphdef, and a Python stub that finds no model file never reports back (the
    # load hangs).
    if mc.default_model_filename != STANDIN_FILE:
        if mc.default_model_filename:
            changed.append(f"default_model_filename {mc.default_model_filename} → {STANDIN_FILE}")
        mc.default_model_filename = STANDIN_FILE
    if "EXECUTION_ENV_PATH" in mc.parameters:
        del mc.parameters["EXECUTION_ENV_PATH"]
        changed.append("parameter EXECUTION_ENV_PATH dropped")
    kinds = type(mc.instance_group.add()).Kind
    del mc.instance_group[-1]
    for g in mc.instance_group:
        if g.kind == kinds.Value("KIND_GPU") and not have_gpu:
            g.kind = kinds.Value("KIND_CPU")
            del g.gpus[:]
            changed.append("KIND_GPU → KIND_CPU (no GPU here: GPU ids not checked)")
        if g.count > 1:
            g.count = 1
    return text_format.MessageToString(mc).encode(), changed


def _closure(models: ModelDirs, names: list[str]) -> list[str]:
    """The models and, transitively, the ensemble steps they name that exist in the repository."""
    seen: list[str] = []
    todo = list(names)
    while todo:
        name = todo.pop(0)
        if (
            not name
            or "/" in name
            or name in (".", "..")
            or name in seen
            or not models[name].exists
        ):
            continue
        seen.append(name)
        mc = models.config(name)
        if mc is not None:
            todo.extend(step.model_name for step in mc.ensemble_scheduling.step)
    return seen


def _ignored(model_dir: Path):
    """copytree's ignore for a model copied whole: __pycache__, and the model's own config.pbtxt
    (written from the bytes already read)."""

    def ignore(directory: str, names: list[str]) -> set[str]:
        top = {CONFIG_FILE} if Path(directory) == model_dir else set()
        return {name for name in names if name == "__pycache__" or name in top}

    return ignore


def write_standins(
    root: Path,
    names: list[str],
    scratch: Path,
    *,
    have_gpu: bool,
    as_is: frozenset[str] = frozenset(),
    models: ModelDirs | None = None,
) -> dict[str, list[str]]:
    """Scratch repository of stand-ins for names (plus their ensemble steps): name → what the
    stand-in changed. Files beside config.pbtxt (label files, warmup data) come along: Triton opens
    them at load. A model in as_is (one the embedded server runs) is copied whole, so its own
    model.py is imported and initialize() run; its config is written as read. models: root's
    model directories as read (by default read here), whose configs are not opened again."""
    models = models or ModelDirs(root)
    changes = {}
    for name in _closure(models, names):
        read, dest = models[name], scratch / name
        if name in as_is:
            shutil.copytree(read.path, dest, ignore=_ignored(read.path))
            changes[name] = []
            if read.raw is not None:
                write_config(dest, read.raw)
            continue
        dest.mkdir(parents=True)
        if read.raw is not None:
            raw, changes[name] = standin_config(read.raw, have_gpu=have_gpu)
            write_config(dest, raw)
        for child in read.dirs:
            if child == "warmup":
                shutil.copytree(read.path / child, dest / "warmup")
            else:
                (dest / child).mkdir()
                (dest / child / STANDIN_FILE).write_text(STANDIN_MODEL)
        for child in read.files:
            shutil.copyfile(read.path / child, dest / child)
    return changes


def poll_failure_cause(log_text: str, name: str) -> str | None:
    """Triton logs why a model directory failed to poll (the load API says only 'failed to
    poll')."""
    cause = None
    for line in log_text.splitlines():
        match = _POLL_RE.search(line)
        if match and match.group(1) == name:
            cause = match.group(2).strip()
    return cause


def ensembles(models: ModelDirs, names: list[str]) -> set[str]:
    """The names that are ensembles (a stand-in keeps an ensemble's config as written)."""
    out = set()
    for name in names:
        mc = models.config(name)
        if mc is not None and (mc.platform == "ensemble" or mc.HasField("ensemble_scheduling")):
            out.add(name)
    return out


def explain_load_error(error: str, log_text: str, name: str) -> str:
    """Triton's load error, with the server log's cause where the API says only 'failed to poll'."""
    prefix = f"tritonserver failed to load {name!r}: "
    if error.startswith(prefix):
        error = error[len(prefix) :]
    if POLL_FAILED in error:
        cause = poll_failure_cause(log_text, name)
        if cause:
            return cause
    return error


PYTHON_CLASS = "TritonPythonModel"
# Names through which model code could give its class a method at run time
_RUN_TIME_BINDING = frozenset({"setattr", "exec", "eval", "globals", "vars", "__import__"})


def declares_no_auto_complete(model_dir: Path | ModelDir) -> bool:
    """Whether a Python model loaded as itself provably has no auto_complete_config, so the
    backend's auto-complete stub would hand its config back unchanged (the facts' stub_returns):
    backend python, and either no version directory (nothing reaches the backend) or in each
    version's model file (default_model_filename, else model.py) TritonPythonModel bound once, by a
    top-level class statement with no base but object, no keyword and no decorator; no `import *`,
    nothing that binds names at run time, and auto_complete_config in none of the model
    directory's Python files. Anything else: not proven (False). model_dir: a ModelDir as read
    (its config not parsed again), or its path."""
    read = ModelDir.given(model_dir)
    mc, model_dir = read.config, read.path
    if mc is None or mc.backend != "python":
        return False
    if not read.versions:  # Triton's core refuses it before any backend sees it
        return True
    try:
        if any("auto_complete_config" in p.read_text() for p in model_dir.rglob("*.py")):
            return False
    except (OSError, UnicodeDecodeError):
        return False
    filename = mc.default_model_filename or "model.py"
    return all(_plain_class(model_dir / str(v) / filename) for v in read.versions)


def _plain_class(path: Path) -> bool:
    try:
        tree = ast.parse(path.read_bytes())
    except (OSError, SyntaxError, ValueError):
        return False
    named = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            return False
        if isinstance(node, ast.Name) and (
            node.id in _RUN_TIME_BINDING
            or (node.id == PYTHON_CLASS and not isinstance(node.ctx, ast.Load))
        ):
            return False
        if isinstance(node, ast.Global | ast.Nonlocal) and PYTHON_CLASS in node.names:
            return False
        # a def, class, import alias, except or match target of that name
        named += PYTHON_CLASS in (getattr(node, "name", None), getattr(node, "asname", None))
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == PYTHON_CLASS]
    if named != 1 or len(classes) != 1:
        return False
    cls = classes[0]
    return (
        not cls.keywords
        and not cls.decorator_list
        and all(isinstance(b, ast.Name) and b.id == "object" for b in cls.bases)
    )
