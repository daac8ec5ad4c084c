"""A torch fp16 MLP (1024 -> 4096 -> 1024) on the GPU that computes at a fixed batch shape: every execute()
pads the rows the dynamic batcher gave it to the config's max_batch_size, so a row's bits do not depend on
which other requests shared its batch (the GEMM shape, hence the kernel, is always the same). A candidate
config with another max_batch_size changes that shape: whether its bits change is measured by tune."""

import json

import numpy as np
import torch
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.rows = max(1, json.loads(args["model_config"]).get("max_batch_size", 0))
        torch.manual_seed(0)
        self.device = f"cuda:{args['model_instance_device_id']}"
        self.net = (
            torch.nn.Sequential(
                torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)
            )
            .to(self.device)
            .half()
            .eval()
        )

    def execute(self, requests):
        xs = [pb_utils.get_input_tensor_by_name(r, "X").as_numpy() for r in requests]
        sizes = [x.shape[0] for x in xs]
        n = sum(sizes)
        padded = np.zeros((max(self.rows, n), 1024), dtype=np.float16)
        padded[:n] = np.concatenate(xs)
        with torch.inference_mode():
            y = self.net(torch.from_numpy(padded).to(self.device)).float().cpu().numpy()[:n]
        out, i = [], 0
        for k in sizes:
            out.append(
                pb_utils.InferenceResponse(
                    [pb_utils.Tensor("Y", np.ascontiguousarray(y[i : i + k]))]
                )
            )
            i += k
        return out
