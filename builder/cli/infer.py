"""infer: send a model its goldens (or given arrays, or generated data) on a running server or a
directory the embedded tritonserver serves for the call, and print the outputs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import click

from tritonbuild import api
from tritonbuild.cli.app import app
from tritonbuild.cli.common import (
    _json,
    existing_dir,
    json_option,
    key_values,
    main,
    tritonserver_option,
)
from tritonbuild.errors import InferenceError, UsageError, VerifyError

if TYPE_CHECKING:
    from tritonbuild.api import InferResult


@main.command("infer")
@click.argument("target")
@click.argument("model")
@click.option(
    "--input",
    "input_files",
    multiple=True,
    metavar="NAME=FILE.npy",
    help="Send this array as input NAME (repeatable; batch dimension first when the model "
    "batches). Default: the model's goldens.",
)
@click.option(
    "--goldens",
    "goldens_from",
    type=str,
    metavar="OUT",
    help="With a server URL: take the goldens from this built repository.",
)
@tritonserver_option
@click.option(
    "--data",
    type=click.Choice(["random", "zeros"]),
    default=None,
    help="Send one request of generated data of the shapes the server declares (random: seeded; a "
    "variable dimension is 1) [default when there are no goldens and no --input: random].",
)
@json_option
def infer_command(
    target: str,
    model: str,
    input_files: tuple[str, ...],
    goldens_from: str | Path | None,
    tritonserver: str | None,
    data: str | None,
    as_json: bool,
) -> None:
    """Send MODEL its goldens (or --input arrays, or --data) and print the outputs.

    TARGET is a running server (http://host:8000, e.g. from 'tritonbuild serve') or a repository
    directory (built or hand-written), which the embedded tritonserver serves for this one call."""
    _check_target(target, model)
    if goldens_from is not None:
        goldens_from = existing_dir(goldens_from, "built repository (--goldens)")
    given = {
        name: Path(path)
        for name, path in key_values(input_files, "--input", "NAME=FILE.npy").items()
    }
    try:
        result = api.infer(
            target,
            model,
            inputs=given or None,
            goldens_from=goldens_from,
            data=data,
            serving=api.ServingTarget(tritonserver=tritonserver),
        )
    except VerifyError as e:
        # the embedded server's start (for a directory) raises verify's error: infer's here
        raise InferenceError(e.message, where=e.where, hint=e.hint) from None
    bad = [
        i for i, sample in enumerate(result.samples) if sample["golden"] not in (None, "bit-exact")
    ]
    if as_json:
        _json({**result.to_dict(), "samples": _samples_json(result)})
    else:
        _print_samples(result)
    if bad:
        built = goldens_from if api.is_url(target) else target
        raise InferenceError(
            f"{len(bad)} of {len(result.samples)} answers differ from the goldens (samples {bad})",
            hint=f"tritonbuild verify {built} shows where",
        )


def _check_target(target: str, model: str) -> None:
    """A local TARGET must be a directory; host:port without a scheme is a usage error saying so."""
    if not api.is_url(target):
        if not Path(target).exists() and re.fullmatch(r"[A-Za-z0-9.\-]+:[0-9]{1,5}", target):
            raise UsageError(
                f"{target!r} is not a directory; as a server address it needs its scheme",
                hint=f"tritonbuild infer http://{target} {model}",
            )
        existing_dir(target)


def _samples_json(result: InferResult) -> list[dict]:
    """Each answer's golden verdict and outputs (dtype, shape, values)."""
    return [
        {
            "golden": sample["golden"],
            "outputs": {
                k: {"dtype": str(v.dtype), "shape": list(v.shape), "data": v.tolist()}
                for k, v in sample["outputs"].items()
            },
        }
        for sample in result.samples
    ]


def _print_samples(result: InferResult) -> None:
    import numpy as np

    out = app().out
    out.print(
        f"{result.model} on {result.server}: {len(result.samples)} request(s), inputs: "
        f"{result.inputs}"
        + (" (seeded, generated from the model's metadata)" if result.inputs == "random" else "")
    )
    for i, sample in enumerate(result.samples):
        out.print(f"sample {i}" + (f"  (golden: {sample['golden']})" if sample["golden"] else ""))
        for name, arr in sample["outputs"].items():
            text = np.array2string(arr, threshold=20, max_line_width=100).replace("\n", "\n    ")
            out.print(f"  {name}  {arr.dtype} {list(arr.shape)}\n    {text}")
