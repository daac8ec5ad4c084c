"""Triton's interpreter (TRITON_INTERPRET=1) as the kernel tests need it: tl.dot as one fixed-order reduction over K,
the same for every row of a tile (as the GPU's MMA is), bf16 operands read as the numbers they hold."""

from __future__ import annotations

import os

import numpy as np
import pytest


def _as_float(handle, dtype):
    """A dot operand's values: the interpreter keeps a bf16 block as its raw 16-bit words (uint16), which numpy would
    otherwise read as integers (Triton 3.6: a bf16 tl.dot gave 2.6e10 for products of N(0, 1) values)."""
    if handle.data.dtype == np.uint16:
        return (handle.data.astype(np.uint32) << 16).view(np.float32).astype(dtype)
    return handle.data.astype(dtype)


def fixed_order_dot(monkeypatch) -> None:
    """Replace the interpreter's tl.dot. Upstream's hands it to numpy's matmul, i.e. OpenBLAS's sgemm, whose Haswell
    and Zen kernels give a row other bits at another position inside the tile (measured: the same x row and weights,
    row 0 of a tile alone vs row 15 of a full one, differed in one element with OPENBLAS_CORETYPE=Haswell, the core
    type portable numerics pins and every AVX2 machine gets): that is the CPU BLAS, not the kernel under test."""
    interpreter = pytest.importorskip("triton.runtime.interpreter")

    def dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        out = d.data.dtype
        products = _as_float(a, out)[:, :, None] * _as_float(b, out)[None, :, :]
        acc = np.zeros(d.data.shape, dtype=out)
        for k in range(products.shape[1]):
            acc += products[:, k, :]
        return interpreter.TensorHandle(acc + d.data, d.dtype.scalar)

    if os.environ.get("TRITON_INTERPRET") == "1":
        monkeypatch.setattr(interpreter.InterpreterBuilder, "create_dot", dot)
