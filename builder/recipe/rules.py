"""The recipe's cross-field rules (Triton's own load rules among them), each tied to the key a user
has to change; a recipe's backend adds its own (Backend.check_recipe) through recipe.kinds.check."""

from __future__ import annotations

from tritonbuild.recipe.buckets import bucket_rules
from tritonbuild.recipe.models import Batching, Recipe
from tritonbuild.recipe.problem import Problem


def _batching_problems(recipe: Recipe) -> list[Problem]:
    """The dynamic batcher's rules (Triton's ValidateModelConfig)."""
    batching = recipe.batching
    if batching is None:
        return []
    out: list[Problem] = []
    # NOTE: Triton accepts dynamic_batching with max_batch_size 0 (queueing, priorities, timeouts
    # without batching); only a preferred size above max_batch_size is refused (ValidateModelConfig,
    # core r24.10).
    for i, size in enumerate(batching.preferred_batch_sizes):
        if size > recipe.max_batch_size:
            out.append(
                (
                    ("batching", "preferred_batch_sizes", i),
                    f"preferred batch size {size} exceeds max_batch_size {recipe.max_batch_size}",
                    f"use sizes <= {recipe.max_batch_size} or raise max_batch_size",
                )
            )
    return out + _priority_problems(batching) + _ordering_problems(batching)


def _priority_problems(batching: Batching) -> list[Problem]:
    """Priority levels: the default one and each with a queue policy of its own within
    1..priority_levels."""
    out: list[Problem] = []
    if (
        batching.priority_levels
        and not 1 <= batching.default_priority_level <= batching.priority_levels
    ):
        out.append(
            (
                ("batching", "default_priority_level"),
                f"default_priority_level {batching.default_priority_level} is outside "
                f"[1, {batching.priority_levels}]",
                "set it between 1 and priority_levels",
            )
        )
    for level in batching.priority_queue_policy:
        if not 1 <= level <= batching.priority_levels:
            out.append(
                (
                    ("batching", "priority_queue_policy", level),
                    f"priority level {level} is outside [1, {batching.priority_levels}]",
                    "fix the level",
                )
            )
    return out


def _ordering_problems(batching: Batching) -> list[Problem]:
    """What preserve_ordering forbids: more than one priority level, a queue policy that delays."""
    if not batching.preserve_ordering:
        return []
    out: list[Problem] = []
    if batching.priority_levels > 1:
        out.append(
            (
                ("batching", "preserve_ordering"),
                "preserve_ordering forbids more than one priority level",
                "drop preserve_ordering or use priority_levels <= 1",
            )
        )
    # Triton (core r24.10 model_config_utils.cc ValidateModelConfig) refuses a DELAY action that can
    # trigger (a non-zero timeout) when responses must keep request order.
    policies = [
        (("batching", "default_queue_policy"), batching.default_queue_policy),
        *(
            (("batching", "priority_queue_policy", level), policy)
            for level, policy in batching.priority_queue_policy.items()
        ),
    ]
    for loc, policy in policies:
        if policy is not None and policy.timeout_action == "delay" and policy.default_timeout_us:
            out.append(
                (
                    (*loc, "timeout_action"),
                    "timeout_action delay with preserve_ordering: Triton "
                    "refuses it ('Queue policy can not have DELAY as timeout action when "
                    "'preserve_ordering' is true')",
                    "use timeout_action: reject, or drop preserve_ordering",
                )
            )
    return out


def check_rules(recipe: Recipe, backend_problems: list[Problem]) -> list[Problem]:
    """Cross-field rules, each tied to the key a user has to change (Triton's own load rules). The
    rules of the recipe's backend (Backend.check_recipe, passed in by recipe.kinds.check) are
    reported after the serving rules (batching, instances) and before the model-wide ones (warmup,
    tune, dims)."""
    return (
        _batching_problems(recipe)
        + bucket_rules(recipe)
        + _instance_problems(recipe)
        + _label_problems(recipe)
        + _numerics_problems(recipe)
        + backend_problems
        + _warmup_problems(recipe)
        + _tune_problems(recipe)
        + _duplicate_tensors(recipe)
        + _dims_problems(recipe)
    )


def _numerics_problems(recipe: Recipe) -> list[Problem]:
    """Portable numerics pins CPU math libraries: a GPU model's answers depend on the GPU kind."""
    numerics = getattr(recipe, "numerics", None)
    if numerics is None or numerics.mode != "portable" or recipe.target != "gpu":
        return []
    return [
        (
            ("numerics", "mode"),
            "portable numerics pins the CPU's math libraries; this model runs on a GPU, whose "
            "answers depend on the GPU kind, driver and libraries (verify records them and keeps "
            "goldens per machine class)",
            "remove numerics (or set mode: native)",
        )
    ]


