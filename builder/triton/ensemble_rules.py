"""Triton's ensemble validation, ported rule for rule: an ensemble's own data flow, and the ensemble
against the configs of its steps (the checks Triton makes when it loads an ensemble over models it
has loaded).

Source: triton-inference-server/core, commit bfec7c61dc0939433f64f14e89b1973073eac8ba (branch r24.10
= tritonserver 2.51): src/model_config_utils.cc (ValidateEnsembleSchedulingConfig,
BuildEnsembleGraph), src/ensemble_scheduler/ensemble_utils.cc (ValidateEnsembleConfig),
src/model_repository_manager/model_repository_manager.cc (ensemble cycles). Messages are Triton's
own wording.
"""

from __future__ import annotations

from tritonbuild.triton.model_dir import ModelDirs


def ensemble_scheduling_problems(mc, name: str, platform: str) -> list[str]:
    """ValidateEnsembleSchedulingConfig + BuildEnsembleGraph: the ensemble's own data flow."""
    problem = _ensemble_header_problem(mc, name, platform)
    if problem:
        return [problem]
    graph = _ensemble_graph(mc.ensemble_scheduling.step, name)
    if isinstance(graph, str):
        return [graph]
    problem = _ensemble_flow_problem(mc, name, *graph)
    return [problem] if problem else []


def _ensemble_header_problem(mc, name: str, platform: str) -> str | None:
    if platform != "ensemble":
        return (
            f"ensemble scheduling cannot be set for model '{name}' whose platform is not ensemble"
        )
    if len(mc.instance_group):
        return f"instance group should not be specified for ensemble '{name}'"
    if mc.HasField("optimization"):
        return f"optimization should not be specified for ensemble '{name}'"
    if len(mc.model_warmup):
        return f"model_warmup can not be specified for ensemble '{name}'"
    if not mc.ensemble_scheduling.step:
        return f"must specify 'step' for ensemble '{name}'"
    return None


def _ensemble_graph(steps, name: str) -> tuple[dict[str, list[str]], dict[str, list[str]]] | str:
    """(tensor → the input tensors of the step producing it, tensor → the tensors its consumers
    produce), or Triton's message for a step that cannot be part of a graph."""
    prev: dict[str, list[str]] = {}
    nxt: dict[str, list[str]] = {}
    written: set[str] = set()
    for i, step in enumerate(steps):
        for field in ("model_name", "input_map", "output_map"):
            if not getattr(step, field):
                return f"must specify '{field}' in step {i} of ensemble '{name}'"
        for out_t in step.output_map.values():
            if out_t in written:
                return (
                    f"ensemble tensor '{out_t}' can appear in an output map only once for ensemble "
                    f"'{name}' step {i}"
                )
            written.add(out_t)
            nxt.setdefault(out_t, [])
            prev.setdefault(out_t, []).extend(step.input_map.values())
        for in_t in step.input_map.values():
            nxt.setdefault(in_t, []).extend(step.output_map.values())
            prev.setdefault(in_t, [])
    return prev, nxt


def _ensemble_flow_problem(
    mc, name: str, prev: dict[str, list[str]], nxt: dict[str, list[str]]
) -> str | None:
    """Every input used, every output written from the inputs, no tensor left unused."""
    ready: set[str] = set()
    for tensor in mc.input:
        if tensor.name not in nxt:
            return f"ensemble input '{tensor.name}' for ensemble {name}' is not used"
        ready.add(tensor.name)
    queue = list(ready)
    while queue:
        node = queue.pop(0)
        for n in nxt.get(node, []):
            if n not in ready and all(x in ready for x in prev.get(n, [])):
                ready.add(n)
                queue.append(n)
    outputs = set()
    for tensor in mc.output:
        if tensor.name not in nxt:
            return f"ensemble output '{tensor.name}' for ensemble {name}' is not used"
        if tensor.name not in ready:
            return _unwritten_output(tensor.name, name, prev, ready)
        outputs.add(tensor.name)
    for tensor in nxt:
        if tensor not in outputs and (tensor not in ready or not nxt[tensor]):
            return f"ensemble tensor '{tensor}' is unused in ensemble '{name}'"
    return None


