"""A live tritonserver (HTTP) as a verification runner; in-process runners belong to their
backends."""

from __future__ import annotations

import numpy as np

from tritonbuild.repository.manifest import ManifestModel

Sample = dict[str, np.ndarray]


class InferError(Exception):
    """A model that answered wrongly (raised, returned no declared output): a FAIL row, not a
    tritonbuild bug."""


def _server_message(e: Exception) -> str:
    """tritonclient's InferenceServerException carries Triton's own text in message()."""
    msg = e.message() if callable(getattr(e, "message", None)) else str(e)
    return f"{msg}" if msg else f"{type(e).__name__}: {e}"


class TritonRunner:
    """Infer through tritonclient.http; concurrent requests go through Triton's scheduler (dynamic
    batcher)."""

    def __init__(self, url: str, model: ManifestModel, concurrency: int = 8):
        from tritonbuild.triton.client import http_module

        httpclient = self._http = http_module()
        self.model = model
        self.client = httpclient.InferenceServerClient(
            url.removeprefix("http://"), concurrency=concurrency, network_timeout=120.0
        )

    def _request(self, sample: Sample):
        from tritonclient.utils import np_to_triton_dtype

        inputs = []
        for name, arr in sample.items():
            i = self._http.InferInput(name, list(arr.shape), np_to_triton_dtype(arr.dtype))
            i.set_data_from_numpy(arr, binary_data=True)
            inputs.append(i)
        outputs = [
            self._http.InferRequestedOutput(tensor.name, binary_data=True)
            for tensor in self.model.outputs
        ]
        return inputs, outputs

    def _result(self, response) -> Sample:
        got = {}
        for tensor in self.model.outputs:
            try:
                got[tensor.name] = response.as_numpy(tensor.name)
            except (
                ValueError
            ) as e:  # e.g. no data for a non-empty shape (a stub whose numpy is 2.x answers so)
                raise InferError(
                    f"output {tensor.name!r}: the server's answer does not fit its own shape "
                    f"({e}); a Python-backend stub importing numpy >= 2 sends empty tensors"
                ) from None
        missing = sorted(n for n, a in got.items() if a is None)
        if missing:
            returned = sorted(
                output["name"] for output in (response.get_response() or {}).get("outputs", [])
            )
            raise InferError(f"the model returned no output {missing} (it returned {returned})")
        return got

    def infer(self, sample: Sample) -> Sample:
        from tritonclient.utils import InferenceServerException

        inputs, outputs = self._request(sample)
        try:
            response = self.client.infer(
                self.model.name, inputs, outputs=outputs, model_version=str(self.model.version)
            )
        except InferenceServerException as e:
            raise InferError(f"tritonserver answered an error: {_server_message(e)}") from None
        return self._result(response)

    def infer_concurrent(self, samples: list[Sample]) -> list[Sample]:
        pending = []
        for sample in samples:
            inputs, outputs = self._request(sample)
            pending.append(
                self.client.async_infer(
                    self.model.name, inputs, outputs=outputs, model_version=str(self.model.version)
                )
            )
        from tritonclient.utils import InferenceServerException

        try:
            return [self._result(request.get_result()) for request in pending]
        except InferenceServerException as e:
            raise InferError(f"tritonserver answered an error: {_server_message(e)}") from None

    def close(self) -> None:
        self.client.close()
