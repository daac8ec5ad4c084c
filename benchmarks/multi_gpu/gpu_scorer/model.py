"""Triton Python-backend model for the two-GPU run (benchmarks/multi_gpu/README.md): a torch MLP on the GPU its
instance was placed on (Triton passes model_instance_kind / model_instance_device_id), 256 features -> 16 scores.

Weights come from a seeded generator on the CPU, so every instance on every GPU holds the same bytes. Each row is
computed on its own (a 1-row matmul whatever the batch), so a row's answer does not depend on what it was batched
with. Each instance keeps a count of the rows it served and, when SCORER_COUNTS_DIR is set, rewrites
<dir>/<kind><device>-<pid>.json after every batch: the run reads them to show that both GPUs served.
"""

import json
import os

import numpy as np
import torch
import triton_python_backend_utils as pb_utils

FEATURES, HIDDEN, SCORES, SEED = 256, 4096, 16, 0


def network() -> torch.nn.Sequential:
    generator = torch.Generator().manual_seed(SEED)
    layers = []
    for fan_in, fan_out in ((FEATURES, HIDDEN), (HIDDEN, HIDDEN), (HIDDEN, SCORES)):
        linear = torch.nn.Linear(fan_in, fan_out)
        with torch.no_grad():
            linear.weight.copy_(torch.randn(fan_out, fan_in, generator=generator) / fan_in**0.5)
            linear.bias.copy_(torch.randn(fan_out, generator=generator) * 0.01)
        layers += [linear, torch.nn.ReLU()]
    return torch.nn.Sequential(*layers[:-1])


class TritonPythonModel:
    def initialize(self, args):
        kind = args.get("model_instance_kind", "CPU")
        index = int(args.get("model_instance_device_id", 0))
        self.device = torch.device(f"cuda:{index}" if kind == "GPU" else "cpu")
        self.net = network().to(self.device).eval()
        self.rows = 0
        counts = os.environ.get("SCORER_COUNTS_DIR")
        self.count_file = (
            os.path.join(counts, f"{kind.lower()}{index}-{os.getpid()}.json") if counts else None
        )
        self.where = {
            "kind": kind,
            "device": index,
            "pid": os.getpid(),
            "instance": args.get("model_instance_name"),
        }

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            with torch.inference_mode():
                rows = torch.from_numpy(x.copy()).to(self.device)
                y = torch.cat([self.net(rows[i : i + 1]) for i in range(rows.shape[0])])
            self.rows += x.shape[0]
            responses.append(
                pb_utils.InferenceResponse(
                    [pb_utils.Tensor("Y", y.cpu().numpy().astype(np.float32))]
                )
            )
        if self.count_file:
            with open(self.count_file + ".tmp", "w") as out:
                json.dump({**self.where, "rows": self.rows}, out)
            os.replace(self.count_file + ".tmp", self.count_file)
        return responses
