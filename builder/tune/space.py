"""The search space: candidate serving configs of one built model, as edits of its own
ModelConfig."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from tritonbuild.recipe.models import Tune
from tritonbuild.triton.batching import write_dynamic_batching

BUCKETS_PARAMETER = "tritonbuild_batch_buckets"  # backends/models/bucketed.py reads it
KINDS = {"cpu": "KIND_CPU", "gpu": "KIND_GPU", "auto": "KIND_AUTO", "model": "KIND_MODEL"}
KIND_NAMES = {v: k for k, v in KINDS.items()}


class Candidate(BaseModel):
    """One serving config. Grid coordinates (i, b, d, p) index the tune section's lists; b == 0 is
    'dynamic batching off' (then d and p are 0)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    instances: int
    kind: str
    gpus: list[int] | None = None
    batching: bool
    max_batch_size: int
    max_queue_delay_us: int = 0
    preferred: bool = False
    coords: tuple[int, int, int, int] | None = None
    is_default: bool = False
    # the batch bucket the Python wrapper pads to (config parameter): None = as built, () = off (the
    # plain model)
    buckets: tuple[int, ...] | None = None

    @property
    def label(self) -> str:
        if self.is_default:
            return "default"
        s = f"{self.instances}x{self.kind}"
        if self.gpus is not None and self.kind == "gpu":
            s += f"@{len(self.gpus)}gpu"
        if not self.batching:
            return s + " no-batching"
        return (
            s
            + f" mbs{self.max_batch_size} delay{self.max_queue_delay_us}us"
            + (" pref" if self.preferred else "")
            + (f" buckets{','.join(map(str, self.buckets))}" if self.buckets else "")
        )

    def batching_values(self) -> dict | None:
        """The recipe's `batching:` this candidate sets; None: no dynamic batcher."""
        if not self.batching:
            return None
        return {
            "max_queue_delay_us": self.max_queue_delay_us,
            "preferred_batch_sizes": [self.max_batch_size] if self.preferred else [],
        }

    def recipe_values(self, base_instances: list[dict]) -> dict:
        """The recipe keys this candidate sets (the patch)."""
        group = {"kind": self.kind, "count": self.instances}
        if self.gpus is not None:
            group["gpus"] = list(self.gpus)
        elif base_instances and base_instances[0].get("gpus"):
            group["gpus"] = list(base_instances[0]["gpus"])
        out = {"max_batch_size": self.max_batch_size, "instances": [group]}
        out["batching"] = self.batching_values()
        if self.buckets is not None:
            out["batch_buckets"] = list(self.buckets) or None
        return out


def default_batch_sizes(cap: int) -> list[int]:
    sizes, b = [], 4
    while b < cap:
        sizes.append(b)
        b *= 2
    return sizes + ([cap] if cap >= 2 else [])


def default_candidate(mc, kind: str | None = None) -> Candidate:
    """Triton's default: no dynamic batcher, one instance (the built model's kind and
    max_batch_size)."""
    kind = kind or _kind_of(mc)
    return Candidate(
        instances=1, kind=kind, batching=False, max_batch_size=mc.max_batch_size, is_default=True
    )


def _kind_of(mc) -> str:
    if not mc.instance_group:
        return "cpu"
    from tritonbuild.triton.config import model_config_pb2

    name = model_config_pb2().ModelInstanceGroup.Kind.Name(mc.instance_group[0].kind)
    return KIND_NAMES.get(name, "cpu")


