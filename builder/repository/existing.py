"""A repository tritonbuild did not build (hand-written, template-filled) described by a manifest
made from what is there: one ManifestModel per model version, from its config.pbtxt and files, so
that it can be published and rolled back like a built one. It names no recipe (recipe_path is empty)
and has no build steps."""

from __future__ import annotations

from pathlib import Path

from tritonbuild.backends import REGISTRY
from tritonbuild.core.cas import FileEntry
from tritonbuild.core.hashing import sha256_file, sha256_json, tree_files
from tritonbuild.errors import TritonBuildError
from tritonbuild.recipe.models import DTYPES, TensorSpec, Verify
from tritonbuild.repository.manifest import NOT_IN_MANIFEST, ManifestModel
from tritonbuild.repository.rules import VERSION_RE
from tritonbuild.triton.config import ConfigParseError, read_config

_DTYPE_NAMES = {triton: ours for ours, triton in DTYPES.items()}


def file_entries(root: Path) -> dict[str, FileEntry]:
    """Every regular file of the repository (relative path → sha256, size), hashed once."""
    return {
        rel.as_posix(): FileEntry(sha256=sha256_file(root / rel), size=(root / rel).stat().st_size)
        for rel in tree_files(root)
        if rel.as_posix() not in NOT_IN_MANIFEST
    }


def config_tensors(mc, field: str) -> list[TensorSpec]:
    """The config's tensors as TensorSpecs; one our recipe types cannot express (a dtype such as
    TYPE_FP8) is left out: the manifest describes, Triton's config.pbtxt stays what is served."""
    out = []
    for tensor in getattr(mc, field):
        kind = (
            type(tensor)
            .DESCRIPTOR.fields_by_name["data_type"]
            .enum_type.values_by_number[tensor.data_type]
            .name
        )
        try:
            out.append(
                TensorSpec(
                    name=tensor.name,
                    dtype=_DTYPE_NAMES[kind],
                    dims=list(tensor.dims),
                    **({"optional": tensor.optional} if field == "input" else {}),
                )
            )
        except (KeyError, ValueError):
            continue
    return out


def existing_models(
    root: Path, files: dict[str, FileEntry], error: type[TritonBuildError]
) -> list[ManifestModel]:
    """A ManifestModel per numeric version directory of each model; a model without a config.pbtxt,
    or with one that does not parse, raises `error` (publishing pins versions in config.pbtxt)."""
    out = []
    for model_dir in sorted(d for d in root.iterdir() if d.is_dir() and not d.name.startswith(".")):
        name = model_dir.name
        try:
            mc = read_config(model_dir)
        except FileNotFoundError:
            raise error(
                f"{name} has no config.pbtxt (Triton autocompletes it), but publishing pins the "
                "live version in config.pbtxt",
                where=str(model_dir),
                hint=f"write {model_dir / 'config.pbtxt'} (at least backend and max_batch_size)",
            ) from None
        except ConfigParseError as e:
            raise error(
                f"{name}/config.pbtxt is not a valid Triton model config: {e}",
                where=str(model_dir),
                hint=f"tritonbuild verify {root} shows Triton's own refusal",
            ) from None
        owner = REGISTRY.for_config(mc.backend, mc.platform)
        kinds = {type(group).Kind.Name(group.kind) for group in mc.instance_group}
        for version in sorted(
            int(d.name) for d in model_dir.iterdir() if d.is_dir() and VERSION_RE.match(d.name)
        ):
            prefix = f"{name}/{version}/"
            identity = sha256_json(
                {k[len(prefix) :]: e.sha256 for k, e in files.items() if k.startswith(prefix)}
            )
            out.append(
                ManifestModel(
                    name=name,
                    version=version,
                    backend=owner.name if owner else (mc.backend or mc.platform or "?"),
                    target="gpu" if "KIND_GPU" in kinds else "cpu",
                    recipe_path="",
                    recipe_sha256="",
                    model_identity=identity,
                    inputs=config_tensors(mc, "input"),
                    outputs=config_tensors(mc, "output"),
                    max_batch_size=mc.max_batch_size,
                    verify=Verify(),
                    steps={},
                    depends_on=sorted({step.model_name for step in mc.ensemble_scheduling.step}),
                )
            )
    return out
