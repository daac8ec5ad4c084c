"""`tritonbuild adopt DIR`: an existing repository becomes recipes that build the same Triton
config, so that it can be built, verified with goldens, published and rolled back like ours. A model
whose recipe takes its model file as `source.path` (the python backend's model.py and the files
beside it, onnxruntime's model.onnx, pytorch's TorchScript model.pt) is adopted here, from its
config; a backend with a recipe of another shape adopts its own models (Backend.adopt_recipe: vLLM's
model.json, an ensemble's steps); a model that calls others (Backend.adopt_calls: an ensemble) is
adopted after them, and refused naming the step whose model adopt cannot take. A config field no
recipe can express is refused by name rather than dropped, and any other backend is refused with the
reason."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from tritonbuild.backends import REGISTRY
from tritonbuild.core.results import OMIT_NONE, Result
from tritonbuild.errors import UsageError
from tritonbuild.repository import adopt_fields
from tritonbuild.repository.adopt_fields import PUBLISH as _PUBLISH
from tritonbuild.repository.existing import config_tensors
from tritonbuild.repository.rules import VERSION_RE
from tritonbuild.triton.batching import read_dynamic_batching
from tritonbuild.triton.config import ConfigParseError, read_config


@dataclass(frozen=True)
class Adopted:
    name: str
    version: int
    recipe: Path
    engine: Path | None = (
        None  # a prebuilt engine adopt copied (out/<name>/engine): `build --engine NAME=DIR`
    )
    notes: tuple[str, ...] = ()  # what Triton decides where the recipe leaves it (instance groups)

    def row(self) -> dict:
        return (
            {"name": self.name, "version": self.version, "recipe": str(self.recipe)}
            | ({"engine": str(self.engine)} if self.engine else {})
            | ({"notes": list(self.notes)} if self.notes else {})
        )


@dataclass
class AdoptResult(Result):
    """adopt: one row per recipe written; goldens: model → recorded (None: not recorded,
    --no-record); how each was recorded, and whether all were, when they were."""

    recipes: list[dict]
    goldens: dict[str, bool] | None = None
    recorded_by: dict[str, str] | None = field(default=None, metadata=OMIT_NONE)
    passed: bool | None = field(default=None, metadata=OMIT_NONE)


def _batching(mc, model_dir: Path) -> dict | None:
    batching = read_dynamic_batching(mc)
    queues = ("priority_levels", "default_queue_policy", "priority_queue_policy")
    if batching is not None and set(queues) & set(batching):
        raise adopt_fields.refusal(
            model_dir, [f"dynamic_batching.{key}" for key in queues if key in batching]
        )
    return batching


def _tensors(mc, field: str) -> list[dict]:
    return [
        t.model_dump(mode="json", exclude_defaults=True) | {"dims": t.dims}
        for t in config_tensors(mc, field)
    ]


def _recipe(
    model_dir: Path, mc, version: int, files: list[str], owner, filename: str, instances: list[dict]
) -> dict:
    recipe = {
        "name": model_dir.name,
        "version": version,
        "backend": owner.name,
        "source": {
            "path": f"{model_dir.name}/{version}/{filename}",
            **({"files": [f"{model_dir.name}/{version}/{f}" for f in files]} if files else {}),
        },
        "max_batch_size": mc.max_batch_size,
        "inputs": _tensors(mc, "input"),
        "outputs": _tensors(mc, "output"),
        "instances": instances,
        "verify": {"goldens": f"goldens/{model_dir.name}.npz"},
    }
    if any(g["kind"] == "gpu" for g in recipe["instances"]):
        recipe["target"] = "gpu"
    batching = _batching(mc, model_dir)
    if batching is not None:
        recipe["batching"] = batching
    if mc.parameters:
        recipe["parameters"] = {
            key: value.string_value for key, value in sorted(mc.parameters.items())
        }
    kind = mc.version_policy.WhichOneof("policy_choice")
    if kind == "latest":
        recipe["version_policy"] = {"latest": mc.version_policy.latest.num_versions}
    elif kind == "specific":
        recipe["version_policy"] = {"specific": list(mc.version_policy.specific.versions)}
    elif kind == "all":
        recipe["version_policy"] = {"all": True}
    return recipe | owner.adopt_fields(mc)


def _model_file(owner, mc) -> str | None:
    """The file a recipe of this backend names as source.path, when this config loads that file: the
    load rule's default (model_files['']) is also the file of the config's platform and of its
    default_model_filename."""
    files = owner.model_files or {}
    default = files.get("")
    if (
        not default
        or files.get(mc.platform, default) != default
        or mc.default_model_filename not in ("", default)
    ):
        return None
    return default


def _source_path_recipe(owner) -> bool:
    """A recipe type whose source is one model file (source.path) that declares the config's
    tensors, for a backend whose models run here (embedded server or in-process): the config is
    reproduced, goldens recorded."""
    source = getattr(owner.recipe_type, "model_fields", {}).get("source")
    fields = getattr(source.annotation, "model_fields", {}) if source is not None else {}
    return "path" in fields and owner.route in ("live-embedded", "in-process")


def _read(model_dir: Path, root: Path):
    try:
        return read_config(model_dir)
    except FileNotFoundError:
        raise UsageError(
            f"{model_dir.name} has no config.pbtxt: adopt reads the config it reproduces",
            where=str(model_dir),
            hint="write its config.pbtxt (Triton's autocompleted one: "
            "GET v2/models/<name>/config on a server that loaded it)",
        ) from None
    except ConfigParseError as e:
        raise UsageError(
            f"{model_dir.name}/config.pbtxt does not parse: {e}",
            where=str(model_dir),
            hint=f"'tritonbuild verify {root}' shows Triton's refusal",
        ) from None


def _newest(model_dir: Path, filename: str, owner) -> int:
    versions = sorted(
        int(d.name) for d in model_dir.iterdir() if d.is_dir() and VERSION_RE.match(d.name)
    )
    if not versions or not (model_dir / str(versions[-1]) / filename).is_file():
        raise UsageError(
            f"{model_dir.name}: no version directory with a {filename}",
            where=str(model_dir),
            hint=f"the {owner.name} backend loads <version>/{filename}",
        )
    return versions[-1]


def _find(mc):
    """The backend answering for the config: by backend, by a platform its model files declare, or
    by a platform that names a backend (core's ensemble scheduler)."""
    return REGISTRY.for_config(mc.backend, mc.platform) or (
        REGISTRY.for_triton(mc.platform) if mc.platform else None
    )


def _owner(mc, model_dir: Path):
    owner = _find(mc)
    if owner is None:
        raise UsageError(
            f"{model_dir.name}: backend {mc.backend or mc.platform or '(none)'} is not adopted yet",
            where=str(model_dir),
            hint=_PUBLISH,
        )
    return owner


def _adopt_one(model_dir: Path, root: Path, out: Path) -> Adopted:
    mc = _read(model_dir, root)
    what = mc.backend or mc.platform or "(none)"
    owner = _owner(mc, model_dir)
    own, notes = owner.adopt_recipe(mc, model_dir, out), []
    if own is not None:
        recipe, version = own
    else:
        filename = _model_file(owner, mc)
        if filename is None or not _source_path_recipe(owner):
            raise UsageError(
                f"{model_dir.name}: backend {what} is not adopted yet (adopted: models whose model "
                "file is the recipe's source and that run here, and backends that adopt their own)",
                where=str(model_dir),
                hint=_PUBLISH,
            )
        extra = adopt_fields.unexpressed(mc, owner.adopt_consumes)
        if extra:
            raise adopt_fields.refusal(model_dir, extra)
        instances, notes = adopt_fields.instances(mc, model_dir)
        version = _newest(model_dir, filename, owner)
        src = model_dir / str(version)
        files = sorted(
            p.relative_to(src).as_posix()
            for p in src.rglob("*")
            if p.is_file() and p.name != filename and "__pycache__" not in p.parts
        )
        if files and "files" not in getattr(
            owner.recipe_type.model_fields["source"].annotation, "model_fields", {}
        ):
            raise UsageError(
                f"{model_dir.name}: {version}/ holds {files} beside {filename}, which a "
                f"{owner.name} recipe does not package",
                where=str(src),
                hint=_PUBLISH,
            )
        recipe = _recipe(model_dir, mc, version, files, owner, filename, instances)
        labels = adopt_fields.labels(mc, model_dir, out)
        if labels:
            recipe["labels"] = labels
        shutil.copytree(
            src,
            out / model_dir.name / str(version),
            ignore=shutil.ignore_patterns("__pycache__"),
            dirs_exist_ok=True,
        )
    adopted = replace(_write(recipe["name"], version, recipe, out), notes=tuple(notes))
    engine = out / adopted.name / "engine"
    return replace(adopted, engine=engine) if owner.engine_steps and engine.is_dir() else adopted


def _write(name: str, version: int, recipe: dict, out: Path) -> Adopted:
    path = out / f"{name}.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    return Adopted(name, version, path)


def _callers(root: Path, model_dirs: list[Path]) -> tuple[dict[str, list[str]], set[str]]:
    """The models that call others (an ensemble's steps), by name: the models each calls, in step
    order; and the models another model's recipe writes too (Backend.adopt_members: a group), which
    are not adopted alone."""
    out, members = {}, set()
    for model_dir in model_dirs:
        if (model_dir / "config.pbtxt").is_file():
            mc = _read(model_dir, root)
            owner = _find(mc)
            calls = owner.adopt_calls(mc) if owner is not None else []
            if calls:
                out[model_dir.name] = calls
            members |= set(owner.adopt_members(mc, model_dir)) if owner is not None else set()
    return out, members


def _step_refusal(
    model_dir: Path, calls: list[str], refused: dict[str, UsageError], held: set[str]
) -> UsageError | None:
    """Why a caller cannot be adopted: its first step whose model adopt refused, or that root does
    not hold."""
    name = model_dir.name
    for i, called in enumerate(calls):
        if called in refused:
            return UsageError(
                f"{name}: step {i} calls {called!r}, which adopt cannot take: "
                f"{refused[called].message}",
                where=refused[called].where,
                hint=refused[called].hint or _PUBLISH,
            )
        if called not in held:
            return UsageError(
                f"{name}: step {i} calls {called!r}, which this repository does not hold (it holds "
                f"{sorted(held)})",
                where=str(model_dir / "config.pbtxt"),
                hint="adopt the repository that holds every model it calls",
            )
    return None


def adopt(root: Path, out: Path) -> list[Adopted]:
    """_adopt_all into a scratch directory inside out, moved into out only when every model is
    adopted: a refusal leaves nothing behind."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out, prefix=".adopt-") as tmp:
        stage = Path(tmp)
        adopted = _adopt_all(root, stage)
        for entry in sorted(stage.iterdir()):
            target = out / entry.name
            if entry.is_dir():
                shutil.copytree(entry, target, dirs_exist_ok=True)
            else:
                shutil.copyfile(entry, target)
    return [
        Adopted(
            a.name,
            a.version,
            out / a.recipe.name,
            a.engine and out / a.engine.relative_to(stage),
            a.notes,
        )
        for a in adopted
    ]


def _adopt_all(root: Path, out: Path) -> list[Adopted]:
    """Recipes for root's models in out (one YAML per model, its newest version; the model's files
    copied under out/<name>/<version>/). Models that call none first; then each caller once the
    models it calls are judged, refused naming its first step whose model was refused (or is not in
    root). The caller loads them back (the recipe rules)."""
    model_dirs = sorted(d for d in root.iterdir() if d.is_dir() and not d.name.startswith("."))
    if not model_dirs:
        raise UsageError(f"{root} holds no model directory", hint="pass a Triton model repository")
    calls_of, members = _callers(root, model_dirs)
    pending = {name: calls for name, calls in calls_of.items() if name not in members}
    callers = set(pending)
    adopted, refused = [], {}
    for model_dir in model_dirs:
        if model_dir.name not in pending and model_dir.name not in members:
            try:
                adopted.append(_adopt_one(model_dir, root, out))
            except UsageError as e:
                refused[model_dir.name] = e
    held = {d.name for d in model_dirs}
    while pending:  # a caller may call a caller: each is judged after the models it calls
        ready = [
            name for name, calls in pending.items() if not set(calls) & (set(pending) - {name})
        ]
        for name in ready or sorted(pending):  # none ready: a cycle, which the recipe rules name
            calls = pending.pop(name)
            why = _step_refusal(root / name, calls, refused, held)
            try:
                if why is not None:
                    raise why
                adopted.append(_adopt_one(root / name, root, out))
            except UsageError as e:
                refused[name] = e
    if refused:
        called = {model for calls in calls_of.values() for model in calls}
        top = [
            e for name, e in refused.items() if name in callers and name not in called
        ]  # names the chain
        raise (top or list(refused.values()))[0]
    return adopted