class Grid:
    """The tune section's lists as a 4-D grid (instances, batch size or off, queue delay,
    preferred)."""

    def __init__(self, tune: Tune, mc):
        self.cap = mc.max_batch_size
        self.kind = tune.instance_kind or _kind_of(mc)
        self.instances = sorted(set(tune.instance_counts))
        self.buckets = tuple(tune.buckets) if tune.buckets else None
        sizes = (
            tune.batch_sizes
            or [b for b in self.buckets or () if b <= self.cap]
            or default_batch_sizes(self.cap)
        )
        self.batch = [0] + (sorted(set(sizes)) if self.cap > 0 else [])
        self.delays = sorted(set(tune.max_queue_delay_us))
        self.preferred = sorted(set(tune.preferred_batch_sizes))
        self.gpus = None
        if tune.gpus_per_group and self.kind == "gpu":
            self.gpus = list(range(max(tune.gpus_per_group)))
        self.default = default_candidate(mc, self.kind)
        # tune.buckets: each batching candidate pads to one bucket; Triton's default (and any config
        # without the batcher) serves the model as built, or without its padding under baseline:
        # plain
        self.unbatched = () if self.buckets is not None and tune.baseline == "plain" else None
        self.default = self.default.model_copy(update={"buckets": self.unbatched})

    def at(self, i: int, b: int, d: int = 0, p: int = 0) -> Candidate:
        if b == 0:
            d = p = 0
            if self.instances[i] == 1 and self.gpus is None:
                return self.default  # one instance, no batcher: Triton's default itself
        return Candidate(
            instances=self.instances[i],
            kind=self.kind,
            gpus=self.gpus,
            batching=b > 0,
            max_batch_size=self.batch[b] if b else self.cap,
            max_queue_delay_us=self.delays[d] if b else 0,
            preferred=bool(self.preferred[p]) if b else False,
            coords=(i, b, d, p),
            buckets=self.bucket_of(self.batch[b]) if b else self.unbatched,
        )

    def baseline(self) -> dict | None:
        """With tune.buckets, what Triton's default config served (the report's "baseline")."""
        if self.buckets is None:
            return None
        if self.unbatched is None:
            return {
                "served": "built",
                "text": "Triton's default config of the model as built: every request padded "
                "to its batch_buckets, as invariant as every candidate",
            }
        return {
            "served": "plain",
            "text": "Triton's default config of the model without its buckets: a row "
            "computes at the rows it was sent with (its bits may depend on them)",
        }

    def bucket_of(self, max_batch_size: int) -> tuple[int, ...] | None:
        """The one bucket a batching candidate pads to: the smallest that holds its largest
        batch."""
        if self.buckets is None:
            return None
        return (next((size for size in self.buckets if size >= max_batch_size), self.buckets[-1]),)

    def all(self) -> list[Candidate]:
        """Every distinct candidate (Triton's default included when the grid holds it)."""
        out = []
        for i in range(len(self.instances)):
            out.append(self.at(i, 0))
            for b in range(1, len(self.batch)):
                for d in range(len(self.delays)):
                    for p in range(len(self.preferred)):
                        out.append(self.at(i, b, d, p))
        return out

    def valid(self, i: int, b: int, d: int = 0, p: int = 0) -> bool:
        return (
            0 <= i < len(self.instances)
            and 0 <= b < len(self.batch)
            and 0 <= d < len(self.delays)
            and 0 <= p < len(self.preferred)
        )


def apply(mc, candidate: Candidate):
    """A copy of the built ModelConfig with the candidate's batching and instance groups."""
    from tritonbuild.triton.config import model_config_pb2

    pb2 = model_config_pb2()
    out = pb2.ModelConfig()
    out.CopyFrom(mc)
    out.max_batch_size = candidate.max_batch_size
    write_dynamic_batching(out, candidate.batching_values())
    out.ClearField("instance_group")
    group = out.instance_group.add()
    group.kind = pb2.ModelInstanceGroup.Kind.Value(KINDS[candidate.kind])
    group.count = candidate.instances
    gpus = (
        candidate.gpus
        if candidate.gpus is not None
        else (list(mc.instance_group[0].gpus) if mc.instance_group else [])
    )
    if candidate.kind == "gpu":
        group.gpus.extend(gpus)
    if (
        candidate.buckets is not None
    ):  # the Python wrapper's parameter (batch_buckets); empty: no padding
        out.parameters[BUCKETS_PARAMETER].string_value = ",".join(
            str(size) for size in candidate.buckets
        )
    for warmup in out.model_warmup:
        if candidate.max_batch_size and warmup.batch_size > candidate.max_batch_size:
            warmup.batch_size = candidate.max_batch_size
    return out
