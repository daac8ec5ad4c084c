"""Ways to run a model for verification: a live tritonserver (HTTP) or its reference runtime in-process."""

from __future__ import annotations

from pathlib import Path

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


class OnnxRunner:
    """onnxruntime in-process on the repository's own model.onnx (CPU provider, fixed thread count)."""

    def __init__(self, path: Path, model: ManifestModel):
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        self.model = model

    def infer(self, sample: Sample) -> Sample:
        names = [t.name for t in self.model.outputs]
        return dict(zip(names, self.session.run(names, sample)))

    def infer_concurrent(self, samples: list[Sample]) -> list[Sample]:
        return [self.infer(s) for s in samples]

    def close(self) -> None:
        pass


class TorchRunner:
    """torch in-process on the repository's own model.pt / model.pt2; tensors matched by their __index."""

    def __init__(self, path: Path, model: ManifestModel):
        import torch

        from tritonbuild.backends.pytorch import load

        torch.set_num_threads(1)
        self.torch = torch
        self.module = load(path, "aoti" if path.suffix == ".pt2" else "torchscript")
        self.model = model

    def infer(self, sample: Sample) -> Sample:
        args = [self.torch.from_numpy(np.ascontiguousarray(sample[t.name])) for t in self.model.inputs]
        with self.torch.no_grad():
            result = self.module(*args)
        results = list(result) if isinstance(result, (tuple, list)) else [result]
        return {t.name: r.numpy() for t, r in zip(self.model.outputs, results)}

    def infer_concurrent(self, samples: list[Sample]) -> list[Sample]:
        return [self.infer(s) for s in samples]

    def close(self) -> None:
        pass