def _unwritten_output(output: str, name: str, prev: dict[str, list[str]], ready: set[str]) -> str:
    """Triton's message for an output no path writes, naming the first tensor up its chain that is
    not connected."""
    msg = f"output '{output}' for ensemble '{name}' is not written"
    last, nodes, seen = output, prev.get(output, []), set()
    while nodes:
        cand = next((x for x in nodes if x not in ready and x not in seen), None)
        if cand is None:
            break
        seen.add(cand)
        last, nodes = cand, prev.get(cand, [])
    if last != output:
        msg += f": at least one of its depending tensors, '{last}', is not connected"
    return msg


def core_model_problems(mc, models: ModelDirs) -> list[str] | None:
    """The model-file rule of a platform Triton's core runs itself, with no backend library (the
    ensemble scheduler): its steps against their configs in the repository models reads. None for a
    model a backend loads."""
    return ensemble_step_problems(mc, models) if mc.platform == "ensemble" else None


def ensemble_step_problems(mc, models: ModelDirs) -> list[str]:
    """ValidateEnsembleConfig (ensemble_utils.cc) against the step models' configs (as models read
    them: each once), and the repository manager's checks (step present, required version,
    cycles)."""
    name = mc.name
    cycle = _cycle(name, models)
    if cycle:
        return [
            f"circular dependency between ensembles: {cycle[0]} -> ... -> {cycle[-2]} -> "
            f"{cycle[-1]}"
        ]
    problems = []
    batching = mc.max_batch_size > 0
    tensors: dict[str, tuple[str, int, list[int], list[int]]] = {}

    def node(model: str, b: bool, dtype: int, dims) -> tuple[str, int, list[int], list[int]]:
        return model, dtype, list(dims), ([-1, *dims] if b else list(dims))

    for tensor in [*mc.input, *mc.output]:
        dims = tensor.reshape.shape if tensor.HasField("reshape") else tensor.dims
        tensors[tensor.name] = node(name, batching, tensor.data_type, dims)
    parsed = []
    for step in mc.ensemble_scheduling.step:
        step_config = models.config(step.model_name)
        if step_config is None:
            problems.append(
                f"ensemble {name} contains models that are not available or ambiguous: "
                f"{step.model_name}"
            )
            continue
        if step.model_version != -1 and str(step.model_version) not in models[step.model_name].dirs:
            problems.append(
                f"ensemble '{name}' depends on '{step.model_name}' whose required version "
                f"{step.model_version} is not loaded."
            )
        if step_config.max_batch_size != 0 and step_config.max_batch_size < mc.max_batch_size:
            problems.append(
                f"ensemble {name} allows maximum batch size {mc.max_batch_size}, but it contains "
                f"model {step.model_name} which only allows maximum batch size to be "
                f"{step_config.max_batch_size}"
            )
            continue
        problems += _tensor_mapping(name, step, step_config, tensors, node)
        parsed.append((step, step_config))
    if not problems:
        problems += _decoupled_origins(mc, parsed)
    return problems


