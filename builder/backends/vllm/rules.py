"""What Triton's vLLM backend needs of a model directory to load it, checked offline (config.pbtxt
and model.json; facts recorded from vllm_backend src/model.py in tests/contracts)."""

from __future__ import annotations

import json
from pathlib import Path


def load_problems(mc, model_dir: Path, versions: list[int]) -> list[str]:
    """What the vLLM backend needs to load a model (offline, from config.pbtxt and model.json)."""
    p = []
    if mc.max_batch_size != 0:
        p.append("the vLLM backend needs max_batch_size 0 (it batches internally)")
    # NOTE: the backend's auto_complete_config sets decoupled: true where the config leaves
    # model_transaction_policy out, and refuses to change a decoupled: false written there
    # (vllm_backend src/model.py, python_backend set_model_transaction_policy;
    # tests/contracts/facts).
    if mc.HasField("model_transaction_policy") and not mc.model_transaction_policy.decoupled:
        p.append(
            "the vLLM backend needs model_transaction_policy.decoupled: true (its "
            "auto_complete_config sets it only where the config leaves model_transaction_policy "
            "out)"
        )
    world = 1
    for v in versions:
        try:
            doc = json.loads((model_dir / str(v) / "model.json").read_text())
            if "model" not in doc:
                p.append(f"{v}/model.json has no 'model'")
            world = max(
                world,
                int(doc.get("tensor_parallel_size", 1)) * int(doc.get("pipeline_parallel_size", 1)),
            )
            table = model_dir / str(v) / "multi_lora.json"
            if str(doc.get("enable_lora", False)).lower() == "true" and not table.is_file():
                p.append(
                    f"{v}/model.json has enable_lora but {v}/multi_lora.json is missing: the "
                    f"backend fails the load (Triton backend cannot find {table}.)"
                )
        except (OSError, ValueError, TypeError, AttributeError) as e:
            p.append(f"{v}/model.json is not valid JSON: {e}")
    kinds = {type(g).Kind.Name(g.kind) for g in mc.instance_group}
    if "KIND_GPU" in kinds and world > 1:
        p.append(
            "use instance_group kind KIND_MODEL: the vLLM backend refuses KIND_GPU with tensor x "
            f"pipeline parallelism {world} > 1"
        )
    elif kinds - {"KIND_MODEL", "KIND_GPU"}:
        p.append(
            f"instance_group kind {sorted(kinds - {'KIND_MODEL', 'KIND_GPU'})}: use KIND_MODEL "
            "(vLLM places its own devices) or KIND_GPU for one GPU"
        )
    return p
