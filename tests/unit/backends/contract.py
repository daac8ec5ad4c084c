"""The contract every backend passes (as fsspec's abstract tests do for filesystems): subclass BackendContract,
name the backend and the recipes that exercise it; pytest collects the subclass (Test*) with every check below.

Backends whose tools are missing here (TensorRT, TensorRT-LLM engines) still pass the parts that run without
them: their plan, their params, their skipped steps saying so, their declared route."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tritonbuild.backends import REGISTRY, StepContext, StepSkipped
from tritonbuild.backends.base import ROUTES, PlanContext
from tritonbuild.core.hashing import FileHashCache
from tritonbuild.recipe.load import load_recipes

# What the embedded tritonserver (nvidia-pytriton's) can load: the Python backend and ensembles (FACTS).
EMBEDDED_TRITON_BACKENDS = ("python", "ensemble")


def _tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _copy_inputs(inputs: dict[str, str], dest: Path) -> dict[str, str]:
    """The step's input files copied under dest, keeping their layout relative to their common directory."""
    paths = [Path(p).resolve() for p in inputs]
    common = Path(os.path.commonpath(paths)) if len(paths) > 1 else paths[0].parent
    copied = {}
    for (_src, digest), resolved in zip(inputs.items(), paths, strict=True):
        target = dest / resolved.relative_to(common)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(resolved, target)
        copied[str(target)] = digest
    return copied


class BackendContract:
    backend_name: str
    recipes: tuple[Path, ...]  # recipe files; the subject and the models it needs
    subject: str  # the model (recipe name) under test
    skipped_here: frozenset[str] = (
        frozenset()
    )  # step kinds that cannot run on this machine (tool missing)

    @pytest.fixture
    def backend(self):
        return REGISTRY.get(self.backend_name)

    @pytest.fixture(scope="class")
    @classmethod
    def recipe_files(cls, tmp_path_factory) -> list[Path]:
        """The recipe files (override to write them, e.g. for a backend registered only in a test)."""
        return list(cls.recipes)

    @pytest.fixture
    def plan_ctx(self, tmp_path) -> PlanContext:
        """What the planner passes plan_steps: a cache directory of the test's own, no saved digests."""
        return PlanContext(cache_dir=tmp_path / "cache", hashes=FileHashCache(None))

    @pytest.fixture
    def loaded(self, backend, recipe_files):
        by_name = {lr.recipe.name: lr for lr in load_recipes(recipe_files, REGISTRY.recipe_kinds())}
        return by_name[self.subject]

    @pytest.fixture(scope="class")
    @classmethod
    def built(cls, tmp_path_factory, recipe_files):
        """(BuildResult, repository root) for the recipes, built through the real stages."""
        from tritonbuild import api

        out = tmp_path_factory.mktemp("repo") / "out"
        result, _manifest = api.build_repository(recipe_files, out)
        return result, out

    def test_registered_with_its_recipe_kind(self, backend, loaded):
        assert backend.name == self.backend_name == loaded.recipe.backend
        assert isinstance(loaded.recipe, backend.recipe_type)

    def test_plan_is_deterministic_and_declares_its_step_kinds(self, backend, loaded, plan_ctx):
        first, second = backend.plan_steps(loaded, plan_ctx), backend.plan_steps(loaded, plan_ctx)
        assert first == second
        for kind, _params, inputs in first:
            assert kind in backend.step_toolchain, (
                f"step kind {kind} is not declared in step_toolchain"
            )
            assert all(Path(p).is_file() or "://" in p for p in inputs), (
                "inputs are files (or pinned URLs)"
            )

    def test_params_are_json_serialisable(self, backend, loaded, plan_ctx):
        for _kind, params, _inputs in backend.plan_steps(loaded, plan_ctx):
            assert json.loads(json.dumps(params, sort_keys=True)) == params

    def test_run_step_reads_only_its_context(
        self, backend, loaded, plan_ctx, tmp_path, monkeypatch
    ):
        """The same step run on its original inputs, and on copies elsewhere with another cwd, writes the same
        files: nothing of the recipe (or its directory) reaches the step except through the context."""
        for i, (kind, params, inputs) in enumerate(backend.plan_steps(loaded, plan_ctx)):
            runs = []
            for variant in ("original", "copied"):
                base = tmp_path / f"{i}-{variant}"
                step_inputs = (
                    inputs if variant == "original" else _copy_inputs(inputs, base / "inputs")
                )
                ctx = StepContext(
                    kind=kind,
                    params=json.loads(json.dumps(params)),
                    inputs=step_inputs,
                    out=base / "out",
                    log_dir=base / "logs",
                    shared_dir=base / "shared",
                )
                (base / "out").mkdir(parents=True)
                (base / "elsewhere").mkdir()
                monkeypatch.chdir(base / "elsewhere")
                if kind in self.skipped_here:
                    with pytest.raises(StepSkipped):
                        backend.run_step(ctx)
                    break
                backend.run_step(ctx)
                runs.append(_tree(base / "out"))
            if kind not in self.skipped_here:
                assert runs[0], f"{kind} wrote nothing"
                assert runs[0] == runs[1], f"{kind} depends on more than its context"

    def test_derive_io_agrees_with_the_written_config(self, built):
        from tritonbuild.recipe.models import DTYPES
        from tritonbuild.triton.config import model_config_pb2, parse

        result, out = built
        bm = next(m for m in result.models if m.plan.name == self.subject)
        if not (out / self.subject / "config.pbtxt").is_file():
            assert any(s.status == "skipped" for s in bm.steps), (
                "no config written, yet no step was skipped"
            )
            pytest.skip(f"{self.subject} is not assembled here (a step was skipped: {bm.steps})")
        mc = parse((out / self.subject / "config.pbtxt").read_bytes())
        pb2 = model_config_pb2()
        for derived, written in ((bm.inputs, mc.input), (bm.outputs, mc.output)):
            assert [(t.name, list(t.dims)) for t in derived] == [
                (t.name, list(t.dims)) for t in written
            ]
            assert [pb2.DataType.Name(t.data_type) for t in written] == [
                DTYPES[t.dtype] for t in derived
            ]

    def test_load_rules_pass(self, built):
        from tritonbuild.repository.rules import check_model_dir

        _result, out = built
        models = sorted(p.name for p in out.iterdir() if (p / "config.pbtxt").is_file())
        if self.subject not in models:
            pytest.skip(f"{self.subject} is not assembled here")
        # as verify runs them: the model files opened too (each backend's model_content_checks)
        failed = [f for m in models for f in check_model_dir(out / m, model_files=True) if not f.ok]
        assert failed == []

    def test_route_is_declared_and_honest(self, backend, built):
        assert backend.route in ROUTES
        _result, out = built
        if backend.route == "live-embedded":
            assert backend.triton_backend in EMBEDDED_TRITON_BACKENDS, (
                f"{backend.name} claims the embedded server, which cannot load {backend.triton_backend!r} models"
            )
        if backend.route == "in-process":
            from tritonbuild.repository.manifest import read_manifest
            from tritonbuild.verify.goldens import generate_inputs

            m = read_manifest(out).model(self.subject)
            runner = backend.in_process_runner(out / m.name / str(m.version), m)
            try:
                got = runner.infer(generate_inputs(m)[0])
            finally:
                runner.close()
            assert sorted(got) == sorted(t.name for t in m.outputs)
