"""verify --rebuild: compare OUT with a rebuild of its recipes (made by api in an isolated cache), file by file."""

from __future__ import annotations

from pathlib import Path

from tritonbuild.core.hashing import sha256_file
from tritonbuild.errors import VerifyError
from tritonbuild.repository.manifest import Manifest
from tritonbuild.verify.models import Reproducibility

# Artefacts their vendor cannot rebuild bit-identically (DESIGN: content-addressed, verified on goldens instead).
BY_NATURE = (".plan", ".engine")


def recipes_of(manifest: Manifest) -> list[Path]:
    """The recipes OUT was built from, as recorded (relative to the directory the build ran in), unchanged."""
    out, problems = [], []
    for m in manifest.models:
        p = Path(m.recipe_path)
        if p in out:
            continue
        if not p.is_file():
            problems.append(f"{p} (recipe of {m.name}) is not here")
        elif sha256_file(p) != m.recipe_sha256:
            problems.append(f"{p} changed since the build (sha256 differs from the manifest)")
        else:
            out.append(p)
    if problems:
        raise VerifyError(f"cannot rebuild: {'; '.join(problems)}", hint="run 'verify --rebuild' from the directory "
                          "the build ran in, with the recipes it used (or rebuild OUT first)")
    return out


def compare(original: Manifest, rebuilt: Manifest) -> Reproducibility:
    rebuilt_models = {m.name for m in rebuilt.models}
    before = {(m.name, m.version): m.steps for m in original.models}
    inputs_changed = {}
    for m in rebuilt.models:
        old = before.get((m.name, m.version), {})
        keys = sorted(k for k in set(old) | set(m.steps) if old.get(k) != m.steps.get(k))
        if keys:
            inputs_changed[m.name] = f"step {', '.join(keys)} has another cache key: a source, parameter or the " \
                                     "toolchain differs"
    identical, differ, by_nature = 0, [], []
    for rel, entry in sorted(original.files.items()):
        model = rel.split("/", 1)[0]
        other = rebuilt.files.get(rel)
        if other is not None and other.sha256 == entry.sha256:
            identical += 1
        elif model not in rebuilt_models:
            by_nature.append(f"{rel}: {model} was not rebuilt here (a build step was skipped: e.g. no GPU or "
                             "TensorRT-LLM); its goldens decide")
        elif rel.endswith(BY_NATURE) or "/engine/" in rel:
            by_nature.append(f"{rel}: an engine is not byte-reproducible by nature (TensorRT); its goldens decide")
        elif other is None:
            differ.append(f"{rel}: not produced by the rebuild")
        else:
            changed = inputs_changed.get(model)
            why = (f"its inputs changed since the build ({changed})" if changed else
                   "the generated config differs" if rel.endswith("config.pbtxt") else
                   "NOT REPRODUCIBLE: same inputs and toolchain, different bytes")
            differ.append(f"{rel}: {why} (sha256 {entry.sha256[:12]} vs {other.sha256[:12]})")
    differ += [f"{rel}: only in the rebuild" for rel in sorted(set(rebuilt.files) - set(original.files))
               if rel.split("/", 1)[0] in {m.name for m in original.models}]
    return Reproducibility(identical=identical, differ=differ, by_nature=by_nature)
