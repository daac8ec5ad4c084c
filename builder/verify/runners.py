"""A live tritonserver (HTTP) as a verification runner; in-process runners belong to their backends."""

from __future__ import annotations

import numpy as np

from tritonbuild.repository.manifest import ManifestModel

Sample = dict[str, np.ndarray]


class TritonRunner:
    """Infer through tritonclient.http; concurrent requests go through Triton's scheduler (dynamic batcher)."""

    def __init__(self, url: str, model: ManifestModel, concurrency: int = 8):
        import tritonclient.http as httpclient

        self._http = httpclient
        self.model = model
        self.client = httpclient.InferenceServerClient(url.removeprefix("http://"), concurrency=concurrency,
                                                       network_timeout=120.0)

    def _request(self, sample: Sample):
        from tritonclient.utils import np_to_triton_dtype

        inputs = []
        for name, arr in sample.items():
            i = self._http.InferInput(name, list(arr.shape), np_to_triton_dtype(arr.dtype))
            i.set_data_from_numpy(arr, binary_data=True)
            inputs.append(i)
        outputs = [self._http.InferRequestedOutput(t.name, binary_data=True) for t in self.model.outputs]
        return inputs, outputs

    def _result(self, res) -> Sample:
        return {t.name: res.as_numpy(t.name) for t in self.model.outputs}

    def infer(self, sample: Sample) -> Sample:
        inputs, outputs = self._request(sample)
        return self._result(self.client.infer(self.model.name, inputs, outputs=outputs,
                                              model_version=str(self.model.version)))

    def infer_concurrent(self, samples: list[Sample]) -> list[Sample]:
        pending = []
        for s in samples:
            inputs, outputs = self._request(s)
            pending.append(self.client.async_infer(self.model.name, inputs, outputs=outputs,
                                                   model_version=str(self.model.version)))
        return [self._result(p.get_result()) for p in pending]

    def close(self) -> None:
        self.client.close()
