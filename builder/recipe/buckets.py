"""batch_buckets: the recipe's rules for fixed batch buckets (what generates them lives in the
backends that honour them: the Python-backend wrapper and the TorchScript export)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from tritonbuild.recipe.problem import Problem

# The key, declared by the recipe types of the backends that honour it (PythonRecipe,
# PyTorchRecipe); any other kind refuses it as an unknown key.
Buckets = list[Annotated[int, Field(ge=1, le=2**31 - 1)]] | None


def buckets_field():
    return Field(
        None,
        description="Each batch padded with zero rows to the next of these sizes before the model "
        "runs, its answers sliced back: the model computes only at these shapes. "
        "Ascending; the largest >= max_batch_size.",
    )


def bucket_rules(recipe) -> list[Problem]:
    """batch_buckets: ascending sizes of a batching model, the largest holding every batch Triton
    may form."""
    buckets = getattr(recipe, "batch_buckets", None)
    if not buckets:
        return []
    if recipe.max_batch_size == 0:
        return [
            (
                ("batch_buckets",),
                "set on a model that does not batch (max_batch_size 0)",
                "set max_batch_size > 0 or remove batch_buckets",
            )
        ]
    if buckets != sorted(set(buckets)):
        return [
            (
                ("batch_buckets",),
                f"{buckets} are not strictly ascending",
                f"list them ascending, once each: {sorted(set(buckets))}",
            )
        ]
    if buckets[-1] < recipe.max_batch_size:
        return [
            (
                ("batch_buckets", len(buckets) - 1),
                f"the largest bucket {buckets[-1]} is below max_batch_size "
                f"{recipe.max_batch_size}: a batch Triton forms would not fit any bucket",
                f"add {recipe.max_batch_size} (or more) as the last bucket, or lower max_batch_size",
            )
        ]
    return []
