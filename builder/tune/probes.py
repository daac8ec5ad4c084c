"""What tune serves beside the candidates: the empty model that measures the load generator's own
ceiling, and the goldens check of a finalist through a plain gRPC client."""

from __future__ import annotations

import numpy as np

from tritonbuild.repository.manifest import ManifestModel
from tritonbuild.triton.batching import write_dynamic_batching
from tritonbuild.tune.space import Candidate
from tritonbuild.verify.goldens import mismatches

NULL_MODEL = "tritonbuild_loadgen_ceiling"

NULL_PY = '''
import numpy as np
import triton_python_backend_utils as pb_utils

OUTPUTS = {outputs!r}


class TritonPythonModel:
    """Does nothing: answers zeros of the output shapes (the load generator's own ceiling)."""

    def execute(self, requests):
        out = []
        for r in requests:
            first = r.inputs()[0].as_numpy()
            lead = [first.shape[0]] if {batched!r} else []
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor(n, np.zeros(lead + [max(1, d) for d in dims],
                                                                                dtype=np.dtype(t)))
                                                   for n, (dims, t) in OUTPUTS.items()]))
        return out
'''


def null_model(manifest_model: ManifestModel, mc):
    from tritonbuild.verify.goldens import NP_DTYPES

    outputs = {
        tensor.name: (list(tensor.dims), np.dtype(NP_DTYPES[tensor.dtype]).str)
        for tensor in manifest_model.outputs
    }
    code = NULL_PY.format(outputs=outputs, batched=manifest_model.max_batch_size > 0).encode()
    null = type(mc)()
    null.CopyFrom(mc)
    null.name = NULL_MODEL
    null.backend = "python"
    null.ClearField("platform")
    null.ClearField("default_model_filename")
    null.ClearField("model_warmup")
    null.ClearField("parameters")
    null.ClearField("instance_group")
    group = null.instance_group.add()
    from tritonbuild.triton.config import model_config_pb2

    group.kind = model_config_pb2().ModelInstanceGroup.Kind.Value("KIND_CPU")
    group.count = 2
    write_dynamic_batching(null, {} if manifest_model.max_batch_size > 0 else None)
    return null, {"1/model.py": code}


class GoldensCheck:
    """Goldens through a plain gRPC client: each sample alone × repeats, then all at once × repeats
    (the dynamic batcher merges them)."""

    def __init__(self, url: str, manifest_model: ManifestModel, inputs, reference):
        import tritonclient.grpc as grpcclient

        self.g = grpcclient
        self.client = grpcclient.InferenceServerClient(url)
        self.manifest_model, self.inputs, self.reference = manifest_model, inputs, reference
        self.name = manifest_model.name  # the model name the config under test is loaded as

    def infer(self, sample: dict) -> dict:
        from tritonclient.utils import np_to_triton_dtype

        ins = []
        for name, arr in sample.items():
            i = self.g.InferInput(name, list(arr.shape), np_to_triton_dtype(arr.dtype))
            i.set_data_from_numpy(arr)
            ins.append(i)
        wanted = [
            self.g.InferRequestedOutput(tensor.name) for tensor in self.manifest_model.outputs
        ]
        response = self.client.infer(self.name, ins, outputs=wanted)
        return {
            tensor.name: response.as_numpy(tensor.name) for tensor in self.manifest_model.outputs
        }

    def answers_alone(self) -> list[dict]:
        """Each input sent alone once: the served config's own answers (tune.determinism:
        invariant)."""
        return [self.infer(sample) for sample in self.inputs]

    def check(self, candidate: Candidate, reference: list[dict] | None = None) -> tuple[list, list]:
        """(mismatches alone, mismatches in batches) against the goldens (or the given reference) as
        verify's Mismatch objects."""
        reference = reference or self.reference
        alone, batched = [], []
        for rep in range(self.manifest_model.verify.repeats):
            for i, sample in enumerate(self.inputs):
                context = f"{candidate.label}: repeat {rep + 1}"
                alone += mismatches(reference[i], self.infer(sample), sample=i, context=context)
        if candidate.batching and len(self.inputs) > 1:
            # NOTE: the batch composition a config causes is the one its dynamic batcher forms from
            # single requests; a batch the client builds itself is the model's own property (verify
            # checks it).
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=len(self.inputs)) as pool:
                for rep in range(self.manifest_model.verify.repeats):
                    context = f"{candidate.label}: {len(self.inputs)} concurrent requests, round {rep + 1}"
                    for i, got in enumerate(pool.map(self.infer, self.inputs)):
                        batched += mismatches(reference[i], got, sample=i, context=context)
        return alone, batched

    def close(self) -> None:
        self.client.close()
