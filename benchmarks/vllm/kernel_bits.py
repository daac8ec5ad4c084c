"""Do the project's batch-invariant kernels give the same bits on another GPU? One piece of the question of
issue 41 (the invariant 8B configurations' log-probs differed between an H100 and the H200, and between two H100
machines): the parts of the decode step the project owns, measured without vLLM, on inputs that are the same
bytes on every machine (made by torch's CPU generator, whose sequence does not depend on the CPU, then copied to
the GPU; their digests are recorded too).

For each Llama-3-8B linear shape (w4a16_bench.SHAPES) and the lm_head, at M = 1, 7, 16, 64, 256 rows: the
SHA-256 of the output bytes of the W4A16 kernel (builder/backends/vllm/invariant/w4a16.py, at its own tiles
and weight layout), of the fp16 linear (linear16.py) and, as a control the project does not own, of cuBLAS
fp16 (torch.nn.functional.linear), with what decides the bits on this machine (GPU name, compute capability,
SM count, driver, CUDA, torch, Triton). `--compare` an earlier record (another GPU kind, another machine):
which outputs are the same bytes, which differ, and which machine fields differ.

    python3 benchmarks/vllm/kernel_bits.py --out $OUT/kernel-bits.json [--compare docs/runs/OTHER.json]
    TRITON_INTERPRET=1 python3 benchmarks/vllm/kernel_bits.py --device cpu --small --out bits.json  # the CI's

A record of what the machine computed, not a check: the exit status is 0 whether or not the bits match.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

try:
    from benchmarks.vllm import w4a16_bench as bench
except ImportError:  # run as a script: its own folder is on the path
    import w4a16_bench as bench

GROUP = bench.GROUP
LM_HEAD = (
    "lm_head",
    128256,
    4096,
)  # Llama-3-8B's, fp16 in the INT4 checkpoints: the fp16 kernels only
ROWS = (1, 7, 16, 64, 256)
SMALL_SHAPES = [("small_a", 192, 256), ("small_b", 64, 512)]  # the interpreter's: seconds on a CPU
SMALL_ROWS = (1, 7, 16)


def digest(t: torch.Tensor) -> str:
    return hashlib.sha256(t.detach().cpu().contiguous().view(torch.uint8).numpy()).hexdigest()


def inputs(n: int, k: int, rows: int, seed: int) -> dict:
    """The same bytes on every machine: INT4 words [N, K/8] (+8 bias, low nibble first), fp16 scales [N, K/G],
    the dense fp16 weights they stand for, fp16 activations [rows, K]; from torch's CPU generator."""
    gen = torch.Generator().manual_seed(seed)
    q = torch.randint(0, 16, (n, k), generator=gen, dtype=torch.int32)
    shifts = torch.arange(8, dtype=torch.int32) * 4
    words = (q.view(n, k // 8, 8) << shifts).sum(-1, dtype=torch.int32)
    scale = (torch.rand((n, k // GROUP), generator=gen) * 0.01 + 0.001).half()
    dense = ((q - 8).half().view(n, k // GROUP, GROUP) * scale[..., None]).view(n, k)
    x = torch.randn((rows, k), generator=gen).half()
    return {"words": words, "scale": scale, "dense": dense, "x": x}


def machine(device: str) -> dict:
    fields = {"torch": torch.__version__, "python": platform.python_version(), "device": device}
    fields["triton"] = __import__("triton").__version__
    if device == "cpu":
        return {**fields, "cpu": platform.processor() or platform.machine()}
    props = torch.cuda.get_device_properties(device)
    fields.update(
        gpu=props.name,
        capability=f"{props.major}.{props.minor}",
        sm_count=props.multi_processor_count,
        cuda=torch.version.cuda,
    )
    try:
        smi = ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
        fields["driver"] = subprocess.run(smi, capture_output=True, text=True).stdout.split()[0]
    except (OSError, IndexError):
        fields["driver"] = None
    return fields


def record(device: str, small: bool) -> dict:
    w4a16 = bench.load_plugin(bench.PLUGIN, "kernel_bits_w4a16")
    linear16 = bench.load_plugin(bench.PLUGIN.with_name("linear16.py"), "kernel_bits_linear16")
    shapes, rows = (SMALL_SHAPES, SMALL_ROWS) if small else (bench.SHAPES, ROWS)
    outputs, given = {}, {}
    for seed, (name, n, k) in enumerate([*shapes, *([] if small else [LM_HEAD])]):
        data = inputs(n, k, max(rows), seed)
        given[name] = {key: digest(t) for key, t in data.items()}
        data = {key: t.to(device) for key, t in data.items()}
        int4 = name != "lm_head"  # the lm_head stays fp16 in the INT4 checkpoints
        planes, scales = (
            w4a16.prepare_weights(data["words"], data["scale"], GROUP) if int4 else (0, 0)
        )
        for m in rows:
            x = data["x"][:m]
            if int4:
                outputs[f"w4a16 {name} M={m}"] = digest(
                    w4a16.w4a16_matmul(x, planes, scales, GROUP)
                )
            outputs[f"linear16 {name} M={m}"] = digest(linear16.linear16(x, data["dense"]))
            if device != "cpu":
                outputs[f"cublas {name} M={m}"] = digest(F.linear(x, data["dense"]))
        del data, planes, scales
        if device != "cpu":
            torch.cuda.empty_cache()
    return {"machine": machine(device), "inputs": given, "outputs": outputs}


def compare(new: dict, old: dict, old_name: str) -> dict:
    """Per kernel (the key's first word): the outputs both records have that are the same bytes / differ; the
    machine fields that differ; whether the inputs were the same bytes (else nothing is compared)."""
    same_inputs = new["inputs"] == old["inputs"]
    both = sorted(set(new["outputs"]) & set(old["outputs"]))
    per_kernel: dict = {}
    for key in both if same_inputs else []:
        entry = per_kernel.setdefault(key.split()[0], {"same": [], "differ": []})
        entry["same" if new["outputs"][key] == old["outputs"][key] else "differ"].append(key)
    fields = sorted(set(new["machine"]) | set(old["machine"]))
    return {
        "record": old_name,
        "same_inputs": same_inputs,
        "machine_differs": {
            f: [old["machine"].get(f), new["machine"].get(f)]
            for f in fields
            if old["machine"].get(f) != new["machine"].get(f)
        },
        "kernels": {
            kernel: {"same": len(v["same"]), "differ": len(v["differ"]), "differing": v["differ"]}
            for kernel, v in per_kernel.items()
        },
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--device", default="cuda")
    ap.add_argument(
        "--small", action="store_true", help="small shapes (Triton's interpreter on a CPU)"
    )
    ap.add_argument("--compare", type=Path, action="append", default=[], help="an earlier record")
    args = ap.parse_args()
    if args.device == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        ap.error("--device cpu runs the kernels in Triton's interpreter: set TRITON_INTERPRET=1")
    result = record(args.device, args.small)
    result["compared"] = [compare(result, json.loads(p.read_text()), p.name) for p in args.compare]
    args.out.write_text(json.dumps(result, indent=1))
    for c in result["compared"]:
        print(c["record"], json.dumps(c["machine_differs"]), flush=True)
        for kernel, v in c["kernels"].items():
            print(f"  {kernel}: {v['same']} same, {v['differ']} differ", flush=True)
    print(f"{len(result['outputs'])} outputs on {result['machine'].get('gpu', 'cpu')}: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
