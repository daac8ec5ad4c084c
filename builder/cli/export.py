"""export perf-data | model-analyzer: what tritonbuild knows, in the files the tools users already
run read."""

from __future__ import annotations

from pathlib import Path

import click

from tritonbuild import api
from tritonbuild.cli.app import app
from tritonbuild.cli.common import _json, json_option, key_values, main


@main.group("export")
def export_group() -> None:
    """Files for perf_analyzer and Model Analyzer, from goldens and recipes."""


def _out_option(what: str):
    return click.option(
        "-o",
        "--output",
        "out",
        required=True,
        type=click.Path(path_type=Path, dir_okay=False),
        help=f"Where the {what} is written (replaced whole, never left half-written).",
    )


@export_group.command("perf-data")
@click.argument("repository", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.argument("model")
@_out_option("perf_analyzer --input-data JSON")
@click.option(
    "--no-validation",
    is_flag=True,
    help="Inputs only: no validation_data (perf_analyzer then does not check the answers).",
)
@json_option
def perf_data_command(
    repository: Path, model: str, out: Path, no_validation: bool, as_json: bool
) -> None:
    """MODEL's goldens in the built REPOSITORY as perf_analyzer --input-data JSON.

    Every golden request goes in "data"; its recorded outputs go in "validation_data", which
    perf_analyzer compares byte for byte with each answer while it measures.
    """
    summary = api.export_perf_data(repository, model, out, validation=not no_validation)
    if as_json:
        _json(summary)
        return
    checked = "with validation data" if summary.validation else "inputs only"
    app().out.print(f"{out}: {summary.requests} requests of {model} v{summary.version} ({checked})")
    app().out.print(f"  run: {summary.perf_analyzer}")


def _input_data(_ctx, _param, values: tuple[str, ...]) -> dict[str, str] | str | None:
    if not values:
        return None
    if len(values) == 1 and "=" not in values[0]:
        return values[0]
    return key_values(values, "--input-data", "MODEL=FILE")


@export_group.command("model-analyzer")
@click.argument("recipes", nargs=-1, required=True, type=click.Path(path_type=Path, exists=True))
@_out_option("Model Analyzer profile config (YAML)")
@click.option(
    "-m",
    "--model-repository",
    required=True,
    metavar="PATH",
    help="The repository Model Analyzer profiles (the built one, as its tritonserver sees it).",
)
@click.option(
    "--input-data",
    multiple=True,
    callback=_input_data,
    metavar="[MODEL=]FILE",
    help="perf_analyzer data for a model (from 'export perf-data'); FILE alone with one recipe.",
)
@json_option
def model_analyzer_command(
    recipes: tuple[Path, ...],
    out: Path,
    model_repository: str,
    input_data: dict[str, str] | str | None,
    as_json: bool,
) -> None:
    """The RECIPES' serving spaces (their tune sections) as a Model Analyzer profile config.

    A manual sweep (run_config_search_disable) of max_batch_size, dynamic batcher delays and
    preferred sizes, and instance counts and kinds; what Model Analyzer cannot express is said, not
    dropped silently.
    """
    summary = api.export_model_analyzer(
        list(recipes), out, model_repository=model_repository, input_data=input_data
    )
    if as_json:
        _json(summary)
        return
    app().out.print(f"{out}: profile_models {', '.join(summary.models)}")
    for model, notes in summary.notes.items():
        for note in notes:
            app().out.print(f"  note: {model}: {note}")
    app().out.print(f"  run: {summary.model_analyzer}")
