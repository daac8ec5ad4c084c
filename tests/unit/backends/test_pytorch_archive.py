"""forward()'s arguments read from a TorchScript archive without torch (builder/backends/pytorch/archive.py) are
torch's own schema's, or not read at all (None: torch reads the file)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.unit.backends.test_libtorch_rules import (
    OneDict,
    TensorAndInt,
    TwoTensors,
)  # skips without torch
from tritonbuild.backends.pytorch.archive import archive_arguments

torch = pytest.importorskip("torch")


class OneTensor(torch.nn.Module):
    def forward(self, x):
        return x * 2


class Nested(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = torch.nn.Linear(4, 4)
        self.more = OneTensor()

    def forward(self, first_input_with_a_long_name, second_input_with_a_long_name, third):
        return (
            self.more(self.inner(first_input_with_a_long_name))
            + second_input_with_a_long_name
            + third
        )


class TensorList(torch.nn.Module):
    def forward(self, xs: list[torch.Tensor]):
        return torch.stack(xs).sum(0)


class OptionalTensor(torch.nn.Module):
    def forward(self, x, y: torch.Tensor | None = None):
        return x if y is None else x + y


def _schema(path) -> list[tuple[str, str]]:
    module = torch.jit.load(str(path), map_location="cpu")
    return [(a.type.kind(), str(a.type)) for a in module.forward.schema.arguments]


READ = {  # read from the archive: torch's schema, without torch
    "scripted one tensor": lambda: torch.jit.script(OneTensor()),
    "traced one tensor": lambda: torch.jit.trace(OneTensor(), torch.ones(2, 4)),
    "scripted two tensors": lambda: torch.jit.script(TwoTensors()),
    "nested, a signature over several lines": lambda: torch.jit.script(Nested()),
    "traced nested": lambda: torch.jit.trace(Nested(), (torch.ones(2, 4),) * 3),
    "a list of tensors": lambda: torch.jit.script(TensorList()),
    "the second of two classes of one name (mangled)": lambda: (
        torch.jit.script(OneTensor()),
        torch.jit.script(type("OneTensor", (TwoTensors,), {})()),
    )[1],
}
LEFT_TO_TORCH = {  # types whose wording a refusal quotes, defaults: torch reads these
    "an int": lambda: torch.jit.script(TensorAndInt()),
    "a dict": lambda: torch.jit.script(OneDict()),
    "an optional tensor with a default": lambda: torch.jit.script(OptionalTensor()),
}


@pytest.mark.parametrize("case", READ)
def test_the_archive_gives_torchs_schema(tmp_path, case):
    path = tmp_path / "model.pt"
    torch.jit.save(READ[case](), str(path))
    assert archive_arguments(path) == _schema(path)


@pytest.mark.parametrize("case", LEFT_TO_TORCH)
def test_other_signatures_are_left_to_torch(tmp_path, case):
    path = tmp_path / "model.pt"
    torch.jit.save(LEFT_TO_TORCH[case](), str(path))
    assert archive_arguments(path) is None


def test_what_is_not_a_torchscript_archive_is_left_to_torch(tmp_path):
    (tmp_path / "plain").write_bytes(b"not a zip")
    assert archive_arguments(tmp_path / "plain") is None
    assert archive_arguments(tmp_path / "missing") is None
    aoti = tmp_path / "model.pt2"
    # a zip with data.pkl whose first global is not a module
    torch.save({"x": torch.ones(2)}, str(aoti))
    assert archive_arguments(aoti) is None


def test_the_examples_libtorch_checks_import_no_torch():
    """verify's static checks of the examples' TorchScript model (image-embedder) imported torch only to read
    forward()'s arguments (2.9 of their 3.2 CPU seconds in one profiled verify, 2026-12-08)."""
    code = (
        "import sys; from pathlib import Path\n"
        "from tritonbuild.backends.pytorch.rules import libtorch_problems\n"
        "from tritonbuild.triton.config import parse\n"
        "root = Path(sys.argv[1]) / 'model_repository' / 'image-embedder'\n"
        "mc = parse((root / 'config.pbtxt').read_bytes())\n"
        "print(libtorch_problems(mc, root / '1' / 'model.pt'), 'torch' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(ROOT)], capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["[]", "False"], done.stderr
