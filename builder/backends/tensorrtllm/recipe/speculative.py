"""The TensorRT-LLM recipe's `speculative` section: draft_target / eagle on the LLM-API route,
lookahead and medusa on the engine route, each mode refusing the route that cannot run it."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, model_validator

from tritonbuild.recipe.models import Strict


def lookahead_draft_len(window: int, ngram: int, verification: int) -> int:
    """The engine's max_draft_len a lookahead (W, N, G) needs: TensorRT-LLM's
    LookaheadDecodingConfig::calculateSpeculativeResourceTuple (facts/trtllm_speculative.json)."""
    return (0 if ngram == 1 else ngram - 2) + (window - 1 + verification) * (ngram - 1)


class DraftSpeculative(Strict):
    """Speculative decoding on the LLM-API route (runtime: pytorch): the LLM API's
    speculative_config."""

    mode: Literal["draft_target", "eagle"] = Field(
        description="draft_target: a smaller draft model proposes tokens "
        "(DraftTarget); eagle: an EAGLE head does (Eagle)."
    )
    max_draft_len: int = Field(
        ge=1, le=64, description="Draft tokens proposed per step (max_draft_len)."
    )
    draft_checkpoint: str = Field(
        description="The draft model's (or EAGLE head's) Hugging Face checkpoint "
        "directory, relative to the recipe; content-hashed, packaged."
    )

    def route_problem(self, runtime: str) -> str | None:
        if runtime == "engine":
            return (
                f"speculative needs runtime: pytorch for mode {self.mode} (the LLM API's "
                "speculative_config); on the engine route tritonbuild generates modes lookahead "
                "and medusa (no second engine)"
            )
        return None

    @property
    def draft_len(self) -> int:
        return self.max_draft_len


class EngineSpeculative(Strict):
    """A speculative mode only the engine route generates (no draft checkpoint of its own):
    route_problem names what it needs there (ENGINE_ONLY, per mode)."""

    ENGINE_ONLY: ClassVar[str]

    def route_problem(self, runtime: str) -> str | None:
        if runtime != "engine":
            return self.ENGINE_ONLY.format(runtime=runtime)
        return None

    @property
    def draft_checkpoint(self) -> None:
        return None


class LookaheadSpeculative(EngineSpeculative):
    """Lookahead decoding on the engine route: the model drafts its own n-grams, no extra
    checkpoint; the engine is built for max_draft_len = f(W, N, G) (TensorRT-LLM's formula) and the
    backend runs (W, N, G)."""

    mode: Literal["lookahead"]
    window_size: int = Field(ge=1, description="W, the Jacobi window (n-grams explored per step).")
    ngram_size: int = Field(
        ge=2,
        description="N, the n-gram size (1 drafts nothing: upstream's meaningful "
        "minimum is (2, 2, 1)).",
    )
    verification_set_size: int = Field(ge=0, description="G, the n-grams verified per step.")

    ENGINE_ONLY = (
        "speculative.mode lookahead needs runtime: engine (trtllm-build "
        "--speculative_decoding_mode lookahead_decoding, the backend's decoding_mode); "
        "tritonbuild generates none on the {runtime} route"
    )

    @property
    def draft_len(self) -> int:
        """max_draft_len as the engine is built with it."""
        return lookahead_draft_len(self.window_size, self.ngram_size, self.verification_set_size)


class MedusaSpeculative(EngineSpeculative):
    """Medusa heads on the engine route: examples/medusa/convert_checkpoint.py folds the heads into
    the TensorRT-LLM checkpoint, trtllm-build --speculative_decoding_mode medusa, the backend runs
    the medusa_choices tree."""

    mode: Literal["medusa"]
    heads_checkpoint: str = Field(
        description="The Medusa heads' directory (--medusa_model_dir), relative to the "
        "recipe; content-hashed into the engine step."
    )
    num_medusa_heads: int = Field(4, ge=1, description="--num_medusa_heads (upstream's default 4).")
    num_medusa_layers: int = Field(
        1, ge=1, description="--num_medusa_layers (upstream's default 1)."
    )
    max_draft_len: int = Field(
        63, ge=1, description="The engine's max_draft_len (--max_medusa_token_len)."
    )
    medusa_choices: list[list[int]] = Field(
        min_length=1,
        description="The token tree: each path a list of head "
        "top-k indices, e.g. [[0], [0, 0], [1]].",
    )

    @model_validator(mode="after")
    def _tree(self) -> MedusaSpeculative:
        if len(self.medusa_choices) > self.max_draft_len:
            raise ValueError(
                f"medusa_choices has {len(self.medusa_choices)} paths, more than max_draft_len "
                f"{self.max_draft_len} (one draft token per path)"
            )
        for path in self.medusa_choices:
            if not path or len(path) > self.num_medusa_heads or min(path) < 0:
                raise ValueError(
                    f"medusa_choices path {path}: 1 to num_medusa_heads ({self.num_medusa_heads}) "
                    "indices, each >= 0"
                )
        return self

    ENGINE_ONLY = (
        "speculative.mode medusa needs runtime: engine (examples/medusa/convert_checkpoint.py, "
        "trtllm-build --speculative_decoding_mode medusa); on the pytorch route use mode eagle or "
        "draft_target"
    )

    @property
    def draft_len(self) -> int:
        return self.max_draft_len


Speculative = Annotated[
    DraftSpeculative | LookaheadSpeculative | MedusaSpeculative, Field(discriminator="mode")
]
