"""One line for the Python the embedded tritonserver's Python side ran on beside the target image's
(verify's report, serve's start): a mismatch is said in capitals."""

from __future__ import annotations


def python_line(side) -> str | None:
    """side: a report's PythonSide or its dict (server/target.py:python_side); None when nothing is
    known (the server's own Python ran and no target was named)."""
    side = side if isinstance(side, dict) else side.model_dump()
    ran, target, image = side["ran"], side["target"], side["target_image"]
    wanted = f"the target image {image} ({side['target_from']}) runs Python {target}"
    if ran is None and side.get("own"):
        return f"Python side: the server's own; {wanted}" if target else None
    if ran is None:
        return f"Python side: the embedded server's did not run here; {wanted}" if target else None
    if target is None:
        return (
            f"Python side: Python {ran}; no target image named (--triton-image names the one "
            "you serve with)"
        )
    if ran == target:
        return f"Python side: Python {ran}, as {wanted}"
    why = (
        f"not run here: {side['not_run']}"
        if side.get("not_run")
        else "TRITONBUILD_EMBEDDED_PYTHON chose it"
    )
    return f"Python side: Python {ran} ({side['environment']}), but {wanted}: MISMATCH ({why})"
