"""The load rules of the models TensorRT-LLM routes write, on their files (offline, no GPU): the C++ backend's
engine inside the version directory, and the LLM-API Python model's model.yaml against its config.pbtxt."""

from __future__ import annotations

from pathlib import Path

from tritonbuild.backends.base import BuildPolicy


def engine_problems(mc, model_dir: Path, versions: list[int]) -> list[str]:
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
    return [BuildPolicy(f"gpt_model_path {path!r} does not point inside this model's version directory "
                        f"(expected '<mount>/{model_dir.name}/<version>/engine'): the repository is not relocatable")]


def is_llmapi_model(model_dir: Path, versions: list[int]) -> bool:
    """An LLM-API model is a Python model with a model.yaml (the LLM() arguments) in a version directory."""
    return any((model_dir / str(v) / "model.yaml").is_file() for v in versions)


def llmapi_problems(mc, model_dir: Path, versions: list[int]) -> list[str]:
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
