"""recipes/recipe.schema.json: current, built from the registered kinds, and in agreement with the loader: over a
generated set (every registered backend's recipe × every key any recipe kind has: the top-level keys and those
of each backend's own source and export) the JSON Schema and `load_recipe` accept and refuse the same recipes,
so an editor never offers a key `validate` refuses."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest
import yaml
from pydantic import BaseModel
from pydantic_core import PydanticUndefined, to_jsonable_python

from tests.conftest import ROOT
from tests.plugins.affine import RECIPE as AFFINE_RECIPE
from tests.plugins.affine import AffineBackend
from tritonbuild.backends import REGISTRY
from tritonbuild.errors import MultipleErrors, RecipeError
from tritonbuild.recipe.load import load_recipe
from tritonbuild.recipe.schema import recipe_schema_bytes

RECIPE_DIRS = (ROOT / "recipes" / "examples", ROOT / "recipes" / "gpu")
# Values for keys no example recipe sets and whose type has no default instance.
GIVEN = {
    "calibration": {"dataset": "calibration.txt"},
    "version_policy": {"latest": 1},
    "tokenizer": "tokenizer",
    "batching": {"max_queue_delay_us": 100},
    "batch_buckets": [65536],
    # portable is refused by cross-field rules (onnxruntime, GPU targets) the schema cannot say: tests/unit/core
    "numerics": {"mode": "native", "threads": 2},
    "image.ships": {"tensorrt_llm": "1.1.0"},
    "source.export.dynamic_axes": {"x": {0: "batch"}},
    "source.sha256": "0" * 64,
    "lora": {"adapters": {"fr": "fr-lora"}, "target_modules": ["attn_q"]},
    "lora.adapters": {"fr": "fr-lora"},
    "lora.cache_gpu_memory_fraction": 0.1,
    "lora.cache_host_memory_bytes": 1 << 30,
    "lora.max_lora_rank": 8,
    "lora.max_loras": 2,
    "lora.max_cpu_loras": 2,
    "lora.target_modules": ["attn_q"],
    "lora.build_adapter": "fr-peft",
    "speculative": {
        "mode": "lookahead",
        "window_size": 4,
        "ngram_size": 3,
        "verification_set_size": 2,
    },
    "speculative.mode": "eagle",
    "speculative.max_draft_len": 3,
    "speculative.draft_checkpoint": "draft",
    "speculative.window_size": 4,
    "speculative.ngram_size": 3,
    "speculative.verification_set_size": 2,
    "speculative.method": "eagle",
    "speculative.num_speculative_tokens": 3,
    "speculative.model": "draft",
    "speculative.heads_checkpoint": "heads",
    "speculative.medusa_choices": [[0]],
    "speculative.num_medusa_heads": 4,
    "speculative.num_medusa_layers": 1,
}


def test_committed_schema_is_current():
    committed = (ROOT / "recipes" / "recipe.schema.json").read_bytes()
    assert committed == recipe_schema_bytes(REGISTRY.recipe_kinds()), (
        "recipes/recipe.schema.json is stale: run 'tritonbuild schema > recipes/recipe.schema.json'"
    )


def _examples() -> dict[str, dict]:
    """backend → the data of the repository's first recipe of that backend (the plug-in's from its module)."""
    out: dict[str, dict] = {"affine": yaml.safe_load(AFFINE_RECIPE)}
    for path in sorted(p for d in RECIPE_DIRS for p in d.glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        out.setdefault(data["backend"], data)
    return out


def _models_in(annotation) -> list[type]:
    import typing

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for arg in typing.get_args(annotation) for model in _models_in(arg)]


def _key_paths(kinds) -> dict[tuple, list]:
    """Every key path any kind's recipe type has → its fields (one per type that has it): the top-level keys, and
    the keys under a key whose type differs between kinds (source: each backend's own source and export)."""
    paths: dict[tuple, list] = {}

    def walk(types: list[type], prefix: tuple) -> None:
        children: dict[str, list] = {}
        for model in types:
            for key, field in model.model_fields.items():
                children.setdefault(key, []).append(field)
        for key, fields in children.items():
            paths[(*prefix, key)] = fields
            inner = list(
                dict.fromkeys(model for field in fields for model in _models_in(field.annotation))
            )
            if len(inner) > 1:  # a backend-specific shape: its keys are backend-specific too
                walk(inner, (*prefix, key))

    walk(list(dict.fromkeys(kind.recipe_type for kind in kinds.values())), ())
    return paths


def _own_field(recipe_type: type, path: tuple) -> list:
    """[the field at path in recipe_type] when it has one (its default is a value it accepts), else []."""
    model = recipe_type
    for i, key in enumerate(path):
        field = model.model_fields.get(key) if model is not None else None
        if field is None:
            return []
        if i == len(path) - 1:
            return [field]
        model = next(iter(_models_in(field.annotation)), None)
    return []


def _at(data: dict, path: tuple):
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def _with(data: dict, path: tuple, value) -> dict | None:
    """A copy of data with path set to value (None when a key on the way holds something else than a mapping)."""
    out = copy.deepcopy(data)
    node = out
    for key in path[:-1]:
        node = node.setdefault(key, {})
        if not isinstance(node, dict):
            return None
    node[path[-1]] = value
    return out


def _value_for(path: tuple, fields: list, examples: dict[str, dict]):
    """A value the types that have `path` accept: GIVEN's, else the field's default, else an example recipe's, else
    the default instance of its model type."""
    dotted = ".".join(path)
    if dotted in GIVEN:
        return GIVEN[dotted]
    default = next(
        (
            d
            for d in (f.get_default(call_default_factory=True) for f in fields)
            if d is not None and d is not PydanticUndefined
        ),
        None,
    )
    if default is None:
        default = next(
            (found for data in examples.values() if (found := _at(data, path)) is not None), None
        )
    if default is None:
        models = [model for field in fields for model in _models_in(field.annotation)]
        assert models, f"no value for the key {dotted!r}: add one to GIVEN"
        default = models[0]()
    return to_jsonable_python(default)


def _loader_accepts(data: dict, directory: Path, kinds) -> bool:
    path = directory / "recipe.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    try:
        load_recipe(path, kinds)
    except (RecipeError, MultipleErrors):
        return False
    return True


def test_schema_and_loader_accept_and_refuse_the_same_recipes(tmp_path):
    with REGISTRY.registered(AffineBackend()):
        kinds = REGISTRY.recipe_kinds()
        schema = json.loads(recipe_schema_bytes(kinds))
        examples = _examples()
    assert set(kinds) <= set(examples), (
        "add an example recipe for every backend (recipes/examples or recipes/gpu)"
    )
    paths = _key_paths(kinds)
    validator = jsonschema.Draft202012Validator(schema)
    disagreements, accepted, refused = [], 0, 0
    with REGISTRY.registered(AffineBackend()):
        for backend in kinds:
            base, own = examples[backend], kinds[backend].recipe_type
            cases = [("as written", base)] + [
                (".".join(path), changed)
                for path, fields in sorted(paths.items())
                if _at(base, path) is None
                and (
                    changed := _with(
                        base, path, _value_for(path, _own_field(own, path) or fields, examples)
                    )
                )
                is not None
            ]
            for what, data in cases:
                by_schema = validator.is_valid(data)
                by_loader = _loader_accepts(data, tmp_path, kinds)
                accepted, refused = accepted + by_loader, refused + (not by_loader)
                if by_schema != by_loader:
                    disagreements.append(
                        f"{backend} + {what}: schema {'accepts' if by_schema else 'refuses'}, "
                        f"loader {'accepts' if by_loader else 'refuses'}"
                    )
    assert disagreements == [], "\n".join(disagreements)
    # the set holds both answers: every example as written, and other kinds' keys refused
    assert accepted >= len(kinds) and refused > len(kinds)


def test_the_schema_offers_each_kind_only_its_own_keys():
    schema = json.loads(recipe_schema_bytes(REGISTRY.recipe_kinds()))
    branches = {
        name: schema["$defs"][ref.split("/")[-1]]["properties"]
        for name, ref in schema["discriminator"]["mapping"].items()
    }
    assert "tensorrt" in branches["tensorrt"] and "tensorrt" not in branches["python"]
    assert "accelerators" in branches["onnxruntime"] and "accelerators" not in branches["pytorch"]
    assert "engine" in branches["tensorrtllm"] and "engine" not in branches["vllm"]


@pytest.mark.parametrize("registered", [False, True])
def test_a_registered_plugin_kind_is_in_tritonbuild_schema(cli, registered):
    if registered:
        with REGISTRY.registered(AffineBackend()):
            result = cli("schema")
    else:
        result = cli("schema")
    assert result.exit_code == 0
    mapping = json.loads(result.stdout)["discriminator"]["mapping"]
    assert ("affine" in mapping) is registered and "python" in mapping
