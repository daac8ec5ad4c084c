"""Triton's own core validates a config of any backend: the stand-ins of triton/standin.py (the same
config with `backend: python`, a model.py that only declares) loaded in the embedded tritonserver,
one start for all. What a stand-in changes, and therefore cannot prove, is listed in
triton/standin.py. A load that does not finish within LOAD_TIMEOUT_S is reported as such (a stub
that cannot start can hang).
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from tritonbuild.backends import REGISTRY, runs_embedded
from tritonbuild.triton.config import CONFIG_FILE
from tritonbuild.triton.finding import Finding
from tritonbuild.triton.model_dir import ModelDir, ModelDirs
from tritonbuild.triton.standin import (
    declares_no_auto_complete,
    ensembles,
    explain_load_error,
    write_standins,
)

LOAD_TIMEOUT_S = 120.0
Progress = Callable[[str], None]
# Triton's Python backend starts a stub process to auto-complete each model's config before the
# model's instances (python_backend src/python_be.cc ModelState::Create), unless the global backend
# setting auto-complete-config is false: the first value of a setting wins, and tritonserver adds
# its own after the command line's (core src/backend_config.cc, src/tritonserver.cc). A stand-in
# has no auto_complete_config, so that stub hands the config back as it came, one Python process
# per model for nothing (tests/contracts/facts/triton_autocomplete.json).
NO_BACKEND_AUTOCOMPLETE = "--backend-config=auto-complete-config=false"


def server_options(
    scratch: Path, as_is: frozenset[str], models: ModelDirs | None = None
) -> list[str]:
    """The options of the server that loads the repository scratch (write_standins'): without the
    backend's auto-complete where every model there has a config.pbtxt and is a stand-in or a Python
    model whose class provably has no auto_complete_config (declares_no_auto_complete). Any other
    model loaded as itself may have its own, and one without config.pbtxt is given its config by
    auto-complete alone (Triton refuses it otherwise). models: the originals as verify read them
    (an as_is model is copied whole, so its config is not parsed again)."""
    for model in scratch.iterdir():
        if not model.is_dir():
            continue
        if not (model / CONFIG_FILE).is_file() or (
            model.name in as_is
            and not declares_no_auto_complete(models[model.name] if models else model)
        ):
            return []
    return [NO_BACKEND_AUTOCOMPLETE]


def check_with_triton(
    root: Path,
    names: list[str],
    *,
    progress: Progress | None = None,
    have_gpu: bool = False,
    as_is: frozenset[str] = frozenset(),
    launcher=None,
    models: ModelDirs | None = None,
) -> tuple[dict[str, str | None], dict[str, list[str]], str]:
    """Load a stand-in of each model (the model itself for those in as_is) in one embedded-server
    start: (name → Triton's refusal or None, name → what the stand-in changed, the server's version
    line). Plain models load first, concurrently; then ensembles, one at a time (their steps are
    loaded already). models: root's model directories as read (by default read here)."""
    from concurrent.futures import ThreadPoolExecutor

    from tritonbuild.server.embedded import EmbeddedServer
    from tritonbuild.server.loading import ModelLoadError, load_model

    say = progress or (lambda _m: None)
    models = models or ModelDirs(Path(root))
    scratch = Path(tempfile.mkdtemp(prefix="tritonbuild-core-check-"))
    try:
        changes = write_standins(
            Path(root), names, scratch, have_gpu=have_gpu, as_is=as_is, models=models
        )
        say(f"Triton core check of {len(names)} config(s) (stand-in models)")
        options = server_options(scratch, as_is, models)
        with EmbeddedServer(scratch, launcher=launcher, options=options) as server:
            url = f"http://{server.http_url}"

            def one(name: str) -> str | None:
                try:
                    load_model(url, name, timeout=LOAD_TIMEOUT_S)
                    return None
                except ModelLoadError as e:
                    return e.message

            ens = ensembles(models, names)
            result: dict[str, str | None] = {}
            # NOTE: ensembles one at a time: two ensembles that name each other, loaded
            # concurrently, may fail with "no version is available" instead of Triton's cycle
            # message.
            for batch, workers in (
                ([n for n in names if n not in ens], 8),
                ([n for n in names if n in ens], 1),
            ):
                if batch:
                    with ThreadPoolExecutor(max_workers=min(workers, len(batch))) as pool:
                        result.update(zip(batch, pool.map(one, batch), strict=True))
            log = server.log_path.read_text(errors="replace")
            which = server.describe()
        for name, error in result.items():
            if error is not None:  # a path Triton names is the user's, not the scratch copy's
                result[name] = explain_load_error(error, log, name).replace(
                    str(scratch), str(Path(root))
                )
        return result, changes, which
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def not_loaded_here(model_dir: Path | ModelDir) -> str | None:
    """For a model checked through a stand-in: why the model itself was not loaded (its backend is
    not in the server verify started), or None for an ensemble (Triton's core runs it: there is
    nothing more to load)."""
    mc = ModelDir.given(model_dir).config
    if mc is None:  # unreadable or absent: the config rows say why
        return None
    if mc.HasField("ensemble_scheduling") or runs_embedded(
        mc.backend
    ):  # nothing to say of the backend
        return None
    owner = REGISTRY.for_config(mc.backend, mc.platform)
    what = mc.backend or mc.platform
    needs = (owner.needs if owner is not None else "") or f"a server with the {what} backend"
    return (
        f"the model itself: not checked here (needs {needs}): the {what} backend is not in this "
        "server; verify where it is (--server URL, --tritonserver PATH)"
    )


_MISSING_MODULE = re.compile(r"ModuleNotFoundError: No module named '([^']+)'")
# What Python's network stack (socket, urllib, requests/urllib3, huggingface_hub) says when a host
# cannot be reached
_NETWORK = re.compile(
    r"Temporary failure in name resolution|Name or service not known|nodename nor servname|"
    r"Failed to resolve|NameResolutionError|Network is unreachable|Max retries exceeded|"
    r"couldn't connect to|socket\.gaierror|Connection refused|timed out",
    re.I,
)
_HOST = re.compile(
    r"host='([^']+)'|Failed to resolve '([^']+)'|couldn't connect to '(?:https?://)?([^'/]+)|"
    r"https?://([^/\s'\"]+)"
)
_NO_FILE = re.compile(
    r"No such file or directory|FileNotFoundError|does not exist|not a directory", re.I
)


def not_here_cause(model_dir: Path | ModelDir, cause: str) -> str | None:
    """Why a model that the embedded server loaded as written failed for want of this machine, not
    of its own: its Python code imports a package this environment lacks, its initialize() fetches
    from the network (weights from a hub) and none is here, or a parameter names an absolute path
    absent here (a tokenizer directory of upstream's docs) and initialize() failed on a missing
    file. None: a refusal."""
    if (missing := _MISSING_MODULE.search(cause)) is not None:
        return (
            f"its Python code imports {missing.group(1)!r}, which this environment lacks (Triton's "
            "core accepted the config before the Python backend imported it)"
        )
    if _NETWORK.search(cause) and "initialize" in cause:
        host = next(
            (group for match in _HOST.finditer(cause) for group in match.groups() if group), None
        )
        where = f" ({host})" if host else ""
        return (
            f"needs network: its initialize() could not reach the network{where}, which this "
            f"machine does not have; the serving machine may"
        )
    if not _NO_FILE.search(cause):
        return None
    read = ModelDir.given(model_dir)
    if read.config is None:  # the config rows say why
        return None
    params, model_dir = read.config.parameters, read.path
    absent = [
        (k, v.string_value)
        for k, v in sorted(params.items())
        if v.string_value.startswith("/") and not Path(v.string_value).exists()
    ]
    own = [
        p
        for p in re.findall(re.escape(str(model_dir)) + r"/[^\s'\"():,;]+", cause)
        if not Path(p).exists()
    ]
    if not absent or own:
        return None  # no such parameter, or the missing file Triton names is the model's own
    named = ", ".join(f"{k} {v!r}" for k, v in absent)
    return (
        "its initialize() failed on a missing file, and its parameters name paths this machine "
        f"lacks ({named})"
    )


def without_repeats(offline: list[Finding], core: list[Finding]) -> list[Finding]:
    """Both lists, each finding once: a refusal by Triton's core that repeats, in Triton's words,
    what an offline rule already found for that model is not a second row; the offline row says the
    server refused it the same way.
    """
    out, rest = list(offline), []
    for row in core:
        same = (
            None
            if row.ok
            else next(
                (
                    i
                    for i, finding in enumerate(out)
                    if finding.model == row.model
                    and not finding.ok
                    and any(part and part in row.detail for part in finding.detail.split("; "))
                ),
                None,
            )
        )
        if same is None:
            rest.append(row)
        else:
            out[same] = out[same].model_copy(
                update={"detail": f"{out[same].detail} (tritonserver refused it the same way)"}
            )
    return out + rest
