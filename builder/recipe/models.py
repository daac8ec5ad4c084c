"""The recipe: what a platform team writes for one served model. Unknown keys are errors."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_serializer,
    model_validator,
)

from tritonbuild.recipe.names import NAME_MAX, valid_name, valid_tensor_name
from tritonbuild.recipe.tune import Tune

SCHEMA_VERSION = 1

# Ranges of the ModelConfig proto fields recipe integers end up in
# (tritonclient.grpc.model_config_pb2; a test checks each against the proto's field type): a value
# beyond them must fail at load, not at Triton's.
INT32_MAX, INT64_MAX, UINT32_MAX, UINT64_MAX = 2**31 - 1, 2**63 - 1, 2**32 - 1, 2**64 - 1

# Recipe dtype name → Triton data type (model_config.proto DataType).
DTYPES = {
    "bool": "TYPE_BOOL",
    "uint8": "TYPE_UINT8",
    "uint16": "TYPE_UINT16",
    "uint32": "TYPE_UINT32",
    "uint64": "TYPE_UINT64",
    "int8": "TYPE_INT8",
    "int16": "TYPE_INT16",
    "int32": "TYPE_INT32",
    "int64": "TYPE_INT64",
    "fp16": "TYPE_FP16",
    "fp32": "TYPE_FP32",
    "fp64": "TYPE_FP64",
    "bf16": "TYPE_BF16",
    "bytes": "TYPE_STRING",
}
# Other spellings of a dtype (numpy/torch names, C names, Triton's TYPE_ names): the recipe's name,
# for the hint.
DTYPE_SPELLINGS = {
    "float32": "fp32",
    "float": "fp32",
    "single": "fp32",
    "float16": "fp16",
    "half": "fp16",
    "float64": "fp64",
    "double": "fp64",
    "bfloat16": "bf16",
    "int": "int32 or int64",
    "long": "int64",
    "string": "bytes",
    "str": "bytes",
    "object": "bytes",
    "boolean": "bool",
    "bool_": "bool",
    **{triton.removeprefix("TYPE_").lower(): name for name, triton in DTYPES.items()},
}
DType = Literal[
    "bool",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "int8",
    "int16",
    "int32",
    "int64",
    "fp16",
    "fp32",
    "fp64",
    "bf16",
    "bytes",
]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TensorSpec(Strict):
    name: str = Field(description="Tensor name as the model sees it.", min_length=1)
    dtype: DType = Field(description="Element type.")
    dims: list[Annotated[int, Field(le=INT64_MAX)]] = Field(
        description="Shape without the batch dimension when max_batch_size > 0; -1 marks a "
        "variable dimension."
    )
    optional: bool = Field(False, description="Input may be omitted by clients (inputs only).")

    @field_validator("dims")
    @classmethod
    def _dims(cls, v: list[int]) -> list[int]:
        bad = [d for d in v if d == 0 or d < -1]
        if bad:
            raise ValueError(f"each dim must be >= 1 or -1 (variable), got {bad}")
        return v

    _name = field_validator("name")(classmethod(lambda cls, v: valid_tensor_name(v)))


class ExportInput(Strict):
    dtype: DType
    shape: list[int] = Field(
        description="Example shape, batch dimension first when the model batches."
    )
    low: int = Field(0, description="Lower bound of example integer values.")
    high: int = Field(100, description="Upper bound (exclusive) of example integer values.")


class TorchExport(Strict):
    """A seeded torch module to export; the backends that export add their own options (ONNX opset, TorchScript
    method ...) in subclasses."""

    module: str = Field(
        description="'python.module:function' returning a torch.nn.Module; the module is "
        "imported with the recipe's directory on sys.path.",
        pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$",
    )
    inputs: dict[str, ExportInput] = Field(
        description="Example inputs by name, in forward() order."
    )
    outputs: list[str] = Field(
        default_factory=lambda: ["output"], description="Output names, in order."
    )
    seed: int = Field(0, description="torch.manual_seed before building the module.")


class FileSource(Strict):
    """A model file (no export)."""

    path: str = Field(
        description="Local path (relative to the recipe) or fsspec URL of the model file."
    )
    sha256: str | None = Field(
        None, pattern=r"^[0-9a-f]{64}$", description="Pin: build fails on mismatch."
    )


class Source(Strict):
    """A model file, or a seeded torch module exported by the build; backends that export narrow `export` to
    their own export type."""

    # NOTE: _one_of below, for editors: exactly one of path and export; no sha256 beside an export.
    model_config = ConfigDict(
        json_schema_extra={
            "oneOf": [{"required": ["path"]}, {"required": ["export"]}],
            "dependentSchemas": {"export": {"not": {"required": ["sha256"]}}},
        }
    )

    path: str | None = Field(
        None, description="Local path (relative to the recipe) or fsspec URL of the model file."
    )
    sha256: str | None = Field(
        None, pattern=r"^[0-9a-f]{64}$", description="Pin: build fails on mismatch."
    )
    export: TorchExport | None = Field(
        None, description="Export the model from a seeded torch module."
    )

    @model_validator(mode="after")
    def _one_of(self) -> Source:
        if (self.path is None) == (self.export is None):
            raise ValueError("set exactly one of 'path' or 'export'")
        if self.export is not None and self.sha256:
            raise ValueError("'sha256' pins a 'path'; an export is pinned by its module and seed")
        return self


class QueuePolicy(Strict):
    timeout_action: Literal["reject", "delay"] = "reject"
    default_timeout_us: int = Field(0, ge=0, le=UINT64_MAX)
    allow_timeout_override: bool = False
    max_queue_size: int = Field(0, ge=0, le=UINT32_MAX, description="0 = unbounded.")


class Batching(Strict):
    preferred_batch_sizes: list[Annotated[int, Field(ge=1, le=INT32_MAX)]] = Field(
        default_factory=list
    )
    max_queue_delay_us: int = Field(0, ge=0, le=UINT64_MAX)
    preserve_ordering: bool = False
    priority_levels: int = Field(0, ge=0, le=UINT64_MAX)
    default_priority_level: int = Field(0, ge=0, le=UINT64_MAX)
    default_queue_policy: QueuePolicy | None = None
    priority_queue_policy: dict[int, QueuePolicy] = Field(default_factory=dict)


class InstanceGroup(Strict):
    kind: Literal["cpu", "gpu", "auto", "model"] = "cpu"
    count: int = Field(1, ge=1, le=INT32_MAX)
    gpus: list[Annotated[int, Field(ge=0, le=INT32_MAX)]] = Field(default_factory=list)


class VersionPolicy(Strict):
    latest: int | None = Field(
        None, ge=1, le=UINT32_MAX, description="Serve the newest N versions."
    )
    specific: list[Annotated[int, Field(ge=1, le=INT64_MAX)]] | None = Field(
        None, description="Serve exactly these versions."
    )
    all: bool = Field(False, description="Serve every version present.")

    @model_validator(mode="after")
    def _one_of(self) -> VersionPolicy:
        if sum([self.latest is not None, self.specific is not None, self.all]) != 1:
            raise ValueError("set exactly one of 'latest', 'specific' or 'all: true'")
        return self


class Tolerance(Strict):
    """An element passes when its bits are equal, or |got - golden| <= atol + rtol * |golden|, or the two floats
    are at most ulp units in the last place apart. Reported as 'within tolerance', never as bit-exact."""

    atol: float = Field(0.0, ge=0.0)
    rtol: float = Field(0.0, ge=0.0)
    ulp: int = Field(0, ge=0)


class UnderLoad(Strict):
    """A generative model's answers under concurrent load: each golden request sent again amid `others` concurrent
    requests, `repeats` times, and compared bit for bit with its answer alone (token ids and log-probs apart)."""

    others: int | None = Field(
        None,
        ge=1,
        le=1024,
        description="Concurrent other requests in flight around each "
        "golden request (unset: the model's max concurrent sequences less one, at most 63).",
    )
    repeats: int = Field(3, ge=1, le=1000, description="Rounds per golden request.")


class Verify(Strict):
    goldens: str | None = Field(
        None,
        description="Golden .npz (relative to the recipe); written by "
        "'tritonbuild verify OUT --record'.",
    )
    repeats: int = Field(3, ge=1, le=1000, description="Times each golden input is sent.")
    samples: int = Field(4, ge=1, le=256, description="Generated golden inputs when recording.")
    seed: int = Field(0, description="Seed of generated golden inputs.")
    dynamic_size: int = Field(4, ge=1, description="Size used for -1 dims in generated inputs.")
    int_range: tuple[int, int] = Field(
        (0, 100), description="[low, high) of generated integer inputs."
    )
    batch_invariance: Literal["require", "report", "skip"] = Field(
        "report",
        description="Whether outputs must stay bit-identical when an input is batched with others.",
    )
    tolerance: dict[str, Tolerance] = Field(
        default_factory=dict,
        description="Output name → allowed difference from the goldens (GPU fp16/TensorRT "
        "across GPU types); outputs not named must be bit-exact.",
    )
    under_load: UnderLoad | None = Field(
        None,
        description="Generative (decoupled, generate-endpoint) models: how "
        "their answers are checked under concurrent load (unset: the defaults of "
        "UnderLoad); batch_invariance: require fails on any difference.",
    )

    @model_serializer(mode="wrap")
    def _drop_empty_tolerance(self, handler):
        # NOTE: a recipe without tolerances or under_load serializes as before (manifests stay
        # byte-identical).
        data = handler(self)
        if isinstance(data, dict):
            for key in ("tolerance", "under_load"):
                if not data.get(key):
                    data.pop(key, None)
        return data


class Numerics(Strict):
    """Which code paths the model's math takes on a CPU. native: each library's fastest path for the
    machine it runs on (answers may differ by a few ULP between CPU generations and vendors; goldens
    are kept per machine class). portable: every library pinned to a path whose bytes do not depend
    on which x86-64 CPU runs it (MKL's reproducibility branch, ATen and oneDNN at AVX2, OpenBLAS's
    Haswell kernels, numpy's AVX2 dispatch, a fixed thread count), set wherever the model runs
    (verify, serve, the serving image)."""

    mode: Literal["native", "portable"] = Field(
        "native", description="native (the default) or portable."
    )
    cpus: Literal["x86-64", "intel-avx2"] = Field(
        "x86-64",
        description="Portable across which CPUs: x86-64 (every Intel and AMD CPU with AVX2; "
        "MKL's COMPATIBLE branch) or intel-avx2 (Intel CPUs with AVX2 only; MKL's AVX2 strict "
        "branch, faster large GEMMs).",
    )
    threads: int = Field(
        1,
        ge=1,
        le=1024,
        description="Intra-op threads of every math library, fixed (reductions split by "
        "thread count change bits).",
    )


class Warmup(Strict):
    data: Literal["zero", "random", "goldens"] = Field(
        "zero",
        description="zero/random data of the config's shapes, or the first golden sample's inputs.",
    )
    batch_size: int = Field(1, ge=1, le=UINT32_MAX)
    count: int = Field(
        1,
        ge=1,
        le=UINT32_MAX,
        description="Times the warmup request is sent before the model reports ready.",
    )


class Named(Strict):
    """A recipe's model name and version (recipe types without the single-model fields of Recipe)."""

    name: str = Field(description="Model name (= directory name); [A-Za-z0-9_.-].")
    version: int = Field(ge=1, le=INT64_MAX, description="Numeric version directory (>= 1).")

    # NOTE: the group's longest member is <name>_postprocessing: each name must fit NAME_MAX.
    _name = field_validator("name")(
        classmethod(lambda cls, v: valid_name(v, NAME_MAX - len("_postprocessing")))
    )


class Checkpoint(Strict):
    path: str = Field(
        description="Hugging Face checkpoint directory (config.json + weights), relative to the "
        "recipe, or an fsspec URL."
    )
    sha256: str | None = Field(
        None,
        pattern=r"^[0-9a-f]{64}$",
        description="Pin: sha256 over the directory's files (see 'tritonbuild plan --json').",
    )


class Recipe(Strict):
    """One served model: a Triton model directory with one numeric version. The fields every single-model
    backend shares; a backend's recipe type subclasses it, names its `backend` and adds its own options."""

    schema_version: Literal[1] = SCHEMA_VERSION
    name: str = Field(
        description="Triton model name = directory name. [A-Za-z0-9_.-], not starting with '.' "
        "or '-'."
    )
    version: int = Field(ge=1, le=INT64_MAX, description="Numeric version directory (>= 1).")
    backend: str = Field(
        description="The backend that builds it; each backend's module declares its recipe type "
        "(a subclass with backend: Literal[<name>])."
    )
    source: Source
    max_batch_size: int = Field(
        0, ge=0, le=INT32_MAX, description="0 = the model does not batch; dims are full shapes."
    )
    inputs: list[TensorSpec] | None = Field(
        None,
        description="Required for python; derived from the graph "
        "for onnxruntime (given ones must match it).",
    )
    outputs: list[TensorSpec] | None = None
    batching: Batching | None = Field(None, description="Dynamic batching; absent = off.")
    instances: list[InstanceGroup] = Field(default_factory=lambda: [InstanceGroup()])  # []: none
    labels: dict[str, str] = Field(
        default_factory=dict,
        description="label_filename: output → labels file (one class a line), beside config.pbtxt.",
    )
    version_policy: VersionPolicy | None = None
    target: Literal["cpu", "gpu"] = Field(
        "cpu",
        description="Hardware the model is served on; 'cpu' forbids "
        "KIND_GPU instances (Triton fails to load them).",
    )
    parameters: dict[str, str] = Field(default_factory=dict, description="config.pbtxt parameters.")
    warmup: Warmup | None = Field(
        None, description="model_warmup: requests Triton runs before the model is ready."
    )
    verify: Verify = Field(default_factory=Verify)
    numerics: Numerics | Literal["native", "portable"] | None = Field(
        None,
        description="CPU numerics: 'portable' pins the math libraries so answers are the same on "
        "every x86-64 machine; absent or 'native': each machine's fastest path.",
    )
    tune: Tune | None = Field(
        None, description="'tritonbuild tune': search space, load range and SLA."
    )

    _name = field_validator("name")(classmethod(lambda cls, v: valid_name(v)))

    @field_validator("numerics")
    @classmethod
    def _numerics_shorthand(cls, value):
        # NOTE: 'numerics: portable' is Numerics(mode=portable) with its defaults
        return Numerics(mode=value) if isinstance(value, str) else value
