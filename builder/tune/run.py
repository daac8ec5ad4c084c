"""tune(): measure candidate serving configs of one built model and choose the fastest that is safe.

The built repository (OUT) is only read: the embedded server serves a scratch copy of the model, and every
candidate is loaded with Triton's load API and a config override (the same request works against any
server in explicit model-control mode, `--server URL`). Results go to a report directory: the JSON report,
the recipe patch and the plot.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import numpy as np

from tritonbuild.backends import REGISTRY
from tritonbuild.core.fsutil import write_atomic
from tritonbuild.core.hashing import pretty_json
from tritonbuild.core.npz import read_npz
from tritonbuild.core.toolchain import fingerprint
from tritonbuild.errors import UsageError, VerifyError
from tritonbuild.recipe.models import Tune
from tritonbuild.repository.config import parse
from tritonbuild.repository.manifest import ManifestModel, read_repository
from tritonbuild.server.embedded import EmbeddedServer, ModelLoadError
from tritonbuild.tune import search
from tritonbuild.tune.control import load_with_config, unload
from tritonbuild.tune.loadgen import LoadGenerator, Result
from tritonbuild.tune.report import build_report, finite, server_version_of
from tritonbuild.tune.space import Candidate, Grid, apply
from tritonbuild.verify.goldens import compare, from_npz_arrays, generate_inputs

Progress = Callable[[str], None]
NULL_MODEL = "tritonbuild_loadgen_ceiling"

NULL_PY = '''
import numpy as np
import triton_python_backend_utils as pb_utils

OUTPUTS = {outputs!r}


class TritonPythonModel:
    """Does nothing: answers zeros of the output shapes (the load generator's own ceiling)."""

    def execute(self, requests):
        out = []
        for r in requests:
            first = r.inputs()[0].as_numpy()
            lead = [first.shape[0]] if {batched!r} else []
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor(n, np.zeros(lead + [max(1, d) for d in dims],
                                                                                dtype=np.dtype(t)))
                                                   for n, (dims, t) in OUTPUTS.items()]))
        return out