def _instance_problems(recipe: Recipe) -> list[Problem]:
    """Instance groups that list GPUs for a kind without them, or ask for a GPU on a CPU target."""
    out: list[Problem] = []
    for i, group in enumerate(recipe.instances):
        if group.kind in ("cpu", "model") and group.gpus:
            out.append(
                (
                    ("instances", i, "gpus"),
                    f"kind {group.kind} cannot list gpus {group.gpus}",
                    "remove 'gpus' or use kind: gpu",
                )
            )
        if group.kind == "gpu" and recipe.target == "cpu":
            out.append(
                (
                    ("instances", i, "kind"),
                    "kind gpu but the recipe's target is cpu (a CPU server fails "
                    "to load KIND_GPU instances)",
                    "use kind: cpu, or set target: gpu",
                )
            )
    return out


def _label_problems(recipe: Recipe) -> list[Problem]:
    """labels naming an output the recipe does not declare, or two files of one name (each lands
    beside config.pbtxt under its own name)."""
    names = None if recipe.outputs is None else {t.name for t in recipe.outputs}
    out: list[Problem] = []
    seen: dict[str, str] = {}
    for output, rel in recipe.labels.items():
        base = rel.replace("\\", "/").rsplit("/", 1)[-1]
        if names is not None and output not in names:
            out.append((("labels", output), f"no output {output!r}", f"outputs: {sorted(names)}"))
        elif (base in seen and seen[base] != rel) or base == "config.pbtxt" or base.isdigit():
            out.append(
                (
                    ("labels", output),
                    f"{rel}: its file name {base!r} is taken beside config.pbtxt",
                    "rename the labels file",
                )
            )
        seen[base] = rel
    return out


def _warmup_problems(recipe: Recipe) -> list[Problem]:
    """A warmup batch larger than the model batches, or from goldens the recipe does not have."""
    warmup = recipe.warmup
    out: list[Problem] = []
    if warmup is not None and warmup.batch_size > max(1, recipe.max_batch_size):
        out.append(
            (
                ("warmup", "batch_size"),
                f"warmup batch_size {warmup.batch_size} exceeds max_batch_size "
                f"{recipe.max_batch_size}",
                f"use a batch_size <= {max(1, recipe.max_batch_size)}",
            )
        )
    if warmup is not None and warmup.data == "goldens" and not recipe.verify.goldens:
        out.append(
            (
                ("warmup", "data"),
                "warmup from goldens needs verify.goldens",
                "set verify.goldens or use data: zero",
            )
        )
    return out


def _tune_problems(recipe: Recipe) -> list[Problem]:
    """A tune search space beyond what the recipe serves: batch sizes over its cap, GPUs on a CPU
    target."""
    tune = recipe.tune
    if tune is None:
        return []
    out: list[Problem] = []
    for i, size in enumerate(tune.batch_sizes or []):
        if size > recipe.max_batch_size:
            out.append(
                (
                    ("tune", "batch_sizes", i),
                    f"batch size {size} exceeds max_batch_size "
                    f"{recipe.max_batch_size} (the cap tune searches under)",
                    f"use sizes <= {recipe.max_batch_size} or raise max_batch_size",
                )
            )
    if tune.instance_kind == "gpu" and recipe.target == "cpu":
        out.append(
            (
                ("tune", "instance_kind"),
                "kind gpu but the recipe's target is cpu",
                "set target: gpu",
            )
        )
    return out


def _dims_problems(recipe: Recipe) -> list[Problem]:
    """A tensor of a batching model with empty dims: it would be only the batch dimension."""
    if recipe.max_batch_size <= 0:
        return []
    out: list[Problem] = []
    for key in ("inputs", "outputs"):
        for i, tensor in enumerate(getattr(recipe, key) or []):
            if not tensor.dims:
                out.append(
                    (
                        (key, i, "dims"),
                        "empty dims with max_batch_size > 0 (the tensor would be "
                        "only the batch dimension)",
                        "use dims: [1]",
                    )
                )
    return out


def _duplicate_tensors(recipe: Recipe) -> list[Problem]:
    """A tensor name listed twice among the inputs (or the outputs), refused at the second
    occurrence. Seen with tritonserver 2.51 (embedded): a python model with inputs [X, X] loads,
    then refuses every request ("expected 2 inputs but got 1 inputs"): a request carries one tensor
    per name, so the model cannot be called; two outputs of one name cannot be told apart in a
    response."""
    out: list[Problem] = []
    for key in ("inputs", "outputs"):
        first: dict[str, int] = {}
        for i, tensor in enumerate(getattr(recipe, key) or []):
            if tensor.name in first:
                out.append(
                    (
                        (key, i, "name"),
                        f"{key[:-1]} name {tensor.name!r} is already used by "
                        f"{key}[{first[tensor.name]}] (a request or response carries one tensor "
                        "per name: Triton would refuse every request to this model)",
                        f"rename one of them; each of a model's {key} needs its own name",
                    )
                )
            first.setdefault(tensor.name, i)
    return out
