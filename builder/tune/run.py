"""tune(): measure candidate serving configs of one built model and choose the fastest that is safe.

The built repository (OUT) is only read: the embedded server serves a scratch copy of the model, and
every candidate is loaded with Triton's load API and a config override (the same request works
against any server in explicit model-control mode, `--server URL`). Results go to a report
directory: the JSON report, the recipe patch and the plot.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

from tritonbuild.core.stores import with_scheme
from tritonbuild.errors import UsageError
from tritonbuild.recipe.models import Tune
from tritonbuild.server.embedded import EmbeddedServer
from tritonbuild.server.launcher import launcher_for
from tritonbuild.server.target import EMBEDDED, ServingTarget
from tritonbuild.triton.config import read_config
from tritonbuild.tune import quick, search
from tritonbuild.tune.built import (
    check_buckets,
    goldens_of,
    grpc_of,
    loads_of,
    model_and_recipe,
    refuse_gpu_model_without_gpu,
)
from tritonbuild.tune.callbacks import SearchCallbacks, measure_load
from tritonbuild.tune.control import load_with_config, unload
from tritonbuild.tune.loadgen import LoadGenerator, Result
from tritonbuild.tune.outputs import write_outputs
from tritonbuild.tune.probes import NULL_MODEL, GoldensCheck, null_model
from tritonbuild.tune.report import build_report, finite, server_version_of
from tritonbuild.tune.space import Candidate, Grid

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
    serving: ServingTarget = EMBEDDED,
) -> dict:
    """Returns the report (also written to report_dir/tune-report.json); raises TuneError when no
    candidate meets the constraints (after writing the report)."""
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
        serving=serving,
    )
    return session.run()


class TuneSession(SearchCallbacks):
    """One tune run: the model and its goldens, the server, the load generator's ceiling, the
    measurements the search asks for, the goldens check of its finalists, and the outputs. `run` is
    the order of the phases."""

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
        serving: ServingTarget = EMBEDDED,
    ):
        self.root, self.model, self.report_dir = root, model, report_dir
        # --tritonserver: a local binary or container image (else the embedded)
        self.serving = serving
        self.server_url, self.grpc_url, self.brute = server_url, grpc_url, brute
        self.say = progress or (lambda _m: None)
        self.manifest_model, loaded, rpath = model_and_recipe(root, model, recipe_path)
        self.recipe = loaded.recipe
        self.notes: list[str] = []
        if loaded.digest != self.manifest_model.recipe_sha256:
            self.notes.append(
                f"{rpath} changed since {root} was built: the candidates are edits of the built "
                "config"
            )
        self.spec = tune_override or getattr(self.recipe, "tune", None) or Tune()
        if server_url is None:
            refuse_gpu_model_without_gpu(self.manifest_model, model)
        self.inputs, self.reference = goldens_of(root, self.manifest_model, no_verify, self.notes)
        self.base_mc = read_config(root / model)
        self.grid = Grid(self.spec, self.base_mc)
        check_buckets(self.grid, self.base_mc, model)
        self.loads = loads_of(self.spec)
        # invariant: a config's answers are compared with its own answers alone (it may serve new
        # bits, never bits that depend on batch composition or load); goldens: with the recorded
        # goldens
        self.invariant = self.spec.determinism == "invariant" and self.reference is not None
        self.exact_under_load = self.reference is not None and (
            self.invariant or self.manifest_model.verify.batch_invariance == "require"
        )
        self.processes = processes or max(1, min(8, (os.cpu_count() or 2) // 2))
        self._start_state()

    def _start_state(self) -> None:
        """What the run fills in as it goes."""
        # invariant: each config's own answers to the inputs alone, and per config the golden
        # outputs its own answers differ from
        self.own: dict[Candidate, list[dict]] = {}
        self.new_bits: dict[str, int] = {}
        # what each model name serves: the model's own, and (embedded server) a second copy that
        # keeps Triton's default loaded, so the paired rounds switch between the two without a
        # reload
        self.loaded: dict[str, Candidate | None] = {}
        self.twin: str | None = None
        self.fresh = False
        self.done = 0
        self.load_errors: dict[Candidate, str] = {}
        self.verifications: dict[str, dict] = {}
        # per config: answers compared with the goldens, differing; per finalist: its and the
        # default's readings, round by round
        self.answers: dict[str, dict[str, int]] = {}
        self.paired: dict[str, dict] = {}
        self.ceiling_scaling: list[dict] = []
        self.checker: GoldensCheck | None = None
        self.ev: search.Evaluator | None = None

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
        return write_outputs(finite(report), winner, self.report_dir, self.model, self.loads)

    def start_server(self, stack: ExitStack, scratch: Path) -> None:
        """The embedded tritonserver on a scratch copy of the model (OUT is only read), or the given
        one."""
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
                    launcher=launcher_for(self.serving),
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
        """The load generator's own ceiling: an empty Python model with the same tensors, at the top
        load. The generator doubles its processes (up to the machine's cores) while that raises the
        ceiling by 10 %, so the candidates are measured as far from the client's limit as this
        machine allows."""
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
            f"ceiling {ceiling.throughput:.0f} req/s at {self.loads[-1]} with {self.processes} "
            "processes"
        )
        return ceiling

    def _ceiling_with(self, processes: int) -> Result:
        with LoadGenerator(
            self.grpc_url, NULL_MODEL, self.inputs, None, self.output_names, processes=processes
        ) as generator:
            result = measure_load(generator, self.loads[-1], self.spec)
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
        self.guess = grid_size if self.brute else quick.quick_budget(grid_size, len(self.loads))
        self.t0 = time.monotonic()
        self.ev = search.Evaluator(
            self.measure,
            self.loads,
            sla_p99_ms=self.spec.sla_p99_ms,
            min_vs_default=self.spec.min_vs_default,
            exact_under_load=self.exact_under_load,
            confirm=self.confirm if self.spec.rounds > 1 else None,
        )
        winner = (search.brute if self.brute else quick.quick)(
            self.ev, self.grid, self.grid.default, self.verify
        )
        self.say(
            f"{self.ev.count} measurements of the grid's {grid_size} "
            f"({self.ev.count / grid_size:.0%})"
        )
        return winner
