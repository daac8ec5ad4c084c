"""Subprocess entry: export a seeded torch module to ONNX.
`python -m tritonbuild.backends.pytorch.export SPEC OUT`.

Runs in its own process so the user's module cannot leak into tritonbuild, and so its log and exit
code are those of a build step.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

TORCH_DTYPES = {
    "bool": "bool",
    "uint8": "uint8",
    "int8": "int8",
    "int16": "int16",
    "int32": "int32",
    "int64": "int64",
    "fp16": "float16",
    "fp32": "float32",
    "fp64": "float64",
    "bf16": "bfloat16",
}


def example_inputs(torch, spec: dict):
    gen = torch.Generator().manual_seed(spec["seed"])
    out = []
    for _name, inp in spec["inputs"].items():
        dtype = getattr(torch, TORCH_DTYPES[inp["dtype"]])
        if dtype.is_floating_point:
            out.append(torch.rand(inp["shape"], generator=gen).to(dtype))
        else:
            out.append(
                torch.randint(inp["low"], inp["high"], inp["shape"], generator=gen).to(dtype)
            )
    return tuple(out)


def import_user_module(name: str, root: str):
    """The recipe's module, from its directory. That directory goes AFTER our installed packages on
    sys.path (a user's `tritonbuild/`, `builder/` or `numpy/` folder beside the recipe must not
    shadow them); a module that then resolves elsewhere (its name is taken by an installed one) is
    an error naming both places."""
    sys.path.append(root)
    module = importlib.import_module(name)
    file = getattr(module, "__file__", None)
    where = Path(file).resolve() if file else None
    if where is None or not where.is_relative_to(Path(root).resolve()):
        print(
            f"module {name!r} resolved to {where or 'a built-in module'}, not to a file under "
            f"{root}: an installed module has that name; rename your module",
            file=sys.stderr,
        )
        return None
    return module


def main(spec_path: str, out_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    import torch

    torch.manual_seed(spec["seed"])
    torch.use_deterministic_algorithms(True)
    mod_name, fn_name = spec["module"].split(":")
    module = import_user_module(mod_name, spec["recipe_dir"])
    if module is None:
        return 3
    model = getattr(module, fn_name)()
    if not isinstance(model, torch.nn.Module):
        print(
            f"{spec['module']} returned {type(model).__name__}, not a torch.nn.Module",
            file=sys.stderr,
        )
        return 3
    model.eval()
    if spec.get("target") == "pytorch":
        return export_pytorch(torch, model, spec, out_path)
    names = list(spec["inputs"])
    dynamic_axes = {
        t: {int(a): n for a, n in axes.items()} for t, axes in spec["dynamic_axes"].items()
    }
    with torch.no_grad():
        torch.onnx.export(
            model,
            example_inputs(torch, spec),
            out_path,
            input_names=names,
            output_names=spec["outputs"],
            dynamic_axes=dynamic_axes or None,
            opset_version=spec["opset"],
            do_constant_folding=True,
            dynamo=False,
        )
    print(f"exported {spec['module']} (seed {spec['seed']}, opset {spec['opset']}) to {out_path}")
    return 0


def normalize_torchscript(path: str) -> None:
    """Make a TorchScript archive independent of where it was built: drop the *.debug_pkl source
    maps (they hold absolute paths of the recipe's module and of torch itself) and derive
    serialization_id from the content. torch.jit.load does not need either; the bytes then depend
    only on the model."""
    import hashlib
    import io
    import zipfile

    with zipfile.ZipFile(path) as zin:
        items = [
            (i.filename, zin.read(i.filename))
            for i in zin.infolist()
            if not i.filename.endswith(".debug_pkl")
        ]
    digest = hashlib.sha256(
        b"".join(n.encode() + d for n, d in items if not n.endswith("/serialization_id"))
    )
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as zout:
        for name, data in items:
            if name.endswith("/.data/serialization_id"):
                data = digest.hexdigest()[:20].encode()
            zout.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data)
    with open(path, "wb") as f:
        f.write(out.getvalue())


def export_pytorch(torch, model, spec: dict, out_path: str) -> int:
    """TorchScript (trace or script) → model.pt, or torch.export + AOTInductor → model.pt2."""
    args = example_inputs(torch, spec)
    with torch.no_grad():
        if spec["format"] == "aoti":
            batch = torch.export.Dim("batch", min=1, max=max(2, spec["max_batch_size"]))
            dynamic = (
                {name: {0: batch} for name in spec["inputs"]}
                if spec["max_batch_size"] > 0
                else None
            )
            program = torch.export.export(model, args, dynamic_shapes=dynamic)
            torch._inductor.aoti_compile_and_package(program, package_path=out_path)
        else:
            module = (
                torch.jit.trace(model, args)
                if spec["method"] == "trace"
                else torch.jit.script(model)
            )
            if spec.get("buckets"):
                module = bucketed(
                    torch, module, spec["buckets"], len(args), len(spec["outputs"]), out_path
                )
            torch.jit.save(module, out_path)
            normalize_torchscript(out_path)
    print(f"exported {spec['module']} ({spec['format']}, seed {spec['seed']}) to {out_path}")
    return 0


BUCKETED = """
from typing import List, Tuple

import torch


class Bucketed(torch.nn.Module):
    \"\"\"tritonbuild batch_buckets: each batch padded with zero rows to the next bucket, answers sliced back.\"\"\"

    def __init__(self, inner: torch.nn.Module, buckets: List[int]):
        super().__init__()
        self.inner = inner
        self.buckets = buckets

    def bucket(self, rows: int) -> int:
        for size in self.buckets:
            if size >= rows:
                return size
        return rows

    def pad(self, x: torch.Tensor, size: int) -> torch.Tensor:
        rows = x.size(0)
        if size == rows:
            return x
        shape = [size - rows] + list(x.shape[1:])
        return torch.cat([x, torch.zeros(shape, dtype=x.dtype, device=x.device)], 0)

    def forward(self, {args}) -> {returns}:
        rows = x0.size(0)
        size = self.bucket(rows)
        out = self.inner({padded})
        return {sliced}
"""


def bucketed(torch, module, buckets: list[int], n_inputs: int, n_outputs: int, out_path: str):
    """The exported module inside a scripted wrapper that pads every batch to its bucket
    (batch_buckets). The wrapper's source is generated for the module's arity, written beside the
    output and imported (TorchScript compiles from source files)."""
    import importlib.util

    names = [f"x{i}" for i in range(n_inputs)]
    single = n_outputs == 1
    code = BUCKETED.format(
        args=", ".join(f"{name}: torch.Tensor" for name in names),
        returns="torch.Tensor" if single else f"Tuple[{', '.join(['torch.Tensor'] * n_outputs)}]",
        padded=", ".join(f"self.pad({name}, size)" for name in names),
        sliced="out[:rows]" if single else ", ".join(f"out[{i}][:rows]" for i in range(n_outputs)),
    )
    path = Path(out_path).with_name("tritonbuild_buckets.py")
    path.write_text(code)
    spec = importlib.util.spec_from_file_location("tritonbuild_buckets", path)
    generated = importlib.util.module_from_spec(spec)
    sys.modules["tritonbuild_buckets"] = generated
    spec.loader.exec_module(generated)
    try:
        return torch.jit.script(generated.Bucketed(module, list(buckets)))
    finally:
        path.unlink()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
