"""What tune works on: the built model and its recipe, its goldens, the loads of the range, the
server's gRPC endpoint."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import ValidationError

from tritonbuild.backends import REGISTRY
from tritonbuild.core.stores import split_url
from tritonbuild.errors import UsageError, VerifyError
from tritonbuild.recipe.models import Tune
from tritonbuild.repository.manifest import ManifestModel, newest_version
from tritonbuild.tune.space import BUCKETS_PARAMETER, Grid


def loads_of(tune_spec: Tune) -> list[str]:
    return [f"r{rate:g}" for rate in sorted(tune_spec.request_rates)] + [
        f"c{clients}" for clients in sorted(set(tune_spec.concurrency))
    ]


def model_and_recipe(root: Path, model: str, recipe_path: Path | None):
    from tritonbuild.recipe import load_recipes

    manifest_model = newest_version(root, model)
    owner = REGISTRY.for_manifest(
        manifest_model.backend
    )  # a pipeline (ensemble, BLS) serves the models it calls
    if (
        (owner is not None and owner.needs_built_models)
        or manifest_model.llm
        or manifest_model.depends_on
    ):
        raise UsageError(
            f"{model!r} is a {manifest_model.backend} pipeline/LLM model: tune serves one model's "
            "own config",
            hint="tune the models it calls",
        )
    rpath = Path(recipe_path or manifest_model.recipe_path)
    if not rpath.is_file():
        raise UsageError(
            f"the recipe of {model!r} is not at {rpath}",
            hint="run from where you built it, or pass --recipe PATH",
        )
    loaded = next(
        (
            loaded_recipe
            for loaded_recipe in load_recipes([rpath], REGISTRY.recipe_kinds())
            if getattr(loaded_recipe.recipe, "name", None) == model
        ),
        None,
    )
    if loaded is None:
        raise UsageError(
            f"{rpath} does not define model {model!r}", hint="pass --recipe PATH of that model"
        )
    return manifest_model, loaded, rpath


def recipe_for(root: Path, model: str, recipe_path: Path | None = None) -> tuple[Path, Tune]:
    """The recipe file of a built model and its tune section (defaults when absent)."""
    _m, loaded, rpath = model_and_recipe(Path(root), model, recipe_path)
    return rpath, getattr(loaded.recipe, "tune", None) or Tune()


def with_flags(spec: Tune, **flags) -> Tune:
    """The recipe's tune section with the command line's flags (those given) in place of its
    keys."""
    update = {key: value for key, value in flags.items() if value is not None}
    if not update:
        return spec
    try:
        return Tune.model_validate({**spec.model_dump(), **update})
    except ValidationError as e:  # a flag the recipe's tune section cannot take with its other keys
        raise UsageError(
            f"tune: {e.errors()[0]['msg']}",
            hint="set the keys it names in the recipe's tune section, or drop the flag",
        ) from None


def grpc_of(http_url: str) -> str:
    """--server is Triton's HTTP URL; its gRPC endpoint is the same host on 8001 unless --grpc or
    TRITONBUILD_GRPC_URL says otherwise."""
    env = os.environ.get("TRITONBUILD_GRPC_URL")
    if env:
        return env
    host = split_url(http_url)[1].rsplit(":", 1)[0]
    return f"{host}:8001"


def refuse_gpu_model_without_gpu(manifest_model: ManifestModel, model: str) -> None:
    """A model built for a GPU is tuned on a machine with one (or on a given server)."""
    from tritonbuild.core.toolchain import fingerprint

    if manifest_model.target == "gpu" and not fingerprint().get("gpu_name"):
        raise UsageError(
            f"{model!r} targets a GPU and this machine has none",
            hint="run tune on the GPU machine that will serve it, or pass --server URL",
        )


def goldens_of(root: Path, manifest_model: ManifestModel, no_verify: bool, notes: list[str]):
    """(inputs, reference answers) from the model's goldens; with --no-verify and no goldens,
    generated inputs and no reference (said in notes)."""
    from tritonbuild.core.npz import read_npz
    from tritonbuild.verify.goldens import from_npz_arrays, generate_inputs

    if manifest_model.goldens and (root / manifest_model.goldens).is_file():
        return from_npz_arrays(read_npz(root / manifest_model.goldens))
    if not no_verify:
        raise VerifyError(
            f"{manifest_model.name!r} has no goldens: tune would not know whether a faster config "
            "changes its answers",
            where=str(root / manifest_model.name),
            hint="record them ('tritonbuild verify OUT --record', commit, rebuild) or pass "
            "--no-verify (recorded in the report)",
        )
    notes.append("NOT VERIFIED: --no-verify; candidates were not checked against goldens")
    return generate_inputs(manifest_model), None


def check_buckets(grid: Grid, base_mc, model: str) -> None:
    """tune.buckets: the model's wrapper must read them (built with batch_buckets) and they must
    hold every batch the candidates may form."""
    buckets = grid.buckets
    if buckets is None:
        return
    if BUCKETS_PARAMETER not in base_mc.parameters:
        raise UsageError(
            f"tune.buckets: {model!r} was not built with batch_buckets (no bucket wrapper "
            "reads them)",
            hint="set batch_buckets in the recipe (a Python model), rebuild",
        )
    if buckets[-1] < grid.cap:
        raise UsageError(
            f"tune.buckets {list(buckets)}: the largest is below max_batch_size {grid.cap}",
            hint=f"add {grid.cap} as the last bucket",
        )
