"""Triton Python model: standardise 16 raw features with the mean/std stored beside it (numpy, per row)."""

import os

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        here = os.path.dirname(os.path.abspath(__file__))
        with np.load(os.path.join(here, "stats.npz")) as s:
            self.mean, self.std = s["mean"].astype(np.float32), s["std"].astype(np.float32)

    def execute(self, requests):
        responses = []
        for request in requests:
            raw = pb_utils.get_input_tensor_by_name(request, "RAW").as_numpy()
            out = ((raw - self.mean) / self.std).astype(np.float32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("NORMALIZED", out)]))
        return responses