def _decoupled_origins(mc, steps: list) -> list[str]:
    """ValidateEnsembleConfig's walk: a step must not take inputs that come from different decoupled
    models."""
    prev: dict[str, list[str]] = {}
    nxt: dict[str, list[str]] = {}
    producer: dict[str, tuple[int, str, bool]] = {}  # tensor → (step index, model, decoupled)
    for i, (step, step_config) in enumerate(steps):
        for out_t in step.output_map.values():
            producer[out_t] = (i, step.model_name, step_config.model_transaction_policy.decoupled)
            prev.setdefault(out_t, []).extend(step.input_map.values())
        for in_t in step.input_map.values():
            nxt.setdefault(in_t, []).extend(step.output_map.values())
    label: dict[str, int] = {tensor.name: 0 for tensor in mc.input}
    sibling: dict[int, int] = {}
    counter = 0
    queue = [tensor.name for tensor in mc.input]
    while queue:
        node = queue.pop(0)
        for n in nxt.get(node, []):
            if n in label or not all(x in label for x in prev.get(n, [])):
                continue
            labels = {label[x] for x in prev[n]}
            if len(labels) > 1:
                return [
                    f"in ensemble {mc.name}, step of model '{producer[n][1]}' receives inputs "
                    "originated from different decoupled models"
                ]
            step_index, _, decoupled = producer[n]
            if step_index not in sibling:
                counter += decoupled
                sibling[step_index] = counter if decoupled else labels.pop()
            label[n] = sibling[step_index]
            queue.append(n)
    return []


def _consistent(a, b, prefix: str) -> str | None:
    from tritonbuild.triton.config import model_config_pb2

    def same(x, y) -> bool:
        return len(x) == len(y) and all(
            i == j or i == -1 or j == -1 for i, j in zip(x, y, strict=True)
        )

    if a[1] != b[1]:
        n = model_config_pb2().DataType.Name
        return (
            f"{prefix}inconsistent data type: {n(a[1])} is inferred from model {a[0]} while "
            f"{n(b[1])} is inferred from model {b[0]}"
        )
    if not same(a[2], b[2]) and not same(a[3], b[3]):
        return (
            f"{prefix}inconsistent shape: [{','.join(map(str, a[3]))}] is inferred from model "
            f"{a[0]} while [{','.join(map(str, b[3]))}] is inferred from model {b[0]}"
        )
    return None


def _tensor_mapping(ens: str, step, step_config, tensors: dict, node) -> list[str]:
    step_model = step.model_name
    b = step_config.max_batch_size > 0
    names = {tensor.name for tensor in step_config.input}
    for key, value in step.input_map.items():
        if key not in names:
            return [
                f"in ensemble {ens}, ensemble tensor {value} is mapping to non-existing input "
                f"{key} in model {step_model}"
            ]
    for tensor in step_config.input:
        if tensor.name not in step.input_map:
            if tensor.optional:
                continue
            return [
                f"in ensemble {ens}, input {tensor.name} in model {step_model} is not mapped to "
                "any ensemble tensors"
            ]
        ensemble_tensor = step.input_map[tensor.name]
        mine = node(step_model, b, tensor.data_type, tensor.dims)
        if ensemble_tensor in tensors:
            err = _consistent(
                tensors[ensemble_tensor],
                mine,
                f"in ensemble {ens}, ensemble tensor {ensemble_tensor}: ",
            )
            if err:
                return [err]
        else:
            tensors[ensemble_tensor] = mine
    outs = {tensor.name: tensor for tensor in step_config.output}
    for key, value in step.output_map.items():
        if key not in outs:
            return [
                f"in ensemble {ens}, ensemble tensor {value} is mapped from non-existing output "
                f"{key} in model {step_model}"
            ]
        mine = node(step_model, b, outs[key].data_type, outs[key].dims)
        if value in tensors:
            err = _consistent(tensors[value], mine, f"in ensemble {ens}, ensemble tensor {value}: ")
            if err:
                return [err]
        else:
            tensors[value] = mine
    return []


def _cycle(start: str, models: ModelDirs) -> list[str] | None:
    """A path start → … → start through ensemble steps, if any (iterative: no recursion limit)."""
    stack = [(start, [start])]
    seen = set()
    while stack:
        name, path = stack.pop()
        mc = models.config(name)
        if mc is None:
            continue
        for step in mc.ensemble_scheduling.step:
            if step.model_name == start:
                return [*path, start]
            if step.model_name not in seen:
                seen.add(step.model_name)
                stack.append((step.model_name, [*path, step.model_name]))
    return None
