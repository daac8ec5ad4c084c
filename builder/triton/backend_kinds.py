"""Instance kinds a Triton backend refuses when it creates a model instance, for backends
tritonbuild has no plug-in for: Triton's core accepts the config, the backend then fails the load.
Each entry is a recorded fact (tests/contracts/facts/kubernetes.json openvino_instance_kind):

- openvino: openvino_backend src/openvino.cc (db193042), ModelInstanceState refuses every kind but
  KIND_CPU;
  core src/model_config_utils.cc (73aad7c3) turns KIND_AUTO into KIND_GPU on a server that has the
  GPUs listed (or any GPU), so KIND_AUTO naming GPUs is refused there too.
"""

from __future__ import annotations

# Triton backend → (the kinds its instances accept, its refusal in its own words; {model} is the
# model's name)
ACCEPTED_KINDS = {
    "openvino": (
        ("KIND_CPU",),
        "unable to load model '{model}', Triton OpenVINO backend supports only Kind CPU and AUTO",
    )
}


def instance_kind_problems(mc, backend: str) -> list[str]:
    """The backend's refusal for each instance group of a kind it does not take (none: a backend not
    known here)."""
    if backend not in ACCEPTED_KINDS:
        return []
    accepted, refusal = ACCEPTED_KINDS[backend]
    problems = []
    for index, group in enumerate(mc.instance_group):
        kind = group.DESCRIPTOR.fields_by_name["kind"].enum_type.values_by_number[group.kind].name
        name = group.name or f"{mc.name}_{index}"
        if kind == "KIND_AUTO" and group.gpus:
            problems.append(
                f"instance group {name} is KIND_AUTO with gpus {list(group.gpus)}: on a server "
                "with those GPUs Triton makes it KIND_GPU, and then: "
                f"{refusal.format(model=mc.name)}"
            )
        elif kind not in accepted and kind != "KIND_AUTO":
            problems.append(f"instance group {name} is {kind}: {refusal.format(model=mc.name)}")
    return problems
