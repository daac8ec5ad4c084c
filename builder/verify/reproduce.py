"""verify --rebuild: compare OUT with a rebuild of its recipes (made by api in an isolated cache),
file by file."""

from __future__ import annotations

from pathlib import Path

from tritonbuild.backends import REGISTRY
from tritonbuild.core.hashing import sha256_file
from tritonbuild.errors import VerifyError
from tritonbuild.repository.manifest import Manifest
from tritonbuild.verify.models import Reproducibility


def recipes_of(manifest: Manifest) -> list[Path]:
    """The recipes OUT was built from, as recorded (relative to the directory the build ran in),
    unchanged."""
    out, problems = [], []
    for model in manifest.models:
        recipe_path = Path(model.recipe_path)
        if recipe_path in out:
            continue
        if not recipe_path.is_file():
            problems.append(f"{recipe_path} (recipe of {model.name}) is not here")
        elif sha256_file(recipe_path) != model.recipe_sha256:
            problems.append(
                f"{recipe_path} changed since the build (sha256 differs from the manifest)"
            )
        else:
            out.append(recipe_path)
    if problems:
        raise VerifyError(
            f"cannot rebuild: {'; '.join(problems)}",
            hint="run 'verify --rebuild' from the directory "
            "the build ran in, with the recipes it used (or rebuild OUT first)",
        )
    return out


def compare(original: Manifest, rebuilt: Manifest) -> Reproducibility:
    rebuilt_models = {model.name for model in rebuilt.models}
    before = {(model.name, model.version): model.steps for model in original.models}
    inputs_changed = {}
    for model in rebuilt.models:
        old = before.get((model.name, model.version), {})
        keys = sorted(k for k in set(old) | set(model.steps) if old.get(k) != model.steps.get(k))
        if keys:
            inputs_changed[model.name] = (
                f"step {', '.join(keys)} has another cache key: a source, parameter or the "
                "toolchain differs"
            )
    identical, differ, by_nature = 0, [], []
    for rel, entry in sorted(original.files.items()):
        model_name = rel.split("/", 1)[0]
        other = rebuilt.files.get(rel)
        if other is not None and other.sha256 == entry.sha256:
            identical += 1
        elif model_name not in rebuilt_models:
            by_nature.append(
                f"{rel}: {model_name} was not rebuilt here (a build step was skipped: e.g. no GPU "
                "or TensorRT-LLM); its goldens decide"
            )
        elif (
            vendor := REGISTRY.unreproducible(rel)
        ) is not None:  # DESIGN: content-addressed, goldens decide
            by_nature.append(
                f"{rel}: not byte-reproducible by nature (a {vendor.name} build: its "
                f"unreproducible_files); its goldens decide"
            )
        elif other is None:
            differ.append(f"{rel}: not produced by the rebuild")
        else:
            changed = inputs_changed.get(model_name)
            why = (
                f"its inputs changed since the build ({changed})"
                if changed
                else "the generated config differs"
                if rel.endswith("config.pbtxt")
                else "NOT REPRODUCIBLE: same inputs and toolchain, different bytes"
            )
            differ.append(f"{rel}: {why} (sha256 {entry.sha256[:12]} vs {other.sha256[:12]})")
    differ += [
        f"{rel}: only in the rebuild"
        for rel in sorted(set(rebuilt.files) - set(original.files))
        if rel.split("/", 1)[0] in {model.name for model in original.models}
    ]
    return Reproducibility(identical=identical, differ=differ, by_nature=by_nature)
