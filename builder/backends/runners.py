"""In-process verification runners: a backend's reference runtime on the repository's own files."""

from __future__ import annotations

from pathlib import Path

import numpy as np

Sample = dict[str, np.ndarray]


class OnnxRunner:
    """onnxruntime in-process on the repository's own model.onnx (CPU provider, fixed thread count)."""

    def __init__(self, path: Path, model):
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

    def __init__(self, path: Path, model):
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
