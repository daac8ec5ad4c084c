"""Triton's load rules, checked offline on a model directory (core/src/model_config_utils.cc and friends)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from google.protobuf import text_format

from tritonbuild.backends import REGISTRY
from tritonbuild.repository.config import parse
from tritonbuild.repository.triton_ensemble_rules import ensemble_step_problems
from tritonbuild.repository.triton_rules import NAME_MISMATCH, model_problems

VERSION_RE = re.compile(r"^[1-9][0-9]*$")


@dataclass(frozen=True)
class Finding:
    model: str
    check: str
    ok: bool
    detail: str

    def to_dict(self) -> dict:
        return {"model": self.model, "check": self.check, "ok": self.ok, "detail": self.detail}


def check_model_dir(model_dir: Path, *, model_files: bool = False) -> list[Finding]:
    """Triton's load rules on one model directory; model_files: also open the model files (the ONNX graph
    through onnxruntime: verify does, a build does not pay for it)."""
    name = model_dir.name
    out: list[Finding] = []

    def add(check: str, problems: list[str], ok_detail: str) -> None:
        out.append(Finding(name, check, not problems, "; ".join(problems) if problems else ok_detail))

    cfg_path = model_dir / "config.pbtxt"
    try:
        mc = parse(cfg_path.read_bytes())
    except FileNotFoundError:
        add("config.parse", ["config.pbtxt is missing"], "")
        return out
    except (text_format.ParseError, UnicodeDecodeError) as e:
        add("config.parse", [f"config.pbtxt:{e} (not a valid inference.ModelConfig)"], "")
        return out
    add("config.parse", [], "config.pbtxt parses as inference.ModelConfig")

    triton = model_problems(mc, model_dir)
    # the directory-name rule is reported once, in Triton's words, as this row (not again in "triton-rules")
    misnamed = [p for p in triton if p.startswith(NAME_MISMATCH)]
    add("name", misnamed or ([f"{name!r} contains '/' or is '..'"] if "/" in name or name in (".", "..") else []),
        f"directory name = model name = {name!r}")

    versions, bad = [], []
    for child in sorted(model_dir.iterdir()):
        if child.is_dir():
            if VERSION_RE.match(child.name):
                versions.append(int(child.name))
            elif child.name[:1].isdigit():
                bad.append(f"version directory {child.name!r} is not a plain number (Triton ignores a leading 0 "
                           f"and reads '2_old' as 2)")
    if not versions:
        bad.append("no numeric version directory: Triton reports 'no version is available'")
    pol = mc.version_policy
    if pol.WhichOneof("policy_choice") == "specific":
        missing = sorted(set(pol.specific.versions) - set(versions))
        if missing:
            bad.append(f"version_policy.specific names versions {missing} that are not present")
    add("versions", bad, f"versions {versions}")

    problems = []
    backend = mc.backend
    # Triton backend → {platform allowed with it ("" = none given): default model filename}, from each backend
    defaults = REGISTRY.model_files()
    if mc.platform == "ensemble":
        add("model_file", ensemble_step_problems(mc, model_dir.parent), "ensemble steps match their models' configs "
            "(Triton's ensemble_utils rules)")
    elif backend == "tensorrtllm":
        add("model_file", _engine_problems(mc, model_dir, versions), "engine inside the version directory")
    elif backend in defaults and mc.platform in defaults[backend]:
        filename = mc.default_model_filename or defaults[backend].get(mc.platform, "")
        for v in versions:
            if not (model_dir / str(v) / filename).exists():
                problems.append(f"{v}/{filename} is missing (the {backend} backend loads that file)")
    if mc.platform != "ensemble" and backend != "tensorrtllm":
        add("model_file", problems, f"{mc.default_model_filename or defaults.get(backend, {}).get('', '?')} "
            f"present in every version")
    if backend == "python" and any((model_dir / str(v) / "model.yaml").is_file() for v in versions):
        add("llmapi", _llmapi_problems(mc, model_dir, versions), "model.yaml consistent with config.pbtxt")

    owner = REGISTRY.for_manifest(backend) if backend else None  # the backend's own load checks (e.g. vLLM's)
    for check, found, ok_detail in (owner.offline_checks(mc, model_dir, versions) if owner else []):
        add(check, found, ok_detail)
    add("triton-rules", [p for p in triton if p not in misnamed], "Triton's config rules (model_config_utils, "
        "ported) hold")
    if model_files and (backend == "onnxruntime" or (not backend and mc.platform == "onnxruntime_onnx")):
        from tritonbuild.repository.onnx_rules import onnx_problems

        files = [model_dir / str(v) / (mc.default_model_filename or "model.onnx") for v in versions]
        found = [f for f in files if f.is_file()]
        if found:
            add("onnx", [f"{f.parent.name}/{f.name}: {e}" for f in found for e in onnx_problems(mc, f)],
                "config matches the ONNX graph (the onnxruntime backend's load checks, ported)")
    return out


def _engine_problems(mc, model_dir: Path, versions: list[int]) -> list[str]:
    """The C++ backend reads gpt_model_path verbatim: it must point at <mount>/<model>/<version>/engine."""
    path = mc.parameters["gpt_model_path"].string_value if "gpt_model_path" in mc.parameters else ""
    if not path:
        return ["parameter gpt_model_path is missing"]
    for v in versions:
        tail = f"/{model_dir.name}/{v}/engine"
        if path.endswith(tail):
            engine = model_dir / str(v) / "engine"
            if not (engine / "config.json").is_file():
                return [f"{v}/engine/config.json is missing (gpt_model_path {path})"]
            if not list(engine.glob("rank*.engine")):
                return [f"{v}/engine has no rank*.engine file"]
            return []
    return [f"gpt_model_path {path!r} does not point inside this model's version directory "
            f"(expected '<mount>/{model_dir.name}/<version>/engine'): the repository is not relocatable"]


def _llmapi_problems(mc, model_dir: Path, versions: list[int]) -> list[str]:
    """TensorRT-LLM LLM-API models: model.yaml parses, its checkpoint is packaged, triton_config agrees."""
    import yaml

    p = []
    for v in versions:
        try:
            spec = yaml.safe_load((model_dir / str(v) / "model.yaml").read_text())
        except (OSError, yaml.YAMLError) as e:
            p.append(f"{v}/model.yaml does not parse: {e}")
            continue
        model = str(spec.get("model", ""))
        if not model or model.startswith("/") or not (model_dir / str(v) / model / "config.json").is_file():
            p.append(f"{v}/model.yaml model {model!r} is not a checkpoint inside the version directory")
        tc = spec.get("triton_config") or {}
        if tc.get("max_batch_size", 0) != mc.max_batch_size:
            p.append(f"model.yaml triton_config.max_batch_size {tc.get('max_batch_size')} != config "
                     f"max_batch_size {mc.max_batch_size}")
        if bool(tc.get("decoupled", False)) != mc.model_transaction_policy.decoupled:
            p.append("model.yaml triton_config.decoupled disagrees with model_transaction_policy.decoupled")
        trt_only = sorted(k for k in ("quant_config", "calib_config", "build_config") if k in spec)
        if spec.get("backend") == "pytorch" and trt_only:
            p.append(f"{v}/model.yaml sets {trt_only} with backend pytorch: TensorRT-LLM refuses it at LLM() ('The "
                     "following arguments are specific to TensorRT backend and cannot be used with PyTorch "
                     "backend'); a quantized checkpoint carries its hf_quant_config.json instead")
    return p
