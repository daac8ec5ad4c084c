"""The load rules of the models TensorRT-LLM routes write, on their files (offline, no GPU): the C++
backend's engine inside the version directory, and the LLM-API Python model's model.yaml against its
config.pbtxt."""

from __future__ import annotations

from pathlib import Path

from tritonbuild.backends.base import BuildPolicy, ReleaseFact

# The parameters the C++ backend reads with no default (GetParameter outside a try block), per
# release of triton-inference-server/tensorrtllm_backend
# (tests/contracts/facts/tensorrtllm_releases.json): r24.10 (af89ec7) reads only gpt_model_type
# (model_instance_state.cc:59); r25.04 (1a9fa20) adds the guided-decoding three
# (model_instance_state.cc:401-403), as main (c2e65b8) still does.
UNGUARDED_BY_RELEASE = {
    "r24.10": ("gpt_model_type",),
    "r25.04": (
        "gpt_model_type",
        "guided_decoding_backend",
        "tokenizer_dir",
        "xgrammar_tokenizer_info_path",
    ),
}
GUIDED_DECODING = ("tokenizer_dir", "xgrammar_tokenizer_info_path", "guided_decoding_backend")


def engine_problems(mc, model_dir: Path, versions: list[int]) -> list[str]:
    """The C++ backend reads gpt_model_path verbatim: it must point at
    <mount>/<model>/<version>/engine."""
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
    return [
        BuildPolicy(
            f"gpt_model_path {path!r} does not point inside this model's version directory "
            f"(expected '<mount>/{model_dir.name}/<version>/engine'): the repository is not "
            "relocatable"
        )
    ]


def is_llmapi_model(model_dir: Path, versions: list[int]) -> bool:
    """An LLM-API model is a Python model with a model.yaml (the LLM() arguments) in a version
    directory."""
    return any((model_dir / str(v) / "model.yaml").is_file() for v in versions)


def llmapi_problems(mc, model_dir: Path, versions: list[int]) -> list[str]:
    """TensorRT-LLM LLM-API models: model.yaml parses, its checkpoint is packaged, triton_config
    agrees."""
    import yaml

    p = []
    for v in versions:
        try:
            spec = yaml.safe_load((model_dir / str(v) / "model.yaml").read_text())
        except (OSError, yaml.YAMLError) as e:
            p.append(f"{v}/model.yaml does not parse: {e}")
            continue
        model = str(spec.get("model", ""))
        if (
            not model
            or model.startswith("/")
            or not (model_dir / str(v) / model / "config.json").is_file()
        ):
            p.append(
                f"{v}/model.yaml model {model!r} is not a checkpoint inside the version directory"
            )
        tc = spec.get("triton_config") or {}
        if tc.get("max_batch_size", 0) != mc.max_batch_size:
            p.append(
                f"model.yaml triton_config.max_batch_size {tc.get('max_batch_size')} != config "
                f"max_batch_size {mc.max_batch_size}"
            )
        if bool(tc.get("decoupled", False)) != mc.model_transaction_policy.decoupled:
            p.append(
                "model.yaml triton_config.decoupled disagrees with "
                "model_transaction_policy.decoupled"
            )
        trt_only = sorted(k for k in ("quant_config", "calib_config", "build_config") if k in spec)
        if spec.get("backend") == "pytorch" and trt_only:
            p.append(
                f"{v}/model.yaml sets {trt_only} with backend pytorch: TensorRT-LLM refuses it at "
                "LLM() ('The following arguments are specific to TensorRT backend and cannot be "
                "used with PyTorch backend'); a quantized checkpoint carries its "
                "hf_quant_config.json instead"
            )
    return p


def parameter_problems(
    params: dict[str, str], unguarded: tuple[str, ...], values: dict
) -> list[str]:
    """What the C++ backend reads unguarded, on a config's parameters. The guided-decoding three are
    absent together from configs filled from templates older than guided decoding (r24.10's): the
    backends of that age never read them, r25.04 and later fail the load without them (a
    ReleaseFact); one or two of the three absent is a failure for every release that reads them."""
    missing = [k for k in unguarded if k not in params]
    error = "the tensorrtllm backend fails the load with 'Cannot find parameter with name: {}'"
    problems = []
    if set(GUIDED_DECODING) <= set(missing):
        missing = [k for k in missing if k not in GUIDED_DECODING]
        problems.append(
            ReleaseFact(
                f"parameters {', '.join(GUIDED_DECODING)} are absent, as in configs filled from "
                "templates before guided decoding: the r24.10 backend never reads them; r25.04 "
                "and later fail the load with 'Cannot find parameter with name: tokenizer_dir' "
                '(add the three with "" to serve there)'
            )
        )
    problems += [f'parameter {k} is missing: {error.format(k)} (set it, "" = off)' for k in missing]
    problems += [
        f"parameter {k} = {params[k]!r}, the backend accepts {', '.join(ok)}"
        for k, ok in values.items()
        if k in params and params[k] not in ok
    ]
    return problems
