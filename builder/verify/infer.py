"""infer(): send a model its goldens (or given arrays) on a running tritonserver, or on a built directory served
for the call by the embedded one, and return what came back (compared bit for bit with the goldens)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tritonbuild.errors import UsageError, VerifyError
from tritonbuild.repository.manifest import read_repository


def _goldens(root: Path, model: str) -> tuple[list[dict], list[dict]]:
    from tritonbuild.core.npz import read_npz
    from tritonbuild.verify.goldens import from_npz_arrays

    manifest = read_repository(root, VerifyError)
    found = [manifest_model for manifest_model in manifest.models if manifest_model.name == model]
    if not found:
        names = sorted({manifest_model.name for manifest_model in manifest.models})
        raise UsageError(f"{root} has no model {model!r}", hint=f"one of: {', '.join(names) or '-'}")
    manifest_model = max(found, key=lambda manifest_model: manifest_model.version)
    if not manifest_model.goldens or not (root / manifest_model.goldens).is_file():
        raise UsageError(f"{model} has no goldens in {root}",
                         hint=f"record them with 'tritonbuild verify {root} --record', or pass --input NAME=FILE.npy")
    return from_npz_arrays(read_npz(root / manifest_model.goldens))


def _arrays(files: dict[str, Path]) -> dict[str, np.ndarray]:
    out = {}
    for name, path in files.items():
        try:
            out[name] = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise UsageError(f"--input {name}={path}: not a readable .npy file ({e})",
                             hint="write it with numpy.save (batch dimension first when the model batches)") from None
    return out


def infer(target: str, model: str, *, inputs: dict[str, Path] | None = None,
          goldens_from: Path | None = None) -> dict:
    """target: a server URL (http://host:port) or a built directory. Inputs: the given .npy files, else the
    model's goldens (from the directory, or from goldens_from when target is a URL)."""
    local = "://" not in target
    root = Path(target) if local else goldens_from
    if inputs:
        samples, expected = [_arrays(inputs)], None
    elif root is not None:
        samples, expected = _goldens(root, model)
    else:
        raise UsageError("no inputs to send", hint="pass --input NAME=FILE.npy (repeatable), or --goldens OUT")
    if not local:
        return _send(target, model, samples, expected)
    from tritonbuild.server.embedded import EmbeddedServer

    with EmbeddedServer(root) as server:
        server.load(model)
        return _send(f"http://{server.http_url}", model, samples, expected)


def _send(url: str, model: str, samples: list[dict], expected: list[dict] | None) -> dict:
    import tritonclient.http as httpclient
    from tritonclient.utils import InferenceServerException, np_to_triton_dtype

    host = url.split("://", 1)[1].rstrip("/")
    client = httpclient.InferenceServerClient(host, network_timeout=120.0)
    try:
        try:
            outputs = [output["name"] for output in client.get_model_metadata(model)["outputs"]]
        except InferenceServerException as e:
            raise VerifyError(f"{url}: model {model!r}: {e.message()}", hint="is it loaded? (tritonbuild serve OUT)") \
                from None
        except OSError as e:
            raise VerifyError(f"cannot reach {url}: {e}", hint="start it: tritonbuild serve OUT") from None
        results = []
        for i, sample in enumerate(samples):
            request = []
            for name, arr in sample.items():
                infer_input = httpclient.InferInput(name, list(arr.shape), np_to_triton_dtype(arr.dtype))
                infer_input.set_data_from_numpy(arr, binary_data=True)
                request.append(infer_input)
            try:
                response = client.infer(model, request, outputs=[
                    httpclient.InferRequestedOutput(output_name, binary_data=True) for output_name in outputs])
            except InferenceServerException as e:
                raise VerifyError(f"{model}: sample {i}: {e.message()}", where=url,
                                  hint="check the input names, dtypes and shapes (tritonbuild plan --json)") from None
            got = {output_name: response.as_numpy(output_name) for output_name in outputs}
            results.append({"outputs": got, "golden": _compare(got, expected[i]) if expected else None})
        return {"server": url, "model": model, "samples": results}
    finally:
        client.close()


def _compare(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> str:
    """'bit-exact', or which outputs differ and by how much."""
    diffs = []
    for name, ref in want.items():
        arr = got.get(name)
        if arr is None or arr.shape != ref.shape or arr.dtype != ref.dtype:
            seen = "missing" if arr is None else f"{arr.dtype} {list(arr.shape)}"
            diffs.append(f"{name}: {seen} vs golden {ref.dtype} {list(ref.shape)}")
        elif arr.tobytes() != ref.tobytes():
            num = np.issubdtype(ref.dtype, np.number)
            worst = float(np.max(np.abs(arr.astype(np.float64) - ref.astype(np.float64)))) if num else None
            diffs.append(f"{name}: differs" + (f" (max |diff| {worst:.3g})" if worst is not None else ""))
    return "bit-exact" if not diffs else "; ".join(diffs)
