"""A vLLM model as the repository holds it: config.pbtxt as Triton's vLLM backend expects it
(decoupled, max_batch_size 0, KIND_MODEL, every tensor it declares), model.json (the engine args),
multi_lora.json, the packaged files, the invariant plugin's wheel, and its manifest entry."""

from __future__ import annotations

import json
from pathlib import Path

from tritonbuild.backends.vllm.invariant import checks as invariance
from tritonbuild.backends.vllm.invariant import wheel as invariant
from tritonbuild.backends.vllm.quantize import step as quant
from tritonbuild.backends.vllm.speculative import speculative_config
from tritonbuild.core.hashing import pretty_json, sha256_json
from tritonbuild.recipe.models import TensorSpec

# Every tensor the vLLM backend declares (vllm_backend src/model.py, recorded in tests/contracts):
# written out, so the manifest and verify know the whole interface and a server with
# --disable-auto-complete-config takes the OpenAI frontend's requests (return_num_*_tokens,
# return_logprobs, ...).
INPUTS = [
    TensorSpec(name="text_input", dtype="bytes", dims=[1]),
    TensorSpec(name="image", dtype="bytes", dims=[-1], optional=True),
    TensorSpec(name="stream", dtype="bool", dims=[1], optional=True),
    TensorSpec(name="sampling_parameters", dtype="bytes", dims=[1], optional=True),
    *[
        TensorSpec(name=n, dtype="bool", dims=[1], optional=True)
        for n in (
            "exclude_input_in_output",
            "return_finish_reason",
            "return_cumulative_logprob",
            "return_logprobs",
            "return_num_input_tokens",
            "return_num_output_tokens",
        )
    ],
    TensorSpec(name="embedding_request", dtype="bytes", dims=[1], optional=True),
]
OUTPUTS = [
    TensorSpec(name="text_output", dtype="bytes", dims=[-1]),
    TensorSpec(name="finish_reason", dtype="bytes", dims=[-1]),
    TensorSpec(name="cumulative_logprob", dtype="fp32", dims=[-1]),
    TensorSpec(name="logprobs", dtype="bytes", dims=[-1]),
    TensorSpec(name="num_input_tokens", dtype="uint32", dims=[1]),
    TensorSpec(name="num_output_tokens", dtype="uint32", dims=[-1]),
]


def model_json(recipe) -> dict:
    """model.json: the engine args vLLM's AsyncEngineArgs takes, the packaged model's path first."""
    # quantization explicit with quantize: vLLM checks it with config.json
    args = {"quantization": quant.METHOD} if recipe.quantize else {}
    args.update(
        {k: v for k, v in recipe.engine_args.model_dump(exclude={"extra"}).items() if v is not None}
    )
    args.update(recipe.engine_args.extra)  # check_recipe refuses a key set above or below
    args.update(invariance.forced(recipe))  # what serving.determinism: invariant needs
    if recipe.lora is not None:  # the backend then reads multi_lora.json beside model.json
        args["enable_lora"] = True
        args.update(
            {k: v for k, v in recipe.lora.model_dump(exclude={"adapters"}).items() if v is not None}
        )
    if (spec := speculative_config(recipe)) is not None:
        args["speculative_config"] = spec
    return {
        "model": f"{recipe.serving.repository_mount}/{recipe.name}/{recipe.version}/model",
        **args,
    }


def multi_lora(recipe) -> dict[str, str]:
    """multi_lora.json: LoRA name → the packaged adapter where the server sees it."""
    base = f"{recipe.serving.repository_mount}/{recipe.name}/{recipe.version}/lora"
    return {name: f"{base}/{name}" for name in sorted(recipe.lora.adapters)} if recipe.lora else {}


def emit(built_model, root: Path, store, manifest_model) -> list:
    """The model's directory under root (its files, model.json, multi_lora.json, the plugin wheel,
    config.pbtxt) and its manifest entry."""
    from tritonbuild.triton.config import add_tensors, model_config_pb2, write_config

    r = built_model.plan.recipe
    vdir = root / r.name / str(r.version)
    for rel, entry in built_model.files.items():
        store.materialize(entry.sha256, vdir / rel)
    (vdir / "model.json").write_bytes(pretty_json(model_json(r)))
    if r.lora is not None:
        (vdir / "multi_lora.json").write_bytes(pretty_json(multi_lora(r)))
    serving = invariant.serving(r)
    if serving:
        invariant.plugin_wheel(vdir / invariant.PLUGIN_DIR)
    pb2 = model_config_pb2()
    mc = pb2.ModelConfig()
    mc.name = r.name
    mc.backend = "vllm"
    mc.max_batch_size = 0
    mc.version_policy.latest.num_versions = 1
    mc.model_transaction_policy.decoupled = True
    add_tensors(mc.input, INPUTS, pb2, True)
    add_tensors(mc.output, OUTPUTS, pb2, False)
    g = mc.instance_group.add()
    g.kind, g.count = pb2.ModelInstanceGroup.Kind.Value("KIND_MODEL"), 1
    write_config(root / r.name, mc)
    return [
        manifest_model(
            name=r.name,
            version=r.version,
            backend="vllm",
            target="gpu",
            model_identity=sha256_json({k: e.sha256 for k, e in built_model.files.items()}),
            inputs=INPUTS,
            outputs=OUTPUTS,
            max_batch_size=0,
            llm={
                "engine_args": json.loads(pretty_json(model_json(r))),
                "serving_image": r.image.triton_image,
                "gpu": r.gpu,  # what the memory plan was made for: deploy-snippets' node selection
                **({"serving": serving} if serving else {}),
            },
        )
    ]
