"""How a TensorRT-LLM group's server is started: orchestrator mode (one tritonserver spawning the
executor workers that own the GPUs) for a multi-GPU engine or several instances, else a plain
start."""

from __future__ import annotations

from tritonbuild.backends.tensorrtllm.recipe.model import LLMRecipe

# upstream template's value
EXECUTOR_WORKER = "/opt/tritonserver/backends/tensorrtllm/trtllmExecutorWorker"
# How tensorrtllm_backend's launcher (scripts/launch_triton_server.py --multi_model) starts
# orchestrator mode: one MPI rank, the spawned executor workers own the GPUs, so Triton keeps no
# pinned or CUDA memory pools on them
ORCHESTRATOR_ENV = {"TRTLLM_ORCHESTRATOR": "1", "TRTLLM_ORCHESTRATOR_SPAWN_PROCESSES": "1"}
ORCHESTRATOR_MPI = ["mpirun", "--allow-run-as-root", "-n", "1"]
ORCHESTRATOR_ARGS = ["--pinned-memory-pool-byte-size=0", "--enable-peer-access=false"]


def server_launch(r: LLMRecipe) -> dict:
    """The environment, launcher prefix and tritonserver arguments this group needs ({} = a plain
    start)."""
    if not needs_orchestrator(r):
        return {}
    pools = [
        f"--cuda-memory-pool-byte-size={gpu}:0" for gpu in sorted(set(r.serving.gpu_device_ids))
    ]
    return {
        "env": ORCHESTRATOR_ENV,
        "launcher": ORCHESTRATOR_MPI,
        "args": ORCHESTRATOR_ARGS + pools,
    }


def needs_orchestrator(r: LLMRecipe) -> bool:
    """A multi-GPU engine or several instances: one tritonserver drives the ranks by spawning
    executor workers (orchestrator mode, TRTLLM_ORCHESTRATOR=1) instead of one MPI-launched server
    per rank."""
    world = r.engine.tp_size * r.engine.pp_size
    return world > 1 or len(r.serving.gpu_device_ids) > world
