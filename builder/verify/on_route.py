"""One model past the static checks, on its route: what asks it (an in-process runner, the embedded
server's model, a given server's), or the report of why it cannot be asked; its answers checked
(verify/answers.py) and, under --record, its goldens written."""

from __future__ import annotations

from pathlib import Path

from tritonbuild.backends import REGISTRY
from tritonbuild.backends.base import Route
from tritonbuild.repository.manifest import ManifestModel
from tritonbuild.server.loading import ModelLoadError, load_model
from tritonbuild.triton.model_dir import ModelDir, ModelDirs
from tritonbuild.verify.answers import check_model, write_goldens
from tritonbuild.verify.checked import AnswersChecked
from tritonbuild.verify.classes import compared_on_record, refused
from tritonbuild.verify.models import ModelReport
from tritonbuild.verify.routes import live_runner
from tritonbuild.verify.runners import InferError
from tritonbuild.verify.served import served_differences, version_ready
from tritonbuild.verify.worker import WorkerError, in_process_runner, ran_on


def verify_model(
    root: Path,
    model: ManifestModel,
    route: Route,
    detail: str,
    url: str | None,
    record: bool,
    load_error: str | None = None,
    force: bool = False,
    server_numerics: dict | None = None,
    models: ModelDirs | None = None,
) -> tuple[ModelReport, ManifestModel]:
    """The model's report on its route, and the model (its goldens recorded, under record).
    models: the repository's model directories as verify read them (by default read here)."""
    models = models or ModelDirs(root)
    base = {
        "name": model.name,
        "version": model.version,
        "backend": model.backend,
        "route": route,
        "route_detail": detail,
        "goldens": model.goldens,
    }
    if route == "none":
        return ModelReport(
            **{**base, "route_detail": "not checked here"},
            loaded=False,
            passed=False,
            checked=False,
            notes=[detail],
        ), model
    runner = _runner(models[model.name], model, route, url, load_error, base)
    if isinstance(runner, ModelReport):
        return runner, model
    numerics = ran_on(runner) if route == "in-process" else server_numerics
    try:
        checked = check_model(
            model, runner, root, record, force, numerics=numerics, model_dir=models[model.name]
        )
    except InferError as e:
        return ModelReport(**base, loaded=True, passed=False, infer_error=str(e)), model
    except Exception as e:  # in-process runtimes (onnxruntime, torch) raise their own types
        if route != "in-process":
            raise
        error = str(e) if isinstance(e, WorkerError) else f"{type(e).__name__}: {e}"
        return ModelReport(**base, loaded=True, passed=False, infer_error=error), model
    finally:
        runner.close()
    if checked.recording is not None:
        checked, model = _record(root, model, checked, force)
        base["goldens"] = model.goldens
    return ModelReport(**base, loaded=True, **checked.report_fields()), model


def _record(
    root: Path, model: ManifestModel, checked: AnswersChecked, force: bool
) -> tuple[AnswersChecked, ManifestModel]:
    """--record: the check's recording written as the model's goldens (the model now names them),
    and the check with what write_goldens said."""
    recording = checked.recording
    model, note, refusal = write_goldens(
        root,
        model,
        recording.inputs,
        recording.answers,
        recording.golden,
        recording.numerics,
        force=force,
        files=recording.files,
    )
    if refusal is None:
        told = None
        if not force:
            told = compared_on_record(
                recording.golden, recording.numerics, recording.answers, recording.files
            )
        return checked.recorded(note, None, told=told), model
    differing, told = refused(
        recording.golden, recording.answers, recording.numerics, recording.files
    )
    return checked.recorded(note, refusal, differing, told), model


def _runner(read: ModelDir, model: ManifestModel, route: Route, url, load_error, base: dict):
    """What asks the model on its route, or the report of why it cannot be asked (not loaded,
    another build served, its runtime missing). On a given server, base gets what it serves."""
    try:
        if route == "in-process":
            version_dir = read.path / str(model.version)
            return in_process_runner(version_dir, model)
        if route == "live-embedded":
            if load_error:
                raise ModelLoadError(load_error)
            return live_runner(url, model)
        # NOTE: a load of a served model reloads it (a second vLLM engine)
        if not version_ready(url, model):
            load_model(url, model.name)
        served, base["served"] = served_differences(url, read, model)
        if served:
            return ModelReport(
                **base,
                loaded=True,
                passed=False,
                load_error=f"the server at {url} does not serve this build of {model.name!r}: "
                + "; ".join(served),
            )
        return live_runner(url, model)
    except ModelLoadError as e:
        return ModelReport(**base, loaded=False, load_error=e.message, passed=False)
    except ImportError as e:
        extra = (
            REGISTRY.for_manifest(model.backend).runner_extra()
            if route == "in-process"
            else "embedded"
        )
        return ModelReport(
            **base,
            loaded=False,
            load_error=f"{e}: pip install 'tritonbuild[{extra}]'",
            passed=False,
        )
    except Exception as e:  # noqa: BLE001 - onnxruntime raises its own types on a bad model
        return ModelReport(
            **base, loaded=False, load_error=f"{type(e).__name__}: {e}", passed=False
        )
