"""The backend interface: everything a stage may ask of a backend, typed, in one place.

A backend is one class (an instance of `Backend`) registered once in `backends.registry`. Stages ask
the registry; none of them names a backend."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

from tritonbuild.core.hashing import FileHashCache
from tritonbuild.recipe.problem import Problem

# How verify runs a model without --server: live in the embedded tritonserver, only on a
# tritonserver given with --server (live-server), in-process in the backend's reference runtime, or
# not at all.
Route = Literal["live-embedded", "live-server", "in-process", "none"]
ROUTES: tuple[str, ...] = ("live-embedded", "live-server", "in-process", "none")

# (kind, params, inputs): a step's kind, everything besides input files that shapes its output, and
# its input files (absolute path → sha256).
StepSpec = tuple[str, dict, dict[str, str]]
# (check, problems, ok detail): one row of the offline load rules (repository/rules.py reports it).
CheckRow = tuple[str, list[str], str]


class BuildPolicy(str):
    """A problem that breaks tritonbuild's own build policy (e.g. a relocatable repository), not a
    Triton load rule: a failure in a repository tritonbuild built, a note ("not checked: ...") in
    any other."""


class ReleaseFact(str):
    """A problem with some releases of a backend only (a parameter newer releases read unguarded): a
    failure in a repository tritonbuild built (it knows the image it targets), a note naming the
    releases in any other (which release will load it is not written in the repository)."""


@dataclass(frozen=True)
class PlanContext:
    """What plan_steps and describe may use besides the recipe, passed by the planner: the build
    cache directory (remote checkpoints are downloaded under it) and its stat-keyed digest cache of
    input files."""

    cache_dir: Path
    hashes: FileHashCache
    # The interpreter that checks Python files' syntax, and its minor (build --triton-image: the
    # target image's Python, server/target.py); None: the one running the build.
    python: tuple[str, str] | None = None

    def digest(self, path) -> str:
        """sha256 of a build input (through the digest cache)."""
        return self.hashes.sha256(path)


@dataclass(frozen=True)
class StepContext:
    """All a step may read: nothing of the recipe. A recipe field that does not reach `params`
    cannot reach the artefact, so it cannot be missing from the cache key."""

    kind: str
    params: dict
    inputs: dict[str, str]  # absolute path → sha256
    out: Path  # the step writes its files here (its version-directory layout)
    log_dir: Path  # logs and reproduce.sh; may not exist yet
    shared_dir: (
        Path  # per-machine state that never shapes the output (e.g. TensorRT's timing cache)
    )
    timeout_s: int | None = None  # how long a tool may run (not part of the cache key)


class Backend(ABC):
    """One recipe kind (`name`, the recipe's `backend` key) and how it becomes Triton models."""

    # the recipe kind: a recipe's `backend` value, the registry's key (and a plug-in's entry-point
    # name)
    name: ClassVar[str]
    # the pydantic class a recipe of this kind validates as, declared in the backend's own module: a
    # subclass of recipe.models.Named (Recipe for single-model backends) with
    # `backend: Literal[name]` and its own options
    recipe_type: ClassVar[type]
    # step kind → the toolchain keys (core/toolchain.fingerprint) its output depends on (None: all
    # of them)
    step_toolchain: ClassVar[Mapping[str, tuple[str, ...] | None]]
    # toolchain key → the pip distribution whose version it is (the tools this backend's steps run):
    # registering the backend adds them to the fingerprint; a step keyed on a key neither declared
    # here nor known to the core (core/toolchain.known_keys) is refused at registration, so its
    # version cannot silently leave the cache key
    tools: ClassVar[Mapping[str, str]] = {}
    # step kinds that build an engine (a GPU- and vendor-bound artefact): `build --engine MODEL=DIR`
    # supplies one built elsewhere, and `build --matrix` sends a recipe with one missing to a GPU
    # runner
    engine_steps: ClassVar[tuple[str, ...]] = ()
    # Triton's backend name in config.pbtxt ('' for platform-only models such as ensembles)
    triton_backend: ClassVar[str]
    # Triton's load rule for this backend: platform ('' = none given) → default model file name
    model_files: ClassVar[Mapping[str, str] | None] = None
    # Triton backends of other models this backend writes (TensorRT-LLM's LLM-API route writes
    # Python models): its model_file_checks run on those models too, after their own backend's, and
    # say [] for foreign ones
    also_writes: ClassVar[tuple[str, ...]] = ()
    # Repository paths (fnmatch patterns, '*' crosses '/') of files this backend's vendor cannot
    # rebuild bit-identically (TensorRT engines): verify --rebuild leaves them to the goldens
    unreproducible_files: ClassVar[tuple[str, ...]] = ()
    # how verify runs this backend's models without --server (base.Route: live-embedded,
    # live-server, in-process or none)
    route: ClassVar[Route]
    # emitted after the other models, checked against them
    needs_built_models: ClassVar[bool] = False
    # Triton loads the models this one names (depends_on) when it loads it (an ensemble's steps; not
    # BLS calls)
    loads_dependencies: ClassVar[bool] = False
    # where an --engine DIR's files go in the version directory (None: '<step kind's suffix>/')
    prebuilt_prefix: ClassVar[str | None] = None
    # how verify asks a live server: 'infer' (one response per request) or 'generate' (a decoupled
    # model: Triton's generate / generate_stream endpoints; a streamed request compared as the
    # client assembles it)
    live_protocol: ClassVar[str] = "infer"
    # what a server needs to load this backend's models, said where verify could not load one ('' =
    # a server with the backend)
    needs: ClassVar[str] = ""

    @abstractmethod
    def plan_steps(self, loaded, ctx: PlanContext) -> list[StepSpec]:
        """The build steps of a LoadedRecipe (no heavy work: digests, through ctx, not builds)."""

    @abstractmethod
    def run_step(self, ctx: StepContext) -> None:
        """Run one step, reading only ctx; raise backends.StepSkipped when it cannot run here."""

    @abstractmethod
    def derive_io(self, recipe, files: dict[str, Path], recipe_dir: Path) -> tuple[list, list]:
        """(inputs, outputs) as TensorSpecs, from the built files (version-dir path → blob path)."""

    def check_recipe(self, recipe) -> list[Problem]:
        """Cross-field rules only this backend knows (run at load, each named by its key path; the
        registry hands them to the recipe loader, which reports them among the recipe type's generic
        rules)."""
        return []

    def describe(self, loaded, ctx: PlanContext) -> dict:
        """Facts for people attached to the plan (not part of any cache key)."""
        return {}

    def step_timeout(self, recipe, kind: str) -> int | None:
        """How long a step of this kind may run, in seconds, from the recipe (None: no limit of the
        backend's own)."""
        return None

    def default_filename(self, recipe) -> str | None:
        """config.pbtxt's default_model_filename for the generic single-model writer: the load
        rule's file when no platform is given (model_files['']); override when the recipe chooses
        the file."""
        return (self.model_files or {}).get("") or None

    def configure(self, mc, recipe) -> None:  # noqa: B027 - an optional hook: most backends add nothing
        """Backend-specific ModelConfig fields, applied last by the generic single-model writer."""

    # Backends that write their own Triton models (several, or a non-default layout) set `emits` and
    # implement emit(bm, root, store, manifest_model, built) → [ManifestModel]; `built` maps the
    # names of the models emitted so far to their ManifestModel.
    emits: ClassVar[bool] = False

    def emit(self, built_model, root: Path, store, manifest_model: Callable, built: dict) -> list:
        """Write this backend's own Triton models under root (backends that set `emits`): their
        ManifestModels; `built` maps the names of the models emitted so far to theirs."""
        raise NotImplementedError(f"backend {self.name} has no emitter of its own")

    def offline_checks(self, mc, model_dir: Path, versions: list[int]) -> list[CheckRow]:
        """Load rules beyond the generic ones, for a model of this Triton backend: (check, problems,
        ok detail)."""
        return []

    def served_check(self, model, log: str | None) -> tuple[list[str], str | None]:
        """(problems, note) from the log of the server that serves the model (None: no log): what
        its runtime chose against what the model needs. Most backends check nothing."""
        return [], None

    def gpus_needed(self, mc, version_dir: Path) -> int:
        """GPUs one server needs for this model beyond what its instance groups name (a backend that
        places its own devices); 0: nothing beyond them."""
        return 0

    def model_file_checks(self, mc, model_dir: Path, versions: list[int]) -> list[CheckRow]:
        """The load rule on the model's files, without opening them (every build runs it). Default:
        Triton's rule from `model_files`, each version directory holds the default model file of the
        config's platform."""
        files = self.model_files or {}
        if mc.platform not in files:
            return [
                (
                    "model_file",
                    [],
                    f"{mc.default_model_filename or files.get('', '?')} present in every version",
                )
            ]
        filename = mc.default_model_filename or files[mc.platform]
        problems = [
            f"{v}/{filename} is missing (the {mc.backend or self.triton_backend} backend loads "
            "that file)"
            for v in versions
            if not (model_dir / str(v) / filename).exists()
        ]
        return [("model_file", problems, f"{filename} present in every version")]

    def present_model_files(self, mc, model_dir: Path, versions: list[int]) -> list[Path]:
        """Each version's model file that exists: the config's default_model_filename, else the load
        rule's file for its platform (model_files); for model_content_checks."""
        files = self.model_files or {}
        name = mc.default_model_filename or files.get(mc.platform) or files.get("")
        return (
            [path for v in versions if (path := model_dir / str(v) / name).is_file()]
            if name
            else []
        )

    def model_content_checks(self, mc, model_dir: Path, versions: list[int]) -> list[CheckRow]:
        """Checks that open the model's files (verify runs them, after Triton's config rules; a
        build does not pay for them), e.g. the config against the ONNX graph."""
        return []

    def route_detail(self, toolchain: dict[str, str]) -> str:
        """What the in-process route runs (e.g. 'onnxruntime 1.20 in-process')."""
        return ""

    def in_process_runner(self, version_dir: Path, model):
        """A runner (infer, infer_concurrent, close) on the repository's own files, for route
        'in-process'."""
        raise NotImplementedError(f"backend {self.name} has no in-process runner")

    def golden_inputs(self, model) -> list[dict] | None:
        """The requests verify records goldens for (None: seeded inputs generated from the model's
        tensors)."""
        return None

    def runner_extra(self) -> str:
        """The pip extra whose absence makes the in-process runner fail to import."""
        return ""

    # ModelConfig fields adopt_fields turns into recipe keys (for `tritonbuild adopt`)
    adopt_consumes: ClassVar[frozenset[str]] = frozenset()

    def adopt_fields(self, mc) -> dict:
        """Recipe keys of this backend's own, from an existing config's adopt_consumes fields
        (adopt)."""
        return {}

    def adopt_calls(self, mc) -> list[str]:
        """The models an existing config of this backend calls, in step order (adopt takes them
        first, and refuses this one naming the step whose model it cannot take)."""
        return []

    def adopt_members(self, mc, model_dir: Path) -> list[str]:
        """Other models of the repository this model's recipe writes too (a group): adopt takes them
        with it."""
        return []

    def adopt_recipe(self, mc, model_dir: Path, out: Path) -> tuple[dict, int] | None:
        """An existing model directory as a recipe of this backend's own shape, its files copied
        under out, and the version adopted; None: the generic adoption (source.path = the model
        file) applies."""
        return None
