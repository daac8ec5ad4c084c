"""The verification report (tritonbuild-verification.json), keyed by the manifest digest it
verified."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator

from tritonbuild.triton.finding import Finding

SCHEMA_VERSION = 1
# ModelReport fields added after reports were first signed: left out of the signed payload while
# unset, so an older report keeps its signature
ADDED_AFTER_SIGNING = (
    "goldens_refused",
    "numerics",
    "goldens_recorded_on",
    "goldens_classes",
    "cause",
    "numerics_differ",
    "contract_violations",
)


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Mismatch(_Frozen):
    sample: int
    output: str
    context: str = Field(description="'repeat N', 'batched with K others', or 'shape/dtype'.")
    differing: int
    total: int
    max_abs_diff: float | None
    first_index: list[int] | None
    within_tolerance: bool = Field(
        False,
        description="Bits differ but every element is within the output's "
        "declared verify.tolerance: not a failure, never 'bit-exact'.",
    )
    max_ulp: int | None = Field(
        None,
        description="Floats: the largest distance in units in the last place among the "
        "differing elements.",
    )


class ModelReport(_Frozen):
    name: str
    version: int
    backend: str
    route: Literal["live-embedded", "live-server", "in-process", "none"] = Field(
        description="How verify ran it: the embedded tritonserver, the server given with --server, "
        "in-process, or not at all."
    )
    route_detail: str = Field(
        description="What ran it, e.g. 'tritonserver 2.51.0 (embedded)' or 'onnxruntime "
        "1.32.0 in-process'."
    )
    loaded: bool
    load_error: str | None = None
    infer_error: str | None = Field(
        None,
        description="Loaded, then failed to answer: Triton's error (the model "
        "raised, or returned no declared output).",
    )
    goldens: str | None = None
    samples: int = 0
    repeats: int = 0
    compared: int = Field(0, description="Output tensors compared bit for bit.")
    mismatches: list[Mismatch] = Field(default_factory=list)
    tolerated: list[Mismatch] = Field(
        default_factory=list, description="Differences within a declared tolerance."
    )
    batch_invariance: Literal["invariant", "variant", "not-applicable", "skipped"] = "skipped"
    batch_detail: str = ""
    under_load: dict | None = Field(
        None,
        description="A generative model's check under load: others (requests in "
        "flight around each golden one), repeats, answers compared, differing, "
        "ids_differing, logprobs_only_differing, first_differing_position (generated "
        "token), max_logprob_diff.",
    )
    served_problems: list[str] = Field(
        default_factory=list,
        description="What the server's log shows its runtime chose against what the model needs "
        "(an invariant vLLM model on another kernel, its plugin not loaded); any fails it.",
    )
    passed: bool
    checked: bool = Field(
        True,
        description="False: it could not run here (route 'none'; notes say why): neither "
        "passed nor failed, and the report as a whole does not pass.",
    )
    notes: list[str] = Field(default_factory=list)
    goldens_refused: str | None = Field(
        None,
        description="verify --record: why the recorded goldens were not "
        "written over the committed ones (they differ; no --force).",
    )
    served: dict | None = Field(
        None,
        description="verify --server: what the server says it loaded (server version, "
        "name, ready versions, digest of the served config's backend, "
        "batch size and tensors beside ours).",
    )
    numerics: dict | None = Field(
        None,
        description="The numerics fingerprint of the process that ran the model (core/numerics: "
        "CPU, math libraries and their code paths, threads, GPU); null where it is not known "
        "here (a server given with --server).",
    )
    goldens_recorded_on: str | None = Field(
        None,
        description="The machine class of the goldens compared with (their fingerprint in one "
        "line; 'unknown' for goldens recorded before fingerprints).",
    )
    goldens_classes: int | None = Field(
        None, description="Machine classes the golden file holds answers for."
    )
    cause: Literal["machine-class", "model", "unexplained", "unknown", "contract"] | None = Field(
        None,
        description="Answers differ from the goldens: recorded on another machine class "
        "(numerics_differ names the fields), from other model files or on the same class (the "
        "model's answers changed), from the same files on the same class (unexplained: what "
        "decided the bits is not in the fingerprint), or unknown (goldens without a "
        "fingerprint, or no fingerprint here). 'contract': the "
        "answers break the outputs the config declares (contract_violations): a model error, "
        "never recorded.",
    )
    contract_violations: list[str] | None = Field(
        None,
        description="Per sample and output, an answer whose dtype or shape is not what the "
        "config.pbtxt declares (data_type, dims).",
    )
    numerics_differ: list[str] | None = Field(
        None,
        description="The fingerprint fields that decide the bits and differ between the goldens' "
        "machine class and this run's ('field: recorded → here').",
    )

    def ran_by(self) -> str:
        """What ran it (route_detail), or 'not recorded: why' for a model verify had no way to run
        here."""
        why = "; ".join(self.notes) or self.route_detail
        return self.route_detail if self.route != "none" else f"not recorded: {why}"

    @model_validator(mode="before")
    @classmethod
    def _legacy_route_keys(cls, data: Any) -> Any:
        """Reports also carry the route under its first names, 'path' and 'path_detail' (written
        below, for readers of the JSON); they hold the same values, so reading keeps 'route' and
        refuses a report where they differ. A report written before 'route' existed has only
        them."""
        if isinstance(data, dict) and ("path" in data or "path_detail" in data):
            data = dict(data)
            for old, new in (("path", "route"), ("path_detail", "route_detail")):
                value = data.pop(old, None)
                if new not in data:
                    data[new] = value
                elif value is not None and value != data[new]:
                    raise ValueError(
                        f"{old!r} ({value!r}) differs from {new!r} ({data[new]!r}): the report was "
                        "edited"
                    )
        return data

    @computed_field(
        description="The route under its first name (same value as 'route'), kept for readers of "
        "the report."
    )
    @property
    def path(self) -> str:
        return self.route

    @computed_field(description="Same value as 'route_detail', kept for readers of the report.")
    @property
    def path_detail(self) -> str:
        return self.route_detail


class Reproducibility(_Frozen):
    """verify --rebuild: the recipes rebuilt in an isolated cache, every artefact's sha256
    compared."""

    identical: int = Field(description="Files whose rebuilt bytes equal OUT's.")
    differ: list[str] = Field(
        default_factory=list, description="'path: why' for each file that differs."
    )
    by_nature: list[str] = Field(
        default_factory=list,
        description="Files that cannot be byte-identical (TensorRT "
        "engines) or were not rebuilt here: goldens "
        "decide for them.",
    )

    @property
    def reproducible(self) -> bool:
        return not self.differ


class PythonSide(_Frozen):
    """The Python the embedded tritonserver's Python side (its stub, every model.py) ran on, and the
    one the target image runs (server/target.py)."""

    ran: str | None = Field(
        description="Python minor of the embedded server's Python side; null where the "
        "server's own Python ran (--tritonserver install or container, --server)."
    )
    own: bool = Field(
        False,
        description="The server's own Python ran (a --tritonserver install or container, "
        "--server): not known here.",
    )
    environment: str | None = Field(description="The environment it ran in (server/toolenv.py).")
    target: str | None = Field(description="Python minor the target image runs; null: none named.")
    target_image: str | None = None
    target_from: str | None = Field(
        None, description="'--triton-image', or the recipe whose image.triton_image named it."
    )
    matches: bool | None = Field(None, description="ran == target; null when either is unknown.")
    not_run: str | None = Field(
        None,
        description="Why the target's Python did not run (a recipe's image whose Python, or the "
        "models' packages on it, could not be had here); null when it ran or none was named.",
    )


class VerificationReport(_Frozen):
    schema_version: int = SCHEMA_VERSION
    manifest_digest: str
    toolchain: dict[str, str]
    static: list[Finding]
    models: list[ModelReport]
    recorded: bool = False
    reproducibility: Reproducibility | None = None
    python_side: PythonSide | None = None
    passed: bool
    signature: str | None = Field(
        None,
        description="HMAC-SHA256 of this report (without this field) with the "
        "key in TRITONBUILD_REPORT_KEY, else this machine's key.",
    )

    def accept_hint(self, shown: str) -> str | None:
        """How to accept outputs that changed on purpose, when goldens differ (or a record was
        refused); shown: the repository as the user named it."""
        # NOTE: only answers that differ from the goldens; answers that change when batched or under
        # load are not fixed by recording them (the model's notes say how to serve it invariant)
        changed = [
            each
            for each in self.models
            if each.goldens_refused
            or each.cause == "contract"
            or any(mismatch.context.startswith("repeat") for mismatch in each.mismatches)
        ]
        if not changed:
            return None
        broken = [each.name for each in changed if each.cause == "contract"]
        if broken:
            return (
                f"{', '.join(broken)}: the answers break the outputs config.pbtxt declares (the "
                "notes name them): a model error that recording cannot accept (--force "
                "included); fix the model or the declared data_type/dims, rebuild "
                f"('tritonbuild build RECIPES -o {shown}'), verify"
            )
        if any(each.cause == "unexplained" for each in changed):
            return (
                "the same model files and machine class as the goldens answered otherwise (the "
                "notes name the models): re-recording would hide it; run verify again to see "
                "whether the answers vary from run to run, compare the server logs of the two "
                "runs, and report it with both verification reports"
            )
        if all(each.cause == "machine-class" for each in changed):
            return (
                "the goldens were recorded on another machine class (the notes name what "
                f"differs): 'tritonbuild verify {shown} --record' adds this class's goldens beside "
                "them (commit the .npz), or set 'numerics: portable' in the recipes so every "
                "x86-64 machine answers the same (then record once); re-recording with --force "
                "only moves the failure to the other machines"
            )
        return (
            f"if the outputs changed on purpose: 'tritonbuild verify {shown} --record --force' "
            "rewrites the committed goldens (commit them); then rebuild ('tritonbuild build "
            f"RECIPES -o {shown}')"
        )

    def signed_payload(self) -> bytes:
        """What the signature covers: the canonical JSON of every other field."""
        from tritonbuild.core.hashing import canonical_json

        payload = self.model_dump(mode="json", exclude={"signature"})
        if payload.get("python_side") is None:  # absent from reports signed before it was added
            payload.pop("python_side", None)
        elif payload["python_side"].get("not_run") is None:  # likewise
            payload["python_side"].pop("not_run", None)
        for model in payload[
            "models"
        ]:  # NOTE: absent from reports signed before they were added: unset, not signed
            for key in ADDED_AFTER_SIGNING:
                if model.get(key) is None:
                    model.pop(key, None)
            for mismatch in (*model.get("mismatches", []), *model.get("tolerated", [])):
                if mismatch.get("max_ulp") is None:
                    mismatch.pop("max_ulp", None)
        return canonical_json(payload)

    def signed(self) -> VerificationReport:
        """This report with a signature (TRITONBUILD_REPORT_KEY, else this machine's key; unchanged
        when neither can be had)."""
        from tritonbuild.core.signing import sign, signing_key

        key = signing_key()
        return (
            self
            if key is None
            else self.model_copy(update={"signature": sign(self.signed_payload(), key)})
        )
