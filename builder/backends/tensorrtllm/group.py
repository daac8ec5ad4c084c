"""Assemble the TensorRT-LLM model group into a repository directory (called by
repository.assemble)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tritonbuild.backends.tensorrtllm import configs as cfg
from tritonbuild.backends.tensorrtllm.checks.engine import check_engine_dir
from tritonbuild.backends.tensorrtllm.checks.recipe import config_problems
from tritonbuild.backends.tensorrtllm.orchestrator import server_launch
from tritonbuild.backends.tensorrtllm.parameters import XGRAMMAR_INFO
from tritonbuild.backends.tensorrtllm.recipe.model import LLMRecipe
from tritonbuild.backends.tensorrtllm.tensors import logits_type
from tritonbuild.core.hashing import sha256_json
from tritonbuild.errors import BuildError
from tritonbuild.recipe.models import DTYPES, TensorSpec
from tritonbuild.triton.config import write_config

MODELS_DIR = Path(__file__).parent / "models"
# an empty version directory must exist for an ensemble; object stores need an object in it
KEEP = ".keep"


def tokenizer_file(tokenizer_dir: Path) -> str:
    """The file the pre/postprocessing models load: tokenizer.json, else the sentencepiece
    tokenizer.model (upstream's AutoTokenizer takes either)."""
    return "tokenizer.json" if (tokenizer_dir / "tokenizer.json").is_file() else "tokenizer.model"


def _vocabulary(tokenizer_dir: Path):
    """token → id (None when absent) and the sentencepiece <eos>/<pad> ids (None for
    tokenizer.json)."""
    try:
        if tokenizer_file(tokenizer_dir) == "tokenizer.json":
            from tokenizers import Tokenizer

            return (
                Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json")).token_to_id,
                None,
                None,
            )
        import sentencepiece as spm
    except ImportError as e:
        raise BuildError(
            f"the {e.name} package is not installed: LLM repositories read their tokenizer with it",
            hint="pip install 'tritonbuild[llm]'",
        ) from None
    sp = spm.SentencePieceProcessor(model_file=str(tokenizer_dir / "tokenizer.model"))

    def to_id(piece: str) -> int | None:
        i = sp.piece_to_id(piece)
        return i if sp.id_to_piece(i) == piece else None

    return (
        to_id,
        (sp.eos_id() if sp.eos_id() >= 0 else None),
        (sp.pad_id() if sp.pad_id() >= 0 else None),
    )


def special_ids(tokenizer_dir: Path) -> tuple[int, int]:
    """(end_id, pad_id) from tokenizer_config.json's eos/pad tokens, resolved through the
    vocabulary; a sentencepiece model without tokenizer_config.json gives its own eos/pad ids."""
    to_id, sp_eos, sp_pad = _vocabulary(tokenizer_dir)
    conf_path = tokenizer_dir / "tokenizer_config.json"
    conf = json.loads(conf_path.read_text()) if conf_path.is_file() else {}

    def token(key: str) -> str | None:
        v = conf.get(key)
        return v.get("content") if isinstance(v, dict) else v

    eos = token("eos_token")
    end_id = to_id(eos) if eos else sp_eos
    if end_id is None:
        raise BuildError(
            f"tokenizer has no eos_token in tokenizer_config.json (or {eos!r} is not in its "
            "vocabulary)",
            hint="save the tokenizer with its special tokens (tokenizer_config.json: eos_token)",
        )
    pad = token("pad_token")
    pad_id = to_id(pad) if pad else sp_pad
    return end_id, end_id if pad_id is None else pad_id


def xgrammar_info(tokenizer_dir: Path, end_id: int) -> dict:
    """The tokenizer info the C++ backend hands xgrammar (model_instance_state.cc: encoded_vocab,
    tokenizer_str, stop_token_ids): the vocabulary's raw token strings by id, tokenizer.json itself,
    the eos id."""
    path = tokenizer_dir / "tokenizer.json"
    if not path.is_file():
        raise BuildError(
            "serving.guided_decoding needs tokenizer.json (xgrammar's tokenizer info is made from "
            "it); the tokenizer has only tokenizer.model",
            hint="save the tokenizer with a fast (tokenizers) tokenizer.json, or drop "
            "guided_decoding",
        )
    text = path.read_text()
    vocab = json.loads(text)["model"]["vocab"]
    pairs = (
        vocab.items() if isinstance(vocab, dict) else ((tok, i) for i, (tok, _) in enumerate(vocab))
    )
    added = ((t["content"], t["id"]) for t in json.loads(text).get("added_tokens", []))
    by_id = dict((i, tok) for tok, i in (*pairs, *added))
    encoded = [by_id.get(i, "") for i in range(max(by_id) + 1)]
    return {"encoded_vocab": encoded, "tokenizer_str": text, "stop_token_ids": [end_id]}


def _write_loras(files: dict, root: Path, names, v: str, store) -> None:
    """The adapters under <ensemble>/<v>/lora/<name>/ and multi_lora.json next to the ensemble and
    the BLS: the OpenAI frontend reads it per model (name → directory relative to the repository)
    and gives each LoRA a lora_task_id in file order."""
    loras = {k[len("lora/") :]: e for k, e in files.items() if k.startswith("lora/")}
    if not loras:
        return
    for rel, entry in loras.items():
        store.materialize(entry.sha256, root / names.ensemble / v / "lora" / rel)
    table = {
        name: f"{names.ensemble}/{v}/lora/{name}"
        for name in sorted({rel.split("/")[0] for rel in loras})
    }
    for model in (names.ensemble, names.bls):
        if (root / model / v).is_dir():
            (root / model / v / "multi_lora.json").write_text(json.dumps(table, indent=1) + "\n")


def _specs(mc) -> tuple[list[TensorSpec], list[TensorSpec]]:
    from tritonbuild.triton.config import model_config_pb2

    pb2 = model_config_pb2()
    rev = {v: k for k, v in DTYPES.items()}

    def conv(ts):
        return [
            TensorSpec(
                name=t.name,
                dtype=rev[pb2.DataType.Name(t.data_type)],
                dims=list(t.dims),
                optional=getattr(t, "optional", False),
            )
            for t in ts
        ]

    return conv(mc.input), conv(mc.output)


def _materialize(built_model, root: Path, names, v: str, store) -> tuple[dict, dict, dict]:
    """The engine (checked against the recipe) and the tokenizer files into the version
    directories: (engine config.json, engine files, tokenizer files); ({}, {}, {}) when the engine
    was skipped."""
    r: LLMRecipe = built_model.plan.recipe
    files = built_model.files
    engine_files = {k[len("engine/") :]: v for k, v in files.items() if k.startswith("engine/")}
    if not engine_files:
        return {}, {}, {}
    trt_dir = root / names.tensorrt_llm / v / "engine"
    for rel, entry in engine_files.items():
        store.materialize(entry.sha256, trt_dir / rel)
    engine_step = next((s.params for s in built_model.plan.steps if s.kind == "trtllm.engine"), {})
    engine = check_engine_dir(trt_dir, r, engine_step.get("checkpoint_quantization"))
    tok_files = {k: e for k, e in files.items() if k.startswith("tokenizer/")}
    for model in (names.preprocessing, names.postprocessing):
        for rel, entry in tok_files.items():
            store.materialize(entry.sha256, root / model / v / rel)
    return engine, engine_files, tok_files


def _engine_path(r: LLMRecipe, names) -> str:
    """Where the server finds the engine (the C++ backend needs it absolute)."""
    return f"{r.serving.repository_mount}/{names.tensorrt_llm}/{r.version}/engine"


def _configs(r: LLMRecipe, names, engine: dict, tokenizer_dir: Path, ids: tuple[int, int]) -> dict:
    """Every model's ModelConfig (model name → proto), checked against each other; ids: the
    tokenizer's (end_id, pad_id)."""
    end_id, pad_id = ids
    mbs = int(engine["build_config"]["max_batch_size"])
    engine_path = _engine_path(r, names)
    tok_file = "tokenizer/" + tokenizer_file(tokenizer_dir)
    configs = {
        names.preprocessing: cfg.preprocessing(r, names, mbs, end_id, pad_id, tok_file),
        names.postprocessing: cfg.postprocessing(r, names, mbs, tok_file),
        names.tensorrt_llm: cfg.tensorrt_llm(r, names, engine, engine_path),
        names.ensemble: cfg.ensemble(r, names, mbs, logits_type(engine)),
    }
    if r.serving.bls:
        configs[names.bls] = cfg.bls(r, names, mbs, logits_type(engine))
    problems = config_problems(configs, names)
    if problems:
        raise BuildError(
            "generated configs disagree: " + "; ".join(problems), hint="please report this bug"
        )
    return configs


def _write_models(configs: dict, root: Path, names, v: str) -> None:
    """config.pbtxt of each model, the Python models' model.py, the ensemble's placeholder."""
    scripts = {
        names.preprocessing: "preprocessing.py",
        names.postprocessing: "postprocessing.py",
        names.bls: "bls.py",
    }
    for model, mc in configs.items():
        (root / model / v).mkdir(parents=True, exist_ok=True)
        write_config(root / model, mc)
        if model in scripts:
            shutil.copyfile(MODELS_DIR / scripts[model], root / model / v / "model.py")
    (root / names.ensemble / v / KEEP).write_bytes(b"")


def emit(built_model, root: Path, store, manifest_model) -> list:
    """Write every model of the group; returns their ManifestModel entries ([] when the engine was
    skipped)."""
    r: LLMRecipe = built_model.plan.recipe
    names = cfg.Names.of(r.name)
    v = str(r.version)
    engine, engine_files, tok_files = _materialize(built_model, root, names, v, store)
    if not engine_files:
        return []
    tokenizer_dir = root / names.preprocessing / v / "tokenizer"
    ids = special_ids(tokenizer_dir)
    guided = xgrammar_info(tokenizer_dir, ids[0]) if r.serving.guided_decoding is not None else None
    configs = _configs(r, names, engine, tokenizer_dir, ids)
    _write_models(configs, root, names, v)
    if guided is not None:
        (root / names.tensorrt_llm / v / XGRAMMAR_INFO).write_text(json.dumps(guided))
    _write_loras(built_model.files, root, names, v, store)
    llm_info = _llm_info(
        r, engine, _engine_path(r, names), built_model.plan.extras.get("memory_plan")
    )
    identity = _identities(names, built_model.files, engine_files, tok_files, guided is not None)
    out = []
    for model, mc in configs.items():
        inputs, outputs = _specs(mc)
        backend = "ensemble" if mc.platform == "ensemble" else mc.backend
        target = "cpu" if backend == "python" and model != names.bls else "gpu"
        out.append(
            manifest_model(
                name=model,
                version=r.version,
                backend=backend,
                target=target,
                model_identity=identity.get(model, identity[names.tensorrt_llm]),
                inputs=inputs,
                outputs=outputs,
                max_batch_size=mc.max_batch_size,
                llm=llm_info,
            )
        )
    return out


def _llm_info(r: LLMRecipe, engine: dict, engine_path: str, memory_plan) -> dict:
    """What the manifest says of the group: the engine's quantization and version, where it is
    served from."""
    quant = engine["pretrained_config"].get("quantization") or {}
    return {
        "group": r.name,
        "quant_algo": quant.get("quant_algo"),
        "kv_cache_quant_algo": quant.get("kv_cache_quant_algo"),
        "trtllm_version": engine.get("version"),
        "serving_image": r.image.triton_image,
        "engine_path": engine_path,
        "world_size": r.engine.tp_size * r.engine.pp_size,
        "server_env": server_launch(r).get("env", {}),
        "server_launch": server_launch(r),
        "memory_plan": memory_plan,
    }


def _identities(
    names, files: dict, engine_files: dict, tok_files: dict, guided: bool
) -> dict[str, str]:
    """Each model's identity: the bytes that make its answers (engine, tokenizer, adapters)."""
    engine_id = {k: e.sha256 for k, e in engine_files.items()}
    if guided:  # the xgrammar tokenizer info beside the engine is made from the tokenizer
        engine_id.update({f"xgrammar/{k}": e.sha256 for k, e in tok_files.items()})
    loras = {k: e.sha256 for k, e in files.items() if k.startswith("lora/")}
    tokenizer = sha256_json({k: e.sha256 for k, e in tok_files.items()})
    return {
        names.tensorrt_llm: sha256_json(engine_id),
        # the adapters and multi_lora.json live with the entry points
        **dict.fromkeys((names.ensemble, names.bls), sha256_json({**engine_id, **loras})),
        names.preprocessing: tokenizer,
        names.postprocessing: tokenizer,
    }
