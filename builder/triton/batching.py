"""Dynamic batching between a recipe's `batching:` (and tune's candidates, and the LLM runtimes'
serving knobs) and config.pbtxt's dynamic_batching: the one place the two spellings meet. Recipe
keys are written in the recipe's spelling (preferred_batch_sizes, max_queue_delay_us); the config's
are Triton's DynamicBatching fields. It knows no recipe model: anything with the recipe keys (a
dict, or Batching.model_dump()) is written."""

from __future__ import annotations

from collections.abc import Mapping

# recipe key → ModelDynamicBatching field (Triton's model_config.proto)
FIELDS = {
    "preferred_batch_sizes": "preferred_batch_size",
    "max_queue_delay_us": "max_queue_delay_microseconds",
    "preserve_ordering": "preserve_ordering",
    "priority_levels": "priority_levels",
    "default_priority_level": "default_priority_level",
}
# recipe key → ModelQueuePolicy field
QUEUE_FIELDS = {
    "timeout_action": "timeout_action",
    "default_timeout_us": "default_timeout_microseconds",
    "allow_timeout_override": "allow_timeout_override",
    "max_queue_size": "max_queue_size",
}


def write_dynamic_batching(mc, values: Mapping | None) -> None:
    """Set mc.dynamic_batching from recipe-keyed values (keys left out keep what mc has); None: no
    dynamic batcher. Queue policies: default_queue_policy and priority_queue_policy {level: policy},
    recipe-keyed."""
    if values is None:
        mc.ClearField("dynamic_batching")
        return
    db = mc.dynamic_batching
    db.SetInParent()
    for recipe_key, field in FIELDS.items():
        if recipe_key == "preferred_batch_sizes" and recipe_key in values:
            del db.preferred_batch_size[:]
            db.preferred_batch_size.extend(values[recipe_key])
        elif recipe_key in values:
            setattr(db, field, values[recipe_key])
    if values.get("default_queue_policy") is not None:
        _write_queue_policy(db.default_queue_policy, values["default_queue_policy"])
    for level, policy in sorted((values.get("priority_queue_policy") or {}).items()):
        _write_queue_policy(db.priority_queue_policy[int(level)], policy)


def _write_queue_policy(queue_policy, values: Mapping) -> None:
    for recipe_key, field in QUEUE_FIELDS.items():
        if recipe_key == "timeout_action" and recipe_key in values:
            queue_policy.timeout_action = type(queue_policy).TimeoutAction.Value(
                values[recipe_key].upper()
            )
        elif recipe_key in values:
            setattr(queue_policy, field, values[recipe_key])


def read_dynamic_batching(mc) -> dict | None:
    """mc.dynamic_batching in the recipe's spelling, fields at their defaults left out; None: no
    dynamic batcher."""
    if not mc.HasField("dynamic_batching"):
        return None
    db = mc.dynamic_batching
    out = {recipe_key: getattr(db, field) for recipe_key, field in FIELDS.items()}
    out["preferred_batch_sizes"] = list(db.preferred_batch_size)
    if db.HasField("default_queue_policy"):
        out["default_queue_policy"] = _read_queue_policy(db.default_queue_policy)
    if db.priority_queue_policy:
        out["priority_queue_policy"] = {
            level: _read_queue_policy(policy)
            for level, policy in sorted(db.priority_queue_policy.items())
        }
    return {key: value for key, value in out.items() if value}


def _read_queue_policy(queue_policy) -> dict:
    out = {recipe_key: getattr(queue_policy, field) for recipe_key, field in QUEUE_FIELDS.items()}
    out["timeout_action"] = (
        type(queue_policy).TimeoutAction.Name(queue_policy.timeout_action).lower()
    )
    return out
