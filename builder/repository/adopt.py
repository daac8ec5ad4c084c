"""`tritonbuild adopt DIR`: an existing repository becomes recipes that build the same Triton config, so that it
can be built, verified with goldens, published and rolled back like ours. Python-backend models (their model.py
and the files beside it in the version directory) are adopted; a config field no recipe can express is refused by
name rather than dropped, and any other backend is refused with the reason (its model file is not rebuilt from a
recipe here)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import yaml
from google.protobuf import text_format

from tritonbuild.backends import REGISTRY
from tritonbuild.errors import UsageError
from tritonbuild.repository.existing import config_tensors
from tritonbuild.repository.rules import VERSION_RE
from tritonbuild.triton.config import parse

# ModelConfig fields a recipe expresses (the rest must be absent or at their default)
_EXPRESSED = {"name", "backend", "max_batch_size", "input", "output", "instance_group", "dynamic_batching",
              "parameters", "version_policy", "default_model_filename"}
_KINDS = {"KIND_CPU": "cpu", "KIND_GPU": "gpu", "KIND_AUTO": "auto", "KIND_MODEL": "model"}


@dataclass(frozen=True)
class Adopted:
    name: str
    version: int
    recipe: Path


def _unexpressed(mc) -> list[str]:
    return sorted(field.name for field, _ in mc.ListFields() if field.name not in _EXPRESSED)


def _batching(mc) -> dict | None:
    if not mc.HasField("dynamic_batching"):
        return None
    db = mc.dynamic_batching
    out = {"preferred_batch_sizes": list(db.preferred_batch_size),
           "max_queue_delay_us": db.max_queue_delay_microseconds, "preserve_ordering": db.preserve_ordering}
    if db.priority_levels or db.HasField("default_queue_policy") or db.priority_queue_policy:
        raise UsageError(f"{mc.name}: dynamic_batching priorities and queue policies are not adopted yet",
                         hint="adopt the model without them, then add 'batching:' to its recipe by hand")
    return {key: value for key, value in out.items() if value}


def _recipe(model_dir: Path, mc, version: int, files: list[str], owner) -> dict:
    recipe = {"name": model_dir.name, "version": version, "backend": owner.name,
              "source": {"path": f"{model_dir.name}/{version}/{owner.model_files['']}",
                         **({"files": [f"{model_dir.name}/{version}/{f}" for f in files]} if files else {})},
              "max_batch_size": mc.max_batch_size,
              "inputs": [t.model_dump(mode="json", exclude_defaults=True) | {"dims": t.dims}
                         for t in config_tensors(mc, "input")],
              "outputs": [t.model_dump(mode="json", exclude_defaults=True) | {"dims": t.dims}
                          for t in config_tensors(mc, "output")],
              "instances": [{"kind": _KINDS[type(g).Kind.Name(g.kind)], "count": g.count or 1,
                             **({"gpus": list(g.gpus)} if g.gpus else {})} for g in mc.instance_group]
              or [{"kind": "cpu", "count": 1}],
              "verify": {"goldens": f"goldens/{model_dir.name}.npz"}}
    if any(g["kind"] == "gpu" for g in recipe["instances"]):
        recipe["target"] = "gpu"
    batching = _batching(mc)
    if batching is not None:
        recipe["batching"] = batching
    if mc.parameters:
        recipe["parameters"] = {key: value.string_value for key, value in sorted(mc.parameters.items())}
    kind = mc.version_policy.WhichOneof("policy_choice")
    if kind == "latest":
        recipe["version_policy"] = {"latest": mc.version_policy.latest.num_versions}
    elif kind == "specific":
        recipe["version_policy"] = {"specific": list(mc.version_policy.specific.versions)}
    elif kind == "all":
        recipe["version_policy"] = {"all": True}
    return recipe


def _adoptable(owner) -> bool:
    """A backend whose recipe names its model file as source.path, declares its tensors, and that the embedded
    server runs (so goldens can be recorded here): the python backend's models."""
    return owner is not None and owner.route == "live-embedded" and bool((owner.model_files or {}).get(""))


def adopt(root: Path, out: Path) -> list[Adopted]:
    """Recipes for root's models in out (one YAML per model, its newest version; the model's files copied under
    out/<name>/<version>/). The caller loads them back (the recipe rules)."""
    adopted = []
    for model_dir in sorted(d for d in root.iterdir() if d.is_dir() and not d.name.startswith(".")):
        try:
            mc = parse((model_dir / "config.pbtxt").read_bytes())
        except FileNotFoundError:
            raise UsageError(f"{model_dir.name} has no config.pbtxt: adopt reads the config it reproduces",
                             where=str(model_dir), hint="write its config.pbtxt (Triton's autocompleted one: "
                             "GET v2/models/<name>/config on a server that loaded it)") from None
        except (text_format.ParseError, UnicodeDecodeError) as e:
            raise UsageError(f"{model_dir.name}/config.pbtxt does not parse: {e}", where=str(model_dir),
                             hint=f"'tritonbuild verify {root}' shows Triton's refusal") from None
        owner = REGISTRY.for_config(mc.backend, mc.platform)
        if not _adoptable(owner):
            raise UsageError(f"{model_dir.name}: backend {mc.backend or mc.platform or '(none)'} is not adopted "
                             "yet (models whose model file is the recipe's source and that the embedded server "
                             "runs are: the python backend's)", where=str(model_dir),
                             hint="publish the repository as it is ('tritonbuild publish DIR URL'), or write a "
                                  "recipe for this model by hand")
        filename = owner.model_files[""]
        extra = _unexpressed(mc) + (["default_model_filename"] if mc.default_model_filename not in
                                    ("", filename) else [])
        if extra:
            raise UsageError(f"{model_dir.name}: config fields {extra} have no recipe key yet", where=str(model_dir),
                             hint="publish the repository as it is ('tritonbuild publish DIR URL')")
        versions = sorted(int(d.name) for d in model_dir.iterdir() if d.is_dir() and VERSION_RE.match(d.name))
        if not versions or not (model_dir / str(versions[-1]) / filename).is_file():
            raise UsageError(f"{model_dir.name}: no version directory with a {filename}", where=str(model_dir),
                             hint=f"the {owner.name} backend loads <version>/{filename}")
        version = versions[-1]
        src = model_dir / str(version)
        files = sorted(p.relative_to(src).as_posix() for p in src.rglob("*")
                       if p.is_file() and p.name != filename and "__pycache__" not in p.parts)
        dest = out / model_dir.name / str(version)
        shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)
        path = out / f"{model_dir.name}.yaml"
        path.write_text(yaml.safe_dump(_recipe(model_dir, mc, version, files, owner), sort_keys=False))
        adopted.append(Adopted(model_dir.name, version, path))
    if not adopted:
        raise UsageError(f"{root} holds no model directory", hint="pass a Triton model repository")
    return adopted
