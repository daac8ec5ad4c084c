"""The Medusa heads' directory as examples/medusa/convert_checkpoint.py reads it through
--medusa_model_dir (facts/trtllm_speculative.json medusa.heads_dir): it always opens config.json,
whose medusa_num_layers overrides --num_medusa_layers for loading the weights (after the
checkpoint's config.json was written with the flag's value), and load_medusa_hf reads
medusa_lm_head.pt, else medusa_lm_head.safetensors: for each head h < --num_medusa_heads and layer l
< the layer count, '{h}.{l}.linear.weight' and '{h}.{l}.linear.bias', then '{h}.{layers}.weight'
(the head's lm_head). Checked when the plan is made, so that a directory the converter would die on
fails before the engine build: missing files are a plan error at the heads' key, counts the recipe
contradicts a recipe error at the count's key. A .pt file's names are the strings of its pickle,
listed by pickletools (which executes nothing); a .pt in torch's legacy (non-zip) format is checked
for presence only."""

from __future__ import annotations

import json
import pickletools
import zipfile
from pathlib import Path

from tritonbuild.backends.llm.safetensors import raw_header
from tritonbuild.errors import PlanError, RecipeError

CONFIG = "config.json"
# in the order the converter tries them
WEIGHTS = ("medusa_lm_head.pt", "medusa_lm_head.safetensors")
HEADS_KEY, LAYERS_KEY, DIR_KEY = (
    ("speculative", k) for k in ("num_medusa_heads", "num_medusa_layers", "heads_checkpoint")
)
LAYOUT = (
    "the Medusa heads' directory: config.json (medusa_num_heads, medusa_num_layers) and "
    "medusa_lm_head.safetensors (or .pt), as the Medusa training code saves them"
)


def tensor_names(head: int, layers: int) -> list[str]:
    """The tensors load_medusa_hf reads for one head."""
    return [
        f"{head}.{layer}.linear.{part}" for layer in range(layers) for part in ("weight", "bias")
    ] + [f"{head}.{layers}.weight"]


def weights_file(heads_dir: Path) -> Path | None:
    """The weights file the converter reads: medusa_lm_head.pt when it exists, else the
    .safetensors."""
    return next((heads_dir / name for name in WEIGHTS if (heads_dir / name).is_file()), None)


def safetensors_names(path: Path) -> set[str] | None:
    """The tensor names in a safetensors header, or None when the file holds no such header."""
    found = raw_header(path)
    return None if found is None else set(found[1])


def pt_strings(path: Path) -> set[str] | None:
    """The strings of a torch.save zip's pickle (the state dict's keys among them), or None for a
    file in another format. pickletools lists opcodes without executing any."""
    if not zipfile.is_zipfile(path):
        return None
    with zipfile.ZipFile(path) as archive:
        pickle = next((n for n in archive.namelist() if n.rsplit("/", 1)[-1] == "data.pkl"), None)
        data = archive.read(pickle) if pickle else b""
    try:
        return {
            arg
            for op, arg, _ in pickletools.genops(data)
            if isinstance(arg, str) and "UNICODE" in op.name
        }
    except ValueError:
        return None


def _config(loaded, heads_dir: Path) -> dict:
    path = heads_dir / CONFIG
    if not path.is_file():
        raise PlanError(
            f"speculative.heads_checkpoint {heads_dir} has no config.json: "
            "examples/medusa/convert_checkpoint.py opens <medusa_model_dir>/config.json",
            where=loaded.where(DIR_KEY),
            hint=f"point it at {LAYOUT}",
        )
    try:
        config = json.loads(path.read_text())
    except (UnicodeDecodeError, ValueError):
        config = None
    if not isinstance(config, dict):
        raise PlanError(
            f"{path} is not a JSON object: the Medusa converter reads medusa_num_layers from it",
            where=loaded.where(DIR_KEY),
            hint=f"point it at {LAYOUT}",
        )
    return config


def _counts(loaded, config: dict, path: Path) -> None:
    """The recipe's head and layer counts against the ones the heads' config.json declares."""
    s = loaded.recipe.speculative
    layers, heads = config.get("medusa_num_layers"), config.get("medusa_num_heads")
    if isinstance(layers, int) and layers != s.num_medusa_layers:
        raise RecipeError(
            f"speculative.num_medusa_layers {s.num_medusa_layers}, but {path} has "
            f"medusa_num_layers {layers}: the converter loads {layers} layers per head while the "
            f"checkpoint it writes declares {s.num_medusa_layers}",
            where=loaded.where(LAYERS_KEY),
            hint=f"set speculative.num_medusa_layers: {layers}",
        )
    if isinstance(heads, int) and heads < s.num_medusa_heads:
        raise RecipeError(
            f"speculative.num_medusa_heads {s.num_medusa_heads}, but {path} has medusa_num_heads "
            f"{heads}: the converter loads the recipe's count (--num_medusa_heads) and finds no "
            f"weights for head {heads}",
            where=loaded.where(HEADS_KEY),
            hint=f"set speculative.num_medusa_heads to at most {heads} (medusa_choices paths then "
            f"at most {heads} deep)",
        )


def _weights(loaded, heads_dir: Path, layers: int) -> None:
    s = loaded.recipe.speculative
    path = weights_file(heads_dir)
    if path is None:
        raise PlanError(
            f"speculative.heads_checkpoint {heads_dir} has neither {' nor '.join(WEIGHTS)}: the "
            "weights load_medusa_hf reads",
            where=loaded.where(DIR_KEY),
            hint=f"point it at {LAYOUT}",
        )
    names = safetensors_names(path) if path.suffix == ".safetensors" else pt_strings(path)
    if names is None and path.suffix != ".safetensors":
        return  # a legacy torch.save file: torch.load reads it, its names are not listed here
    if names is None:
        raise PlanError(
            f"{path} has no safetensors header",
            where=loaded.where(DIR_KEY),
            hint=f"point it at {LAYOUT}",
        )
    complete = next(
        (h for h in range(s.num_medusa_heads) if not set(tensor_names(h, layers)) <= names),
        s.num_medusa_heads,
    )
    if complete == s.num_medusa_heads:
        return
    missing = [n for n in tensor_names(complete, layers) if n not in names]
    if complete:
        raise RecipeError(
            f"speculative.num_medusa_heads {s.num_medusa_heads}, but {path} holds the tensors of "
            f"{complete} heads (no {', '.join(missing[:3])})",
            where=loaded.where(HEADS_KEY),
            hint=f"set speculative.num_medusa_heads to at most {complete}",
        )
    raise PlanError(
        f"{path} lacks {', '.join(missing[:3])}: the tensors of head 0 with {layers} layer(s) that "
        "load_medusa_hf reads",
        where=loaded.where(DIR_KEY),
        hint=f"point it at {LAYOUT}, and set speculative.num_medusa_layers to its layer count",
    )


def check(loaded, heads_dir: Path) -> None:
    """Raise what the Medusa converter would die on (or silently change) with this heads
    directory."""
    config = _config(loaded, heads_dir)
    _counts(loaded, config, heads_dir / CONFIG)
    _weights(loaded, heads_dir, loaded.recipe.speculative.num_medusa_layers)
