"""Triton Python-backend model: a small torch MLP scoring 16 tabular features into 4 classes.

Weights come from weights.npz next to this file (packaged by tritonbuild from the recipe's source.files).
Each row is computed on its own so a row's result never depends on what it was batched with: outputs are
bit-identical alone, in a batch, and under Triton's dynamic batcher.
"""

import os

import numpy as np
import torch
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        torch.set_num_threads(1)
        here = os.path.dirname(os.path.abspath(__file__))
        with np.load(os.path.join(here, "weights.npz")) as w:
            self.net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
            state = {k.replace("_", "."): torch.from_numpy(w[k]) for k in w.files}
        self.net.load_state_dict(state)
        self.net.eval()

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "FEATURES").as_numpy()
            with torch.inference_mode():
                rows = [torch.softmax(self.net(torch.from_numpy(row[None, :].copy())), dim=-1) for row in x]
            probs = torch.cat(rows).numpy().astype(np.float32)
            label = probs.argmax(axis=1).astype(np.int64)[:, None]
            responses.append(pb_utils.InferenceResponse(
                [pb_utils.Tensor("PROBS", probs), pb_utils.Tensor("LABEL", label)]))
        return responses
