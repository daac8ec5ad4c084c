"""Every registered backend passes the shared contract (tests/unit/backends/contract.py), the toy plug-in too."""

from __future__ import annotations

import importlib.util
import shutil

import pytest

from tests.conftest import EXAMPLES, ROOT
from tests.plugins.affine import AffineBackend, write_recipe
from tests.unit.backends.contract import BackendContract
from tritonbuild.backends import REGISTRY
from tritonbuild.backends.base import PlanContext
from tritonbuild.core.hashing import FileHashCache

NO_TENSORRT = shutil.which("trtexec") is None and importlib.util.find_spec("tensorrt") is None
NO_TRTLLM = importlib.util.find_spec("tensorrt_llm") is None or shutil.which("nvidia-smi") is None
PIPELINE_STEPS = (EXAMPLES / "feature-normalizer.yaml", EXAMPLES / "risk-scorer.yaml")


def test_every_registered_backend_has_a_contract_subclass():
    covered = {cls.backend_name for cls in BackendContract.__subclasses__()}
    assert set(REGISTRY.names()) <= covered, "add a BackendContract subclass for every backend"


class TestPython(BackendContract):
    backend_name, subject = "python", "risk-scorer"
    recipes = (EXAMPLES / "risk-scorer.yaml",)


@pytest.mark.slow
class TestOnnxRuntime(BackendContract):
    backend_name, subject = "onnxruntime", "text-encoder"
    recipes = (EXAMPLES / "text-encoder.yaml",)


@pytest.mark.slow
class TestPyTorch(BackendContract):
    backend_name, subject = "pytorch", "image-embedder"
    recipes = (EXAMPLES / "image-embedder.yaml",)


class TestTensorRT(BackendContract):
    backend_name, subject = "tensorrt", "scaler-trt"
    recipes = (EXAMPLES / "scaler-trt.yaml",)
    skipped_here = frozenset({"tensorrt.engine"} if NO_TENSORRT else ())


class TestTensorRTLLM(BackendContract):
    backend_name, subject = "tensorrtllm", "tiny-llama"
    recipes = (EXAMPLES / "tiny-llama-int4.yaml",)
    skipped_here = frozenset({"trtllm.engine"} if NO_TRTLLM else ())


class TestVLLM(BackendContract):
    backend_name, subject = "vllm", "tiny-llama-vllm"
    recipes = (ROOT / "recipes" / "gpu" / "tiny-llama-vllm.yaml",)

    def test_its_own_load_checks_run_through_the_registry(self, built):
        from tritonbuild.repository.rules import check_model_dir

        _result, out = built
        config = out / self.subject / "config.pbtxt"
        text = config.read_text()
        assert "max_batch_size: 0" in text
        config.write_text(text.replace("max_batch_size: 0", "max_batch_size: 4"))
        try:
            findings = {f.check: f for f in check_model_dir(out / self.subject)}
        finally:
            config.write_text(text)
        assert not findings["vllm"].ok and "needs max_batch_size 0" in findings["vllm"].detail


class TestEnsemble(BackendContract):
    backend_name, subject = "ensemble", "risk-pipeline"
    recipes = (EXAMPLES / "risk-pipeline.yaml", *PIPELINE_STEPS)


class TestBLS(BackendContract):
    backend_name, subject = "bls", "risk-pipeline-bls"
    recipes = (EXAMPLES / "risk-pipeline-bls.yaml", *PIPELINE_STEPS)


class TestAffinePlugin(BackendContract):
    """The toy backend: registered for this class only."""

    backend_name, subject = "affine", "affine-demo"

    @pytest.fixture(scope="class", autouse=True)
    @classmethod
    def _registered(cls):
        with REGISTRY.registered(AffineBackend()):
            yield

    @pytest.fixture(scope="class")
    @classmethod
    def recipe_files(cls, tmp_path_factory):
        return [write_recipe(tmp_path_factory.mktemp("affine"))]


def test_the_contract_catches_a_step_that_reads_beyond_its_context(tmp_path, monkeypatch):
    """A step reading a file next to its input (not an input itself) passes on the original tree and writes
    something else on copies: the contract's check fails, so it can fail."""
    from pathlib import Path

    from tritonbuild.recipe.load import load_recipes

    with REGISTRY.registered(AffineBackend()):
        (loaded,) = load_recipes([write_recipe(tmp_path)], REGISTRY.recipe_kinds())
    (tmp_path / "notes.txt").write_text("beside the recipe, in no step's inputs")

    class Leaky(AffineBackend):
        def run_step(self, ctx):
            super().run_step(ctx)
            beside = Path(next(iter(ctx.inputs))).with_name("notes.txt")
            (ctx.out / "notes.txt").write_text(beside.read_text() if beside.is_file() else "")

    (tmp_path / "run").mkdir()
    plan_ctx = PlanContext(cache_dir=tmp_path / "cache", hashes=FileHashCache(None))
    with pytest.raises(AssertionError, match="depends on more than its context"):
        BackendContract().test_run_step_reads_only_its_context(
            Leaky(), loaded, plan_ctx, tmp_path / "run", monkeypatch
        )
    BackendContract().test_run_step_reads_only_its_context(
        AffineBackend(), loaded, plan_ctx, tmp_path / "run2", monkeypatch
    )


def test_the_contract_catches_a_route_the_embedded_server_cannot_take(tmp_path):
    class Boastful(AffineBackend):
        triton_backend = "onnxruntime"  # still claims route live-embedded

    with pytest.raises(AssertionError, match="claims the embedded server"):
        BackendContract().test_route_is_declared_and_honest(Boastful(), (None, tmp_path))
