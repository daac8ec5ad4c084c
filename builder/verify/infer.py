"""infer(): send a model its goldens (or given arrays) on a running tritonserver, or on a built
directory served for the call by the embedded one, and return what came back (compared bit for bit
with the goldens)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tritonbuild.core.results import Result
from tritonbuild.core.stores import is_url, split_url
from tritonbuild.errors import InferenceError, UsageError
from tritonbuild.repository.manifest import MANIFEST_NAME, newest_version, read_repository
from tritonbuild.server.target import EMBEDDED, ServingTarget


def _goldens(root: Path, model: str) -> tuple[list[dict], list[dict]]:
    from tritonbuild.core.npz import read_npz
    from tritonbuild.verify.goldens import from_npz_arrays

    manifest_model = newest_version(root, model)
    if not manifest_model.goldens or not (root / manifest_model.goldens).is_file():
        raise UsageError(
            f"{model} has no goldens in {root}",
            hint=f"record them with 'tritonbuild verify {root} --record', or pass --input "
            "NAME=FILE.npy",
        )
    return from_npz_arrays(read_npz(root / manifest_model.goldens))


def _arrays(files: dict[str, Path]) -> dict[str, np.ndarray]:
    out = {}
    for name, path in files.items():
        try:
            out[name] = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise UsageError(
                f"--input {name}={path}: not a readable .npy file ({e})",
                hint="write it with numpy.save (batch dimension first when the model batches)",
            ) from None
    return out


@dataclass(frozen=True)
class InferResult(Result):
    """infer: per request its outputs (name → numpy array) and how they compare with the goldens
    (None: none)."""

    server: str
    model: str
    samples: list[dict]
    inputs: str  # goldens, given, or the --data mode (random)


def infer(
    target: str,
    model: str,
    *,
    inputs: dict[str, Path] | None = None,
    goldens_from: Path | None = None,
    data: str | None = None,
    serving: ServingTarget = EMBEDDED,
    recorded: Path | None = None,
) -> InferResult:
    """target: a server URL (http://host:port) or a repository directory (built or hand-written).
    Inputs: the given .npy files, else the model's goldens (from the directory, or from goldens_from
    or the goldens file `recorded` when target is a URL), else (data: 'random', seeded, or 'zeros')
    arrays of the shapes the server declares for the model. serving: the tritonserver that serves a
    directory (its --tritonserver; else the embedded one) and the image whose Python its Python side
    runs (none named: the default)."""
    local = not is_url(target)
    root = Path(target) if local else goldens_from
    if recorded is not None and not inputs and data is None:
        from tritonbuild.core.npz import read_npz
        from tritonbuild.verify.goldens import from_npz_arrays

        samples, expected = from_npz_arrays(read_npz(recorded))
    else:
        samples, expected, data = _what_to_send(root, model, inputs, data)
    if not local:
        return _send(target, model, samples, expected, data)
    from tritonbuild.server.embedded import EmbeddedServer
    from tritonbuild.server.loading import ModelLoadError

    if not (root / model).is_dir():
        from tritonbuild.verify.static import model_dirs

        raise UsageError(
            f"{root} has no model {model!r}", hint=f"one of: {', '.join(model_dirs(root)) or '-'}"
        )
    refusal = _embedded_refusal(root, model)
    if refusal:
        raise InferenceError(
            refusal,
            where=str(root / model),
            hint=f"serve {root} on a tritonserver that has it, then 'tritonbuild infer "
            f"http://HOST:8000 {model}" + (f" --goldens {root}'" if expected else "'"),
        )
    from tritonbuild.server.launcher import launcher_for

    with EmbeddedServer(root, launcher=launcher_for(serving)) as server:
        try:
            server.load(model)
        except ModelLoadError as e:
            raise InferenceError(
                f"tritonserver failed to load {model!r} from {root}: {e.message}",
                where=str(root),
                hint=f"'tritonbuild verify {root}' shows why",
            ) from None
        return _send(f"http://{server.http_url}", model, samples, expected, data)


def _what_to_send(root: Path | None, model: str, inputs, data: str | None):
    """(samples, expected answers, data): the given arrays, else the goldens, else nothing (the
    requests are generated from the served model's metadata: data, random by default)."""
    if inputs:
        return [_arrays(inputs)], None, data
    if data is None and root is not None and _has_goldens(root, model):
        return (*_goldens(root, model), data)
    if (
        root is not None
        and (root / MANIFEST_NAME).exists()
        and not any(each.name == model for each in read_repository(root, InferenceError).models)
    ):
        _goldens(root, model)  # raises: no such model (naming the ones there are)
    return [], None, data or "random"


def _has_goldens(root: Path, model: str) -> bool:
    if not (root / MANIFEST_NAME).exists():
        return False
    found = [each for each in read_repository(root, InferenceError).models if each.name == model]
    return bool(found) and bool(max(found, key=lambda each: each.version).goldens)


def _embedded_refusal(root: Path, model: str) -> str | None:
    """Why the embedded tritonserver cannot serve this model (it has only the Python backend), or
    None."""
    from tritonbuild.backends import runs_embedded
    from tritonbuild.core.toolchain import fingerprint
    from tritonbuild.verify.static import runs_as_written

    if (root / MANIFEST_NAME).exists():
        backends = {
            each.backend
            for each in read_repository(root, InferenceError).models
            if each.name == model
        }
        if backends and not any(runs_embedded(backend) for backend in backends):
            return (
                f"the embedded tritonserver has no {'/'.join(sorted(backends))} backend (only "
                f"python): it cannot load {model!r}"
            )
        return None
    if not runs_as_written(root / model, bool(fingerprint().get("gpu_name"))):
        return (
            f"the embedded tritonserver cannot load {model!r} as written (it has only the python "
            "backend, and no GPU here for KIND_GPU)"
        )
    return None


def generated_inputs(metadata: dict, data: str, seed: int = 0) -> dict[str, np.ndarray]:
    """One request of the shapes the server declares (a variable dimension, the batch one included,
    is 1): seeded uniform values in [0, 1) (integers in [0, 10)), or zeros; strings are b'' or short
    digits."""
    from tritonclient.utils import triton_to_np_dtype

    rng = np.random.default_rng(seed)
    out = {}
    for tensor in metadata["inputs"]:
        shape = [1 if int(dim) < 0 else int(dim) for dim in tensor["shape"]]
        dtype = triton_to_np_dtype(tensor["datatype"])
        if dtype in (np.object_, np.bytes_):
            values = [
                b"" if data == "zeros" else str(int(x)).encode()
                for x in rng.integers(0, 10, size=shape).flat
            ]
            out[tensor["name"]] = np.array(values, dtype=np.object_).reshape(shape)
        elif data == "zeros":
            out[tensor["name"]] = np.zeros(shape, dtype=dtype)
        elif np.issubdtype(dtype, np.floating):
            out[tensor["name"]] = rng.random(shape).astype(dtype)
        else:
            out[tensor["name"]] = rng.integers(0, 10, size=shape).astype(dtype)
    return out


def _send(
    url: str, model: str, samples: list[dict], expected: list[dict] | None, data: str | None = None
) -> InferResult:
    from tritonclient.utils import InferenceServerException, np_to_triton_dtype

    from tritonbuild.triton.client import http_module

    httpclient = http_module()

    host = split_url(url)[1].rstrip("/")
    client = httpclient.InferenceServerClient(host, network_timeout=120.0)
    try:
        metadata = _metadata(client, url, model)
        outputs = [output["name"] for output in metadata["outputs"]]
        samples = samples or [generated_inputs(metadata, data or "random")]
        declared = {tensor["name"] for tensor in metadata["inputs"]}
        unknown = sorted({name for sample in samples for name in sample} - declared)
        if unknown:
            raise InferenceError(
                f"{model} has no input {', '.join(map(repr, unknown))}",
                where=url,
                hint=f"{_inputs_of(metadata)}; name them with --input NAME=FILE.npy",
            )
        results = []
        for i, sample in enumerate(samples):
            request = []
            for name, arr in sample.items():
                infer_input = httpclient.InferInput(
                    name, list(arr.shape), np_to_triton_dtype(arr.dtype)
                )
                infer_input.set_data_from_numpy(arr, binary_data=True)
                request.append(infer_input)
            try:
                response = client.infer(
                    model,
                    request,
                    outputs=[
                        httpclient.InferRequestedOutput(output_name, binary_data=True)
                        for output_name in outputs
                    ],
                )
            except InferenceServerException as e:
                raise InferenceError(
                    f"{model}: sample {i}: {e.message()}",
                    where=url,
                    hint=f"check the dtypes and shapes: {_inputs_of(metadata)}",
                ) from None
            got = {output_name: response.as_numpy(output_name) for output_name in outputs}
            results.append(
                {"outputs": got, "golden": _compare(got, expected[i]) if expected else None}
            )
        return InferResult(
            server=url,
            model=model,
            samples=results,
            inputs=data or ("goldens" if expected else "given"),
        )
    finally:
        client.close()


def _metadata(client, url: str, model: str) -> dict:
    """The served model's metadata; a model the server does not have is an error listing the ones it
    has."""
    import difflib

    from tritonclient.utils import InferenceServerException

    try:
        return client.get_model_metadata(model)
    except InferenceServerException as e:
        message = e.message()
    except OSError as e:
        raise InferenceError(
            f"cannot reach {url}: {e}", hint="start it: tritonbuild serve OUT"
        ) from None
    try:
        index = client.get_model_repository_index()
    except (InferenceServerException, OSError):
        index = []
    listing = ", ".join(
        f"{entry['name']} ({entry.get('state') or 'not loaded'}"
        + (f", version {entry['version']})" if entry.get("version") else ")")
        for entry in index
    )
    close = difflib.get_close_matches(model, [entry["name"] for entry in index], n=1)
    raise InferenceError(
        f"{url}: model {model!r}: {message}",
        hint=(f"did you mean {close[0]!r}? " if close else "")
        + (
            f"the server's models: {listing}"
            if listing
            else "the server has no models (tritonbuild serve OUT)"
        )
        + "; is it loaded? (tritonbuild status URL)",
    ) from None


def _inputs_of(metadata: dict) -> str:
    """ "doubler's inputs: X (FP32 [-1, 3])", as the server declares them."""
    tensors = ", ".join(
        f"{tensor['name']} ({tensor['datatype']} {[int(dim) for dim in tensor['shape']]})"
        for tensor in metadata["inputs"]
    )
    return f"{metadata['name']}'s inputs: {tensors or 'none'}"


def _compare(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> str:
    """'bit-exact', or which outputs differ and by how much (verify's golden-mismatch function:
    BYTES answers compared by value)."""
    from tritonbuild.verify.goldens import mismatches

    diffs = []
    for found in mismatches(want, got, sample=0, context=""):
        name, ref, arr = found.output, want[found.output], got.get(found.output)
        if arr is None or arr.shape != ref.shape or arr.dtype != ref.dtype:
            seen = "missing" if arr is None else f"{arr.dtype} {list(arr.shape)}"
            diffs.append(f"{name}: {seen} vs golden {ref.dtype} {list(ref.shape)}")
        else:
            worst = found.max_abs_diff if np.issubdtype(ref.dtype, np.number) else None
            diffs.append(
                f"{name}: differs" + (f" (max |diff| {worst:.3g})" if worst is not None else "")
            )
    return "bit-exact" if not diffs else "; ".join(diffs)
