"""A recipe's config.pbtxt as a ModelConfig (the generic single-model writer), warmup and batching
included."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from tritonbuild.core.cas import FileEntry
from tritonbuild.errors import BuildError
from tritonbuild.recipe.models import DTYPES, Recipe, TensorSpec
from tritonbuild.triton.batching import write_dynamic_batching
from tritonbuild.triton.config import KINDS, add_tensors, model_config_pb2


def build_model_config(
    recipe: Recipe, inputs: list[TensorSpec], outputs: list[TensorSpec], backend
):
    pb2 = model_config_pb2()
    mc = pb2.ModelConfig()
    mc.name = recipe.name
    mc.max_batch_size = recipe.max_batch_size
    add_tensors(mc.input, inputs, pb2, True)
    add_tensors(mc.output, outputs, pb2, False)
    for tensor in mc.output:  # the labels file lands beside config.pbtxt (assemble)
        if tensor.name in recipe.labels:
            tensor.label_filename = PurePosixPath(recipe.labels[tensor.name]).name
    vp = recipe.version_policy
    if vp is None or vp.latest is not None:
        mc.version_policy.latest.num_versions = vp.latest if vp else 1
    elif vp.specific is not None:
        mc.version_policy.specific.versions.extend(vp.specific)
    else:
        mc.version_policy.all.SetInParent()
    for g in recipe.instances:
        ig = mc.instance_group.add()
        ig.kind = pb2.ModelInstanceGroup.Kind.Value(KINDS[g.kind])
        ig.count = g.count
        ig.gpus.extend(g.gpus)
    if recipe.batching is not None:
        write_dynamic_batching(mc, recipe.batching.model_dump())
    for k in sorted(recipe.parameters):
        mc.parameters[k].string_value = recipe.parameters[k]
    filename = backend.default_filename(recipe)
    if filename:
        mc.default_model_filename = filename
    backend.configure(
        mc, recipe
    )  # last: it may refine what the generic fields set (e.g. TensorRT profiles)
    if recipe.warmup is not None:
        add_warmup(mc, recipe.warmup, inputs, recipe.verify.dynamic_size, pb2)
    return mc


def add_warmup(
    mc, warmup, inputs: list[TensorSpec], dynamic_size: int, pb2, files: dict | None = None
) -> None:
    """model_warmup: one sample; -1 dims become dynamic_size (or the golden sample's shape via
    files)."""
    mc.ClearField("model_warmup")
    w = mc.model_warmup.add()
    w.name = f"{warmup.data}_sample"
    w.batch_size = warmup.batch_size
    w.count = warmup.count
    for t in inputs:
        wi = w.inputs[t.name]
        wi.data_type = pb2.DataType.Value(DTYPES[t.dtype])
        if files is not None:
            dims, filename = files[t.name]
            wi.dims.extend(dims)
            wi.input_data_file = filename
        else:
            wi.dims.extend(dynamic_size if d == -1 else d for d in t.dims)
            if warmup.data == "random":
                wi.random_data = True
            else:
                wi.zero_data = True


def place_labels(store, model_plan, model_dir: Path, known: dict) -> None:
    """The recipe's labels files beside config.pbtxt (Triton reads label_filename from the model's
    directory), through the store like the version's files; the manifest lists each with its
    digest."""
    for rel in model_plan.recipe.labels.values():
        src = Path(model_plan.recipe_dir) / rel
        if not src.is_file():
            raise BuildError(
                f"labels file not found: {src}",
                where=model_plan.recipe_path,
                hint="fix the recipe's labels path (relative to the recipe's directory)",
            )
        digest, size = store.put_file(src)
        store.materialize(digest, model_dir / src.name)
        known[f"{model_plan.name}/{src.name}"] = FileEntry(sha256=digest, size=size)
