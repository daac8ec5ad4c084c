"""The recipe's tune section: the serving configs `tritonbuild tune` tries, the load they must
serve, the SLA, and how its decisions are made (paired rounds, confidence)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Strict(
    BaseModel
):  # NOTE: recipe.models' base (it imports this module, so this one cannot import it)
    model_config = ConfigDict(extra="forbid", frozen=True)


class Tune(Strict):
    """`tritonbuild tune`: the serving configs to try, the load they must serve and the latency SLA."""

    batch_sizes: list[Annotated[int, Field(ge=1)]] | None = Field(
        None,
        description="max_batch_size values tried with dynamic batching on (<= the recipe's "
        "max_batch_size); default: powers of two from 4 up to it, and it.",
    )
    max_queue_delay_us: list[Annotated[int, Field(ge=0)]] = Field(
        default_factory=lambda: [0, 500],
        description="Dynamic batcher queue delays tried (microseconds).",
    )
    preferred_batch_sizes: list[bool] = Field(
        default_factory=lambda: [False],
        description="Try without (false) and/or with (true) preferred_batch_sizes "
        "[max_batch_size].",
    )
    instance_counts: list[Annotated[int, Field(ge=1)]] = Field(
        default_factory=lambda: [1, 2, 4], description="Instances per group tried."
    )
    instance_kind: Literal["cpu", "gpu", "auto", "model"] | None = Field(
        None,
        description="Instance kind of the candidates; default: the recipe's first instance "
        "group's.",
    )
    gpus_per_group: list[Annotated[int, Field(ge=1)]] | None = Field(
        None,
        description="kind gpu: GPUs each candidate's instance group spans (gpus [0..N-1]); "
        "default: as the recipe.",
    )
    concurrency: list[Annotated[int, Field(ge=1)]] = Field(
        default_factory=lambda: [1, 64],
        description="Closed-loop load range: concurrent requests; the winner "
        "must meet the SLA and never lose to Triton's default at any.",
    )
    request_rates: list[Annotated[float, Field(gt=0)]] = Field(
        default_factory=list,
        description="Open-loop loads (requests/s), measured like the concurrency levels.",
    )
    sla_p99_ms: float | None = Field(
        None, gt=0, description="p99 latency every load must meet (ms)."
    )
    window_s: float = Field(1.0, gt=0, le=60, description="Measurement window (s).")
    stable_windows: int = Field(
        3,
        ge=2,
        le=10,
        description="Consecutive windows within 'stability' that end a "
        "measurement (perf_analyzer's rule).",
    )
    stability: float = Field(
        0.10,
        gt=0,
        le=1,
        description="Allowed relative spread of throughput and p99 across the stable windows.",
    )
    max_windows: int = Field(
        10, ge=2, le=100, description="Windows before a measurement is reported unstable."
    )
    min_vs_default: float = Field(
        1.0,
        gt=0,
        description="The winner's throughput must be >= this times Triton's "
        "default's at every load (decided on the paired rounds' "
        "interval: its lower end must reach it).",
    )
    rounds: int = Field(
        5,
        ge=1,
        le=50,
        description="Paired rounds of each finalist against Triton's default at every "
        "load, interleaved (A B, B A, ...); 1: decide on single readings.",
    )
    max_rounds: int | None = Field(
        None,
        ge=1,
        le=50,
        description="Paired rounds at most: while a rule's interval still holds its threshold "
        "(inside noise), rounds are added two at a time up to this many, so a noisy machine "
        "measures longer instead of deciding inside noise. Default: twice 'rounds'; equal to "
        "'rounds': decide after 'rounds'.",
    )
    determinism: Literal["goldens", "invariant"] = Field(
        "goldens",
        description="goldens: a config must give the recorded goldens' bits; invariant: a config "
        "may serve other bits (e.g. a smaller max_batch_size of a padding model), never bits "
        "that depend on batch composition or load; the patch then bumps version and the goldens "
        "are recorded again.",
    )
    buckets: list[Annotated[int, Field(ge=1)]] | None = Field(
        None,
        description="Bucket sizes searched with the batch sizes (a Python model built with "
        "batch_buckets: its wrapper reads them from the config): a batching candidate of "
        "max_batch_size B pads every batch to the smallest of them >= B, one shape per config. "
        "Needs determinism: invariant (the bits change); batch_sizes default to them.",
    )
    baseline: Literal["built", "plain"] = Field(
        "built",
        description="With buckets, what Triton's default config serves: built (the model as "
        "built, every request padded to its batch_buckets: as invariant as the candidates) or "
        "plain (the padding off: a row computes at the rows it was sent with, its bits may "
        "depend on them).",
    )
    confidence: float = Field(
        0.9,
        gt=0,
        lt=1,
        description="Two-sided confidence of the bootstrap interval on the "
        "finalist/default throughput ratio.",
    )

    @property
    def round_cap(self) -> int:
        """Paired rounds at most (max_rounds, default twice rounds)."""
        return min(50, 2 * self.rounds) if self.max_rounds is None else self.max_rounds

    @model_validator(mode="after")
    def _rounds_cap(self):
        if self.max_rounds is not None and self.max_rounds < self.rounds:
            raise ValueError(
                f"tune.max_rounds {self.max_rounds} is below tune.rounds {self.rounds}: it is "
                "the most paired rounds, rounds the least"
            )
        return self

    @model_validator(mode="after")
    def _buckets_change_bits(self):
        if self.buckets and self.determinism != "invariant":
            raise ValueError(
                "tune.buckets changes the served bits: it needs determinism: invariant"
            )
        if self.buckets and self.buckets != sorted(set(self.buckets)):
            raise ValueError(f"tune.buckets {self.buckets} are not strictly ascending")
        if self.baseline == "plain" and not self.buckets:
            raise ValueError(
                "tune.baseline: plain compares with the model without its buckets: it needs "
                "tune.buckets"
            )
        return self
