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

from tritonbuild.core.fsutil import write_atomic
from tritonbuild.core.hashing import pretty_json
from tritonbuild.core.npz import read_npz
from tritonbuild.core.stores import with_scheme
from tritonbuild.core.toolchain import fingerprint
from tritonbuild.errors import TuneError, UsageError, VerifyError
from tritonbuild.recipe.models import Tune
from tritonbuild.server.embedded import EmbeddedServer, ModelLoadError
from tritonbuild.server.launcher import launcher_for
from tritonbuild.triton.config import read_config
from tritonbuild.tune import search
from tritonbuild.tune.built import grpc_of, loads_of, model_and_recipe
from tritonbuild.tune.confidence import Decision, abba_order, ratio_interval
from tritonbuild.tune.control import load_with_config, unload
from tritonbuild.tune.loadgen import LoadGenerator, Result
from tritonbuild.tune.probes import NULL_MODEL, GoldensCheck, null_model
from tritonbuild.tune.report import build_report, finite, server_version_of
from tritonbuild.tune.space import BUCKETS_PARAMETER, Candidate, Grid, apply
from tritonbuild.verify.goldens import from_npz_arrays, generate_inputs

Progress = Callable[[str], None]
TWIN_SUFFIX = "__tune_default"  # the second copy of the model that serves Triton's default config
CEILING_GAIN = (
    1.10  # the load generator doubles its processes while that raises its ceiling by 10 %
)


def tune(
    root: Path,
    model: str,
    *,
    report_dir: Path,
    recipe_path: Path | None = None,
    server_url: str | None = None,
    grpc_url: str | None = None,
    brute: bool = False,
    no_verify: bool = False,
    processes: int | None = None,
    tune_override: Tune | None = None,
    progress: Progress | None = None,
    tritonserver: str | None = None,
) -> dict:
    """Returns the report (also written to report_dir/tune-report.json); raises TuneError when no candidate
    meets the constraints (after writing the report)."""
    try:
        import tritonclient.grpc.aio  # noqa: F401
    except ImportError:
        raise UsageError(
            "tune's load generator needs tritonclient's gRPC client",
            hint="pip install 'tritonbuild[tune]'",
        ) from None
    session = TuneSession(
        Path(root),
        model,
        report_dir=Path(report_dir),
        recipe_path=recipe_path,
        server_url=server_url,
        grpc_url=grpc_url,
        brute=brute,
        no_verify=no_verify,
        processes=processes,
        tune_override=tune_override,
        progress=progress,
        tritonserver=tritonserver,
    )
    return session.run()