'''


class TuneError(VerifyError):
    """Tuning found no candidate that meets the constraints (the report is still written)."""


def _null_model(manifest_model: ManifestModel, mc):
    from tritonbuild.tune.space import KINDS  # noqa: F401 (kind names)
    from tritonbuild.verify.goldens import NP_DTYPES

    outputs = {tensor.name: (list(tensor.dims), np.dtype(NP_DTYPES[tensor.dtype]).str)
               for tensor in manifest_model.outputs}
    code = NULL_PY.format(outputs=outputs, batched=manifest_model.max_batch_size > 0).encode()
    null = type(mc)()
    null.CopyFrom(mc)
    null.name = NULL_MODEL
    null.backend = "python"
    null.ClearField("platform")
    null.ClearField("default_model_filename")
    null.ClearField("model_warmup")
    null.ClearField("parameters")
    null.ClearField("instance_group")
    group = null.instance_group.add()
    from tritonbuild.repository.config import model_config_pb2

    group.kind = model_config_pb2().ModelInstanceGroup.Kind.Value("KIND_CPU")
    group.count = 2
    if manifest_model.max_batch_size > 0:
        null.dynamic_batching.SetInParent()
    else:
        null.ClearField("dynamic_batching")
    return null, {"1/model.py": code}


class _Verifier:
    """Goldens through a plain gRPC client: each sample alone × repeats, then all at once × repeats (the
    dynamic batcher merges them)."""

    def __init__(self, url: str, manifest_model: ManifestModel, inputs, reference):
        import tritonclient.grpc as grpcclient

        self.g = grpcclient
        self.client = grpcclient.InferenceServerClient(url)
        self.manifest_model, self.inputs, self.reference = manifest_model, inputs, reference

    def infer(self, sample: dict) -> dict:
        from tritonclient.utils import np_to_triton_dtype

        ins = []
        for name, arr in sample.items():
            i = self.g.InferInput(name, list(arr.shape), np_to_triton_dtype(arr.dtype))
            i.set_data_from_numpy(arr)
            ins.append(i)
        wanted = [self.g.InferRequestedOutput(tensor.name) for tensor in self.manifest_model.outputs]
        response = self.client.infer(self.manifest_model.name, ins, outputs=wanted)
        return {tensor.name: response.as_numpy(tensor.name) for tensor in self.manifest_model.outputs}

    def check(self, candidate: Candidate) -> tuple[list, list]:
        """(mismatches alone, mismatches in batches) as verify's Mismatch objects."""
        alone, batched = [], []
        for rep in range(self.manifest_model.verify.repeats):
            for i, sample in enumerate(self.inputs):
                got = self.infer(sample)
                for name, exp in self.reference[i].items():
                    mismatch = compare(exp, got.get(name), sample=i, output=name,
                                       context=f"{candidate.label}: repeat {rep + 1}")
                    if mismatch:
                        alone.append(mismatch)
        if candidate.batching and len(self.inputs) > 1:
            # NOTE: the batch composition a config causes is the one its dynamic batcher forms from single
            # requests; a batch the client builds itself is the model's own property (verify checks it).
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=len(self.inputs)) as pool:
                for rep in range(self.manifest_model.verify.repeats):
                    for i, got in enumerate(pool.map(self.infer, self.inputs)):
                        for name, exp in self.reference[i].items():
                            mismatch = compare(exp, got.get(name), sample=i, output=name,
                                               context=f"{candidate.label}: {len(self.inputs)} concurrent requests, "
                                                       f"round {rep + 1}")
                            if mismatch:
                                batched.append(mismatch)
        return alone, batched

    def close(self) -> None:
        self.client.close()


def _loads(tune_spec: Tune) -> list[str]:
    return ([f"r{rate:g}" for rate in sorted(tune_spec.request_rates)]
            + [f"c{clients}" for clients in sorted(set(tune_spec.concurrency))])


def _model_and_recipe(root: Path, model: str, recipe_path: Path | None):
    from tritonbuild.recipe import load_recipes

    manifest = read_repository(root, VerifyError)
    versions = [manifest_model for manifest_model in manifest.models if manifest_model.name == model]
    if not versions:
        names = sorted({manifest_model.name for manifest_model in manifest.models})
        raise UsageError(f"{root} has no model {model!r}", hint=f"one of: {names}")
    manifest_model = max(versions, key=lambda version: version.version)
    owner = REGISTRY.for_manifest(manifest_model.backend)  # a pipeline (ensemble, BLS) serves the models it calls
    if (owner is not None and owner.needs_built_models) or manifest_model.llm or manifest_model.depends_on:
        raise UsageError(f"{model!r} is a {manifest_model.backend} pipeline/LLM model: tune serves one model's own "
                         "config",
                         hint="tune the models it calls")
    rpath = Path(recipe_path or manifest_model.recipe_path)
    if not rpath.is_file():
        raise UsageError(f"the recipe of {model!r} is not at {rpath}", hint="run from where you built it, or pass "
                         "--recipe PATH")
    loaded = next((loaded_recipe for loaded_recipe in load_recipes([rpath])
                   if getattr(loaded_recipe.recipe, "name", None) == model), None)
    if loaded is None:
        raise UsageError(f"{rpath} does not define model {model!r}", hint="pass --recipe PATH of that model")
    return manifest_model, loaded, rpath


def recipe_for(root: Path, model: str, recipe_path: Path | None = None) -> tuple[Path, Tune]:
    """The recipe file of a built model and its tune section (defaults when absent)."""
    _m, loaded, rpath = _model_and_recipe(Path(root), model, recipe_path)
    return rpath, getattr(loaded.recipe, "tune", None) or Tune()


def tune(root: Path, model: str, *, report_dir: Path, recipe_path: Path | None = None,
         server_url: str | None = None, grpc_url: str | None = None, brute: bool = False, no_verify: bool = False,
         processes: int | None = None, tune_override: Tune | None = None,
         progress: Progress | None = None) -> dict:
    """Returns the report (also written to report_dir/tune-report.json); raises TuneError when no candidate
    meets the constraints (after writing the report)."""
    say = progress or (lambda _m: None)
    try:
        import tritonclient.grpc.aio  # noqa: F401
    except ImportError:
        raise UsageError("tune's load generator needs tritonclient's gRPC client",
                         hint="pip install 'tritonbuild[tune]'") from None
    root = Path(root)
    manifest_model, loaded, rpath = _model_and_recipe(root, model, recipe_path)
    recipe = loaded.recipe
    notes: list[str] = []
    if loaded.digest != manifest_model.recipe_sha256:
        notes.append(f"{rpath} changed since {root} was built: the candidates are edits of the built config")
    spec = tune_override or getattr(recipe, "tune", None) or Tune()
    if server_url is None and manifest_model.target == "gpu" and not fingerprint().get("gpu_name"):
        raise UsageError(f"{model!r} targets a GPU and this machine has none", hint="run tune on the GPU machine "
                         "that will serve it, or pass --server URL")
    inputs = reference = None
    if manifest_model.goldens and (root / manifest_model.goldens).is_file():
        inputs, reference = from_npz_arrays(read_npz(root / manifest_model.goldens))
    if inputs is None:
        if not no_verify:
            raise VerifyError(f"{model!r} has no goldens: tune would not know whether a faster config changes "
                              "its answers", where=str(root / model),
                              hint="record them ('tritonbuild verify OUT --record', commit, rebuild) or pass "
                                   "--no-verify (recorded in the report)")
        inputs = generate_inputs(manifest_model)
        notes.append("NOT VERIFIED: --no-verify; candidates were not checked against goldens")
    base_mc = parse((root / model / "config.pbtxt").read_bytes())
    grid = Grid(spec, base_mc)
    default = grid.default
    loads = _loads(spec)
    exact_under_load = reference is not None and manifest_model.verify.batch_invariance == "require"
    report_dir = Path(report_dir)
    report_dir.mkdir(parents=True, exist_ok=True)
    procs = processes or max(1, min(8, (os.cpu_count() or 2) // 2))
    t_start = time.monotonic()

    with ExitStack() as stack:
        scratch = Path(tempfile.mkdtemp(prefix="tritonbuild-tune-"))
        stack.callback(shutil.rmtree, scratch, True)
        if server_url is None:
            repo = scratch / "repo"
            shutil.copytree(root / model, repo / model, ignore=shutil.ignore_patterns("__pycache__"))
            say("starting the embedded tritonserver")
            server = stack.enter_context(EmbeddedServer(repo, log_path=report_dir / "tritonserver.log"))
            url, grpc_url = f"http://{server.http_url}", server.grpc_url
        else:
            url = server_url if "://" in server_url else f"http://{server_url}"
            grpc_url = grpc_url or _grpc_of(url)
        # the load generator's own ceiling: an empty Python model with the same tensors
        say("measuring the load generator's ceiling (empty model)")
        null_mc, null_files = _null_model(manifest_model, base_mc)
        load_with_config(url, NULL_MODEL, null_mc, null_files)
        top = loads[-1]
        output_names = [tensor.name for tensor in manifest_model.outputs]
        with LoadGenerator(grpc_url, NULL_MODEL, inputs, None, output_names, processes=procs) as lg:
            ceiling = _measure(lg, top, spec)
        unload(url, NULL_MODEL)
        say(f"ceiling {ceiling.throughput:.0f} req/s at {top}")

        state: dict = {"loaded": None, "t0": time.monotonic(), "done": 0}
        expected = reference if reference is not None else None
        lg = stack.enter_context(LoadGenerator(grpc_url, model, inputs, expected, output_names, processes=procs))
        load_errors: dict[Candidate, str] = {}
        (report_dir / "tune-measurements.jsonl").unlink(missing_ok=True)
        grid_size = len({default, *grid.all()}) * len(loads)
        guess = grid_size if brute else search.quick_budget(grid_size, len(loads))

        def ensure(candidate: Candidate) -> str | None:
            if candidate in load_errors:
                return load_errors[candidate]
            if state["loaded"] != candidate:
                try:
                    load_with_config(url, model, apply(base_mc, candidate))
                    state["loaded"] = candidate
                    state["fresh"] = True
                except ModelLoadError as e:
                    state["loaded"] = None
                    load_errors[candidate] = f"Triton refused the config: {e.message}"
                    return load_errors[candidate]
            return None

        def measure(candidate: Candidate, load: str) -> search.Point:
            err = ensure(candidate)
            if err:
                return search.Point(load, 0.0, float("inf"), errors=1, extra={"load_error": err})
            # NOTE: the first second after a (re)load is slow (seen on the H200: first windows at 20-50 %),
            # so a fresh load gets a longer warm-up than the next loads of the same candidate: two windows,
            # at least 0.5 s (1 s with the H200 benchmark's 0.5 s windows).
            warmup_s = max(0.5, 2 * spec.window_s) if state.pop("fresh", False) else None
            result = _measure(lg, load, spec, warmup_s=warmup_s)
            state["done"] += 1
            el = time.monotonic() - state["t0"]
            left = max(0, guess - state["done"]) * el / state["done"]
            say(f"[{state['done']}/~{guess}] {candidate.label} @ {load}: {result.throughput:.0f} req/s, p99 "
                f"{result.p99_ms:.1f} ms{'' if result.stable else ' (unstable)'}; ~{left:.0f}s left")
            point = search.Point(load, result.throughput, result.p99_ms, result.errors, result.mismatches,
                                 extra=result.to_dict())
            # every measurement as it is made: an interrupted run (Ctrl-C, a time limit) keeps what it measured
            with open(report_dir / "tune-measurements.jsonl", "a") as f:
                f.write(json.dumps(finite({"candidate": candidate.label,
                                            "config": candidate.model_dump(exclude={"coords"}),
                                            "elapsed_s": round(el, 1), **result.to_dict()})) + "\n")
            return point

        verifier = None
        if reference is not None:
            verifier = _Verifier(grpc_url, manifest_model, inputs, reference)
            stack.callback(verifier.close)
        verifications: dict[str, dict] = {}

        def verify(candidate: Candidate) -> str | None:
            if verifier is None:
                return None
            err = ensure(candidate)
            if err:
                return err
            say(f"verifying {candidate.label} with the goldens")
            alone, batched = verifier.check(candidate)
            under = [(load, ev.results[(candidate, load)].extra.get("first_mismatch"),
                      ev.results[(candidate, load)].mismatches)
                     for load in loads if (candidate, load) in ev.results and ev.results[(candidate, load)].mismatches]
            verifications[candidate.label] = {
                "repeats_alone": manifest_model.verify.repeats, "mismatches_alone": [x.model_dump() for x in alone],
                "mismatches_batched": [x.model_dump() for x in batched],
                "mismatches_under_load": [{"load": lo, "answers": n, "first": f} for lo, f, n in under]}
            if alone:
                return f"answers differ from the goldens when sent alone ({len(alone)} outputs)"
            if manifest_model.verify.batch_invariance == "require" and (batched or under):
                worst = max([x.max_abs_diff or 0.0 for x in batched] +
                            [(f or {}).get("max_abs_diff") or 0.0 for _, f, _n in under] + [0.0])
                return (f"outputs change with batch composition (batch_invariance: require): {len(batched)} "
                        f"batched outputs and {sum(n for _, _, n in under)} answers under load differ, max "
                        f"|diff| {worst:.3g}")
            return None

        ev = search.Evaluator(measure, loads, sla_p99_ms=spec.sla_p99_ms, min_vs_default=spec.min_vs_default,
                              exact_under_load=exact_under_load)
        winner = (search.brute if brute else search.quick)(ev, grid, default, verify)
        say(f"{ev.count} measurements of the grid's {grid_size} ({ev.count / grid_size:.0%})")
        server_version = server_version_of(url)
        if server_url is not None:
            load_with_config(url, model, base_mc)  # leave the server serving the built config
        elapsed = time.monotonic() - t_start

    report = build_report(manifest_model, spec, grid, loads, ev, default, winner, ceiling, verifications,
                          load_errors, notes, brute=brute, processes=procs, server_version=server_version,
                          elapsed=elapsed, no_verify=reference is None,
                          base_instances=[g.model_dump() for g in recipe.instances])
    report = finite(report)
    write_atomic(report_dir / "tune-report.json", pretty_json(report))
    patch = None
    if winner is not None:
        from tritonbuild.tune.patch import patch_text

        patch = patch_text(report["winner"]["recipe_values"], report)
        write_atomic(report_dir / "tune-patch.yaml", patch.encode())
    try:
        from tritonbuild.tune.plot import plot

        plot(report, report_dir / "tune-plot.png")
        report["plot"] = str(report_dir / "tune-plot.png")
    except ImportError:
        report["notes"].append("no plot: matplotlib is not installed (pip install 'tritonbuild[tune]')")
    write_atomic(report_dir / "tune-report.json", pretty_json(report))
    if winner is None:
        best = report.get("closest")
        miss = f"; closest: {best['label']} ({'; '.join(best['reasons'])})" if best else ""
        raise TuneError(f"no candidate of {model!r} meets the constraints at every load {loads}{miss}",
                        where=str(report_dir / "tune-report.json"),
                        hint="see each candidate's reasons in the report; relax tune.sla_p99_ms, min_vs_default or "
                             "the load range, or widen the search space")
    return report


def _grpc_of(http_url: str) -> str:
    """--server is Triton's HTTP URL; its gRPC endpoint is the same host on 8001 unless --grpc or
    TRITONBUILD_GRPC_URL says otherwise."""
    env = os.environ.get("TRITONBUILD_GRPC_URL")
    if env:
        return env
    host = http_url.split("://", 1)[-1].rsplit(":", 1)[0]
    return f"{host}:8001"


def _measure(lg: LoadGenerator, load: str, spec: Tune, warmup_s: float | None = None) -> Result:
    kw = {"window_s": spec.window_s, "stable_windows": spec.stable_windows, "stability": spec.stability,
          "max_windows": spec.max_windows, "warmup_s": warmup_s}
    if load.startswith("c"):
        return lg.measure(concurrency=int(load[1:]), **kw)
    return lg.measure(rate=float(load[1:]), **kw)
