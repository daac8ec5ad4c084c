"""The Triton config corpus (tests/fixtures/triton_corpus/): cases → model directories, per backend kind."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

CORPUS = Path(__file__).resolve().parent / "fixtures" / "triton_corpus"
KINDS = {
    "python": ('backend: "python"', "model.py"),
    "onnxruntime": ('backend: "onnxruntime"\nplatform: "onnxruntime_onnx"', "model.onnx"),
    "pytorch": ('backend: "pytorch"\nplatform: "pytorch_libtorch"', "model.pt"),
    "tensorrt": ('backend: "tensorrt"\nplatform: "tensorrt_plan"', "model.plan"),
}
DEFAULT_IO = (
    'input [{name: "x", data_type: TYPE_FP32, dims: [4]}]\n'
    'output [{name: "y", data_type: TYPE_FP32, dims: [4]}]\n'
)
# What a model file of each kind holds here: the stand-in never reads it; the static rules check it is present.
PLACEHOLDER = b"tritonbuild corpus placeholder\n"


def cases(which: str) -> list[dict]:
    return yaml.safe_load((CORPUS / f"{which}.yaml").read_text())


def _body(text: str, *, name: str, head: str) -> str:
    body = text or ""
    if not re.search(r"^max_batch_size\s*:", body, re.M):
        body = "max_batch_size: 8\n" + body
    if not re.search(r"^(input|output)\s*[\[{]", body, re.M):
        body = DEFAULT_IO + body
    if not re.search(r"^name\s*:", body, re.M):
        body = f'name: "{name}"\n' + body
    return f"{head}\n{body}" if head else body


def _model(root: Path, name: str, config: str, files: list[str], model_py: str) -> None:
    d = root / name
    d.mkdir(parents=True)
    (d / "config.pbtxt").write_text(config)
    for f in files:
        p = d / f
        if "." not in Path(f).name:  # a bare version directory
            p.mkdir(parents=True, exist_ok=True)
            continue
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(model_py) if p.name == "model.py" else p.write_bytes(PLACEHOLDER)


def model_name(case: dict, kind: str, suffix: bool) -> str:
    return case["id"] if case.get("raw") or not suffix else f"{case['id']}.{kind}"


def expected(case: dict, name: str) -> str:
    return case["expect"].replace("{name}", name).replace("@", f"{name}_")


def materialize(
    root: Path, items: list[dict], kind: str, model_py: str, *, suffix: bool = False
) -> dict[str, dict]:
    """Write every case applicable to kind into root; model name → case. model_py is what model.py files hold.
    suffix: name models '<id>.<kind>' so that several kinds share one repository. Raw cases (written whole,
    backend included) go with the python kind only."""
    head, filename = KINDS[kind]
    written = {}
    for case in items:
        if kind not in case.get("kinds", KINDS) or (case.get("raw") and kind != "python"):
            continue
        name = model_name(case, kind, suffix)
        if case.get("raw"):
            _model(
                root,
                name,
                _body(case["config"], name=name, head=""),
                case.get("files", []),
                model_py,
            )
        elif case.get("ensemble"):
            for step, text in (case.get("steps") or {}).items():
                sname = f"{name}_{step}"
                text = (text or "").replace("{name}", name)
                if 'platform: "ensemble"' in text:
                    _model(
                        root,
                        sname,
                        _body(text.replace("@", f"{name}_"), name=sname, head=""),
                        ["1"],
                        model_py,
                    )
                else:
                    _model(
                        root, sname, _body(text, name=sname, head=head), [f"1/{filename}"], model_py
                    )
            _model(
                root,
                name,
                _body(
                    case["config"].replace("@", f"{name}_"), name=name, head='platform: "ensemble"'
                ),
                ["1"],
                model_py,
            )
        else:
            files = [f"{v}/{filename}" for v in case.get("files", ["1"])]
            _model(root, name, _body(case["config"], name=name, head=head), files, model_py)
        written[name] = case
    return written


def standin_model() -> str:
    from tritonbuild.triton.standin import STANDIN_MODEL

    return STANDIN_MODEL