class TuneSession:
    """One tune run: the model and its goldens, the server, the load generator's ceiling, the measurements the
    search asks for, the goldens check of its finalists, and the outputs. `run` is the order of the phases."""

    def __init__(
        self,
        root: Path,
        model: str,
        *,
        report_dir: Path,
        recipe_path: Path | None,
        server_url: str | None,
        grpc_url: str | None,
        brute: bool,
        no_verify: bool,
        processes: int | None,
        tune_override: Tune | None,
        progress: Progress | None,
        tritonserver: str | None = None,
    ):
        self.root, self.model, self.report_dir = root, model, report_dir
        self.tritonserver = (
            tritonserver  # --tritonserver: a local binary or container image (else the embedded)
        )
        self.server_url, self.grpc_url, self.brute = server_url, grpc_url, brute
        self.say = progress or (lambda _m: None)
        self.manifest_model, loaded, rpath = model_and_recipe(root, model, recipe_path)
        self.recipe = loaded.recipe
        self.notes: list[str] = []
        if loaded.digest != self.manifest_model.recipe_sha256:
            self.notes.append(
                f"{rpath} changed since {root} was built: the candidates are edits of the built config"
            )
        self.spec = tune_override or getattr(self.recipe, "tune", None) or Tune()
        if (
            server_url is None
            and self.manifest_model.target == "gpu"
            and not fingerprint().get("gpu_name")
        ):
            raise UsageError(
                f"{model!r} targets a GPU and this machine has none",
                hint="run tune on the GPU machine that will serve it, or pass --server URL",
            )
        self.inputs, self.reference = self._goldens(no_verify)
        self.base_mc = read_config(root / model)
        self.grid = Grid(self.spec, self.base_mc)
        self._check_buckets()
        self.loads = loads_of(self.spec)
        # invariant: a config's answers are compared with its own answers alone (it may serve new bits, never
        # bits that depend on batch composition or load); goldens: with the recorded goldens
        self.invariant = self.spec.determinism == "invariant" and self.reference is not None
        self.exact_under_load = self.reference is not None and (
            self.invariant or self.manifest_model.verify.batch_invariance == "require"
        )
        self.own: dict[
            Candidate, list[dict]
        ] = {}  # invariant: each config's own answers to the inputs alone
        self.new_bits: dict[
            str, int
        ] = {}  # invariant: per config, golden outputs its own answers differ from
        self.processes = processes or max(1, min(8, (os.cpu_count() or 2) // 2))
        # what each model name serves: the model's own, and (embedded server) a second copy that keeps Triton's
        # default loaded, so the paired rounds switch between the two without a reload
        self.loaded: dict[str, Candidate | None] = {}
        self.twin: str | None = None
        self.fresh = False
        self.done = 0
        self.load_errors: dict[Candidate, str] = {}
        self.verifications: dict[str, dict] = {}
        self.answers: dict[
            str, dict[str, int]
        ] = {}  # per config: answers compared with the goldens, differing
        self.paired: dict[
            str, dict
        ] = {}  # per finalist: its and the default's readings, round by round
        self.ceiling_scaling: list[dict] = []
        self.checker: GoldensCheck | None = None
        self.ev: search.Evaluator | None = None

    def _check_buckets(self) -> None:
        """tune.buckets: the model's wrapper must read them (built with batch_buckets) and they must hold every
        batch the candidates may form."""
        buckets = self.grid.buckets
        if buckets is None:
            return
        if BUCKETS_PARAMETER not in self.base_mc.parameters:
            raise UsageError(
                f"tune.buckets: {self.model!r} was not built with batch_buckets (no bucket wrapper "
                "reads them)",
                hint="set batch_buckets in the recipe (a Python model), rebuild",
            )
        if buckets[-1] < self.grid.cap:
            raise UsageError(
                f"tune.buckets {list(buckets)}: the largest is below max_batch_size {self.grid.cap}",
                hint=f"add {self.grid.cap} as the last bucket",
            )

    def _goldens(self, no_verify: bool):
        manifest_model, root = self.manifest_model, self.root
        if manifest_model.goldens and (root / manifest_model.goldens).is_file():
            return from_npz_arrays(read_npz(root / manifest_model.goldens))
        if not no_verify:
            raise VerifyError(
                f"{self.model!r} has no goldens: tune would not know whether a faster config changes "
                "its answers",
                where=str(root / self.model),
                hint="record them ('tritonbuild verify OUT --record', commit, rebuild) or pass "
                "--no-verify (recorded in the report)",
            )
        self.notes.append("NOT VERIFIED: --no-verify; candidates were not checked against goldens")
        return generate_inputs(manifest_model), None

    def run(self) -> dict:
        self.report_dir.mkdir(parents=True, exist_ok=True)
        t_start = time.monotonic()
        with ExitStack() as stack:
            scratch = Path(tempfile.mkdtemp(prefix="tritonbuild-tune-"))
            stack.callback(shutil.rmtree, scratch, True)
            self.start_server(stack, scratch)
            ceiling = self.measure_ceiling()
            self.start_load(stack)
            winner = self.search()
            server_version = server_version_of(self.url)
            if self.server_url is not None:
                load_with_config(
                    self.url, self.model, self.base_mc
                )  # leave the server serving the built config
            elapsed = time.monotonic() - t_start
        report = build_report(
            self.manifest_model,
            self.spec,
            self.grid,
            self.loads,
            self.ev,
            self.grid.default,
            winner,
            ceiling,
            self.verifications,
            self.load_errors,
            self.notes,
            brute=self.brute,
            processes=self.processes,
            server_version=server_version,
            elapsed=elapsed,
            no_verify=self.reference is None,
            base_instances=[g.model_dump() for g in self.recipe.instances],
            answers=self.answers,
            paired=self.paired,
            ceiling_scaling=self.ceiling_scaling,
            new_bits=self.new_bits if self.invariant else None,
        )
        if self.server_url is None:
            report["server"]["launched"] = self.launched
        report["default_served_as"] = self.twin or self.model
        report["baseline"] = self.grid.baseline()
        if (report["served_bits"] or {}).get(
            "changed"
        ):  # a change of served bits is a new model version
            report["winner"]["recipe_values"]["version"] = report["served_bits"]["version"]
        return self.write_outputs(finite(report), winner)

    def start_server(self, stack: ExitStack, scratch: Path) -> None:
        """The embedded tritonserver on a scratch copy of the model (OUT is only read), or the given one."""
        if self.server_url is None:
            repo = scratch / "repo"
            shutil.copytree(
                self.root / self.model,
                repo / self.model,
                ignore=shutil.ignore_patterns("__pycache__"),
            )
            self.twin = f"{self.model}{TWIN_SUFFIX}"
            shutil.copytree(
                self.root / self.model,
                repo / self.twin,
                ignore=shutil.ignore_patterns("__pycache__"),
            )
            self.say("starting the embedded tritonserver")
            server = stack.enter_context(
                EmbeddedServer(
                    repo,
                    log_path=self.report_dir / "tritonserver.log",
                    launcher=launcher_for(self.tritonserver),
                )
            )
            self.url, self.grpc_url = f"http://{server.http_url}", server.grpc_url
            self.launched = (
                server.launcher.describe()
            )  # the embedded binary, or --tritonserver PATH
        else:
            self.url = with_scheme(self.server_url)
            self.grpc_url = self.grpc_url or grpc_of(self.url)

    def measure_ceiling(self) -> Result:
        """The load generator's own ceiling: an empty Python model with the same tensors, at the top load. The
        generator doubles its processes (up to the machine's cores) while that raises the ceiling by 10 %, so the
        candidates are measured as far from the client's limit as this machine allows."""
        self.say("measuring the load generator's ceiling (empty model)")
        null_mc, null_files = null_model(self.manifest_model, self.base_mc)
        load_with_config(self.url, NULL_MODEL, null_mc, null_files)
        ceiling = self._ceiling_with(self.processes)
        while self.processes * 2 <= (os.cpu_count() or 1):
            more = self._ceiling_with(self.processes * 2)
            if more.throughput < CEILING_GAIN * ceiling.throughput:
                break
            self.processes, ceiling = self.processes * 2, more
        unload(self.url, NULL_MODEL)
        self.say(
            f"ceiling {ceiling.throughput:.0f} req/s at {self.loads[-1]} with {self.processes} processes"
        )
        return ceiling

    def _ceiling_with(self, processes: int) -> Result:
        with LoadGenerator(
            self.grpc_url, NULL_MODEL, self.inputs, None, self.output_names, processes=processes
        ) as generator:
            result = _measure(generator, self.loads[-1], self.spec)
        self.ceiling_scaling.append(
            {"processes": processes, "throughput": round(result.throughput, 2)}
        )
        return result

    @property
    def output_names(self) -> list[str]:
        return [tensor.name for tensor in self.manifest_model.outputs]

    def start_load(self, stack: ExitStack) -> None:
        self.generator = stack.enter_context(
            LoadGenerator(
                self.grpc_url,
                self.model,
                self.inputs,
                self.reference,
                self.output_names,
                processes=self.processes,
            )
        )
        (self.report_dir / "tune-measurements.jsonl").unlink(missing_ok=True)
        if self.reference is not None:
            self.checker = GoldensCheck(
                self.grpc_url, self.manifest_model, self.inputs, self.reference
            )
            stack.callback(self.checker.close)

    def search(self) -> Candidate | None:
        grid_size = len({self.grid.default, *self.grid.all()}) * len(self.loads)
        self.guess = grid_size if self.brute else search.quick_budget(grid_size, len(self.loads))
        self.t0 = time.monotonic()
        self.ev = search.Evaluator(
            self.measure,
            self.loads,
            sla_p99_ms=self.spec.sla_p99_ms,
            min_vs_default=self.spec.min_vs_default,
            exact_under_load=self.exact_under_load,
            confirm=self.confirm if self.spec.rounds > 1 else None,
        )
        winner = (search.brute if self.brute else search.quick)(
            self.ev, self.grid, self.grid.default, self.verify
        )
        self.say(
            f"{self.ev.count} measurements of the grid's {grid_size} ({self.ev.count / grid_size:.0%})"
        )
        return winner

    def slot(self, candidate: Candidate) -> str:
        """The model name candidate is served as: Triton's default as the second copy when there is one."""
        return self.twin if candidate.is_default and self.twin else self.model

    def ensure(self, candidate: Candidate) -> str | None:
        """Candidate loaded (a load with a config override); the reason when Triton refuses it."""
        if candidate in self.load_errors:
            return self.load_errors[candidate]
        name = self.slot(candidate)
        if self.loaded.get(name) != candidate:
            config = apply(self.base_mc, candidate)
            config.name = name
            try:
                load_with_config(self.url, name, config)
                self.loaded[name], self.fresh = candidate, True
            except ModelLoadError as e:
                self.loaded[name] = None
                self.load_errors[candidate] = f"Triton refused the config: {e.message}"
                return self.load_errors[candidate]
        if self.checker is not None:
            self.checker.name = name
        if self.invariant and candidate not in self.own:
            self._record_own(candidate)
        return None

    def _record_own(self, candidate: Candidate) -> None:
        """invariant: the config's own answers (each input alone, on its first load) are what its answers under
        load are compared with; how many golden outputs they differ from is kept."""
        self.own[candidate] = self.checker.answers_alone()
        self.new_bits[candidate.label] = sum(
            1
            for mine, golden in zip(self.own[candidate], self.reference, strict=True)
            for name, expected in golden.items()
            if mine[name].tobytes() != expected.tobytes()
        )

    def confirm(self, candidate: Candidate) -> list[Decision]:
        """Candidate and Triton's default in paired rounds at every load, interleaved A B, B A, ...; each load's
        throughput ratio decided on its bootstrap interval against min_vs_default."""
        default, spec = self.grid.default, self.spec
        readings = {load: {"candidate": [], "default": []} for load in self.loads}
        self.say(
            f"confirming {candidate.label}: {spec.rounds} paired rounds with the default at {self.loads}"
        )
        # the estimate counted the search's measurements only: these rounds come on top of what is left of it
        self.guess = max(self.guess, self.done) + 2 * spec.rounds * len(self.loads)
        for _round, candidate_first in abba_order(spec.rounds):
            for who in (candidate, default) if candidate_first else (default, candidate):
                for load in self.loads:
                    point = self.measure(who, load, phase="paired")
                    readings[load]["candidate" if who == candidate else "default"].append(
                        round(point.throughput, 2)
                    )
        self.paired[candidate.label] = readings
        return [
            Decision(
                "throughput",
                load,
                spec.min_vs_default,
                ratio_interval(pair["candidate"], pair["default"], spec.confidence),
            )
            for load, pair in readings.items()
        ]

    def measure(self, candidate: Candidate, load: str, phase: str = "screening") -> search.Point:
        err = self.ensure(candidate)
        if err:
            return search.Point(load, 0.0, float("inf"), errors=1, extra={"load_error": err})
        # NOTE: the first second after a (re)load is slow (seen on the H200: first windows at 20-50 %),
        # so a fresh load gets a longer warm-up than the next loads of the same candidate: two windows,
        # at least 0.5 s (1 s with the H200 benchmark's 0.5 s windows).
        warmup_s = max(0.5, 2 * self.spec.window_s) if self.fresh else None
        self.fresh = False
        if self.invariant:
            self.generator.expect(self.own[candidate])
        result = _measure(
            self.generator, load, self.spec, warmup_s=warmup_s, model=self.slot(candidate)
        )
        self.done += 1
        tally = self.answers.setdefault(candidate.label, {"compared": 0, "differing": 0})
        if self.reference is not None:
            tally["compared"] += result.requests
            tally["differing"] += result.mismatches
        elapsed = time.monotonic() - self.t0
        left = max(0, self.guess - self.done) * elapsed / self.done
        self.say(
            f"[{self.done}/~{self.guess}] {candidate.label} @ {load}: {result.throughput:.0f} req/s, p99 "
            f"{result.p99_ms:.1f} ms{'' if result.stable else ' (unstable)'}; ~{left:.0f}s left"
        )
        # every measurement as it is made: an interrupted run (Ctrl-C, a time limit) keeps what it measured
        with open(self.report_dir / "tune-measurements.jsonl", "a") as f:
            f.write(
                json.dumps(
                    finite(
                        {
                            "candidate": candidate.label,
                            "phase": phase,
                            "config": candidate.model_dump(exclude={"coords"}),
                            "elapsed_s": round(elapsed, 1),
                            **result.to_dict(),
                        }
                    )
                )
                + "\n"
            )
        return search.Point(
            load,
            result.throughput,
            result.p99_ms,
            result.errors,
            result.mismatches,
            extra=result.to_dict(),
        )

    def verify(self, candidate: Candidate) -> str | None:
        """None when candidate gives the goldens' bits (alone, and batched as the recipe requires); else why."""
        if self.checker is None:
            return None
        err = self.ensure(candidate)
        if err:
            return err
        self.say(
            f"verifying {candidate.label} with "
            + ("its own answers alone" if self.invariant else "the goldens")
        )
        alone, batched = self.checker.check(candidate, self.own.get(candidate))
        results = self.ev.results
        under = [
            (
                load,
                results[(candidate, load)].extra.get("first_mismatch"),
                results[(candidate, load)].mismatches,
            )
            for load in self.loads
            if (candidate, load) in results and results[(candidate, load)].mismatches
        ]
        self.verifications[candidate.label] = {
            "repeats_alone": self.manifest_model.verify.repeats,
            "mismatches_alone": [x.model_dump() for x in alone],
            "mismatches_batched": [x.model_dump() for x in batched],
            "mismatches_under_load": [{"load": lo, "answers": n, "first": f} for lo, f, n in under],
        }
        if alone:
            return (
                f"answers differ from {'its own first answers' if self.invariant else 'the goldens'} when sent "
                f"alone ({len(alone)} outputs)"
            )
        tally = self.answers.get(candidate.label, {"compared": 0, "differing": 0})
        if self.exact_under_load and (batched or tally["differing"]):
            worst = max(
                [x.max_abs_diff or 0.0 for x in batched]
                + [(f or {}).get("max_abs_diff") or 0.0 for _, f, _n in under]
                + [0.0]
            )
            return (
                f"outputs change with batch composition ({self._bit_rule}): {len(batched)} "
                f"batched outputs and {tally['differing']} of {tally['compared']} answers under load differ, "
                f"max |diff| {worst:.3g}"
            )
        return None

    @property
    def _bit_rule(self) -> str:
        return "tune.determinism: invariant" if self.invariant else "batch_invariance: require"

    def write_outputs(self, report: dict, winner: Candidate | None) -> dict:
        """The report, the recipe patch and the plot; TuneError (after writing them) when nothing won."""
        report_dir = self.report_dir
        write_atomic(report_dir / "tune-report.json", pretty_json(report))
        if winner is not None:
            from tritonbuild.tune.patch import patch_text

            write_atomic(
                report_dir / "tune-patch.yaml",
                patch_text(report["winner"]["recipe_values"], report).encode(),
            )
        try:
            from tritonbuild.tune.plot import plot

            plot(report, report_dir / "tune-plot.png")
            report["plot"] = str(report_dir / "tune-plot.png")
        except ImportError:
            report["notes"].append(
                "no plot: matplotlib is not installed (pip install 'tritonbuild[tune]')"
            )
        write_atomic(report_dir / "tune-report.json", pretty_json(report))
        if winner is None:
            best = report.get("closest")
            miss = f"; closest: {best['label']} ({'; '.join(best['reasons'])})" if best else ""
            raise TuneError(
                f"no candidate of {self.model!r} meets the constraints at every load {self.loads}{miss}",
                where=str(report_dir / "tune-report.json"),
                hint="see each candidate's reasons in the report; relax tune.sla_p99_ms, min_vs_default "
                "or the load range, or widen the search space",
            )
        return report


def _measure(
    lg: LoadGenerator,
    load: str,
    spec: Tune,
    warmup_s: float | None = None,
    model: str | None = None,
) -> Result:
    kw = {
        "window_s": spec.window_s,
        "stable_windows": spec.stable_windows,
        "stability": spec.stability,
        "max_windows": spec.max_windows,
        "warmup_s": warmup_s,
        "model": model,
    }
    if load.startswith("c"):
        return lg.measure(concurrency=int(load[1:]), **kw)
    return lg.measure(rate=float(load[1:]), **kw)
