"""Triton's own core validates a config of any backend: the stand-ins of triton/standin.py (the same config with
`backend: python`, a model.py that only declares) loaded in the embedded tritonserver, one start for all. What a
stand-in changes, and therefore cannot prove, is listed in triton/standin.py. A load that does not finish within
LOAD_TIMEOUT_S is reported as such (a stub that cannot start can hang).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from tritonbuild.triton.standin import ensembles, explain_load_error, write_standins

LOAD_TIMEOUT_S = 120.0
Progress = Callable[[str], None]


def check_with_triton(root: Path, names: list[str], *, progress: Progress | None = None,
                      have_gpu: bool = False, as_is: frozenset[str] = frozenset(), launcher=None
                      ) -> tuple[dict[str, str | None], dict[str, list[str]], str]:
    """Load a stand-in of each model (the model itself for those in as_is) in one embedded-server start:
    (name → Triton's refusal or None, name → what the stand-in changed, the server's version line). Plain models
    load first, concurrently; then ensembles, one at a time (their steps are loaded already)."""
    from concurrent.futures import ThreadPoolExecutor

    from tritonbuild.server.embedded import EmbeddedServer, ModelLoadError, load_model

    say = progress or (lambda _m: None)
    scratch = Path(tempfile.mkdtemp(prefix="tritonbuild-core-check-"))
    try:
        changes = write_standins(Path(root), names, scratch, have_gpu=have_gpu, as_is=as_is)
        say(f"Triton core check of {len(names)} config(s) (stand-in models)")
        with EmbeddedServer(scratch, launcher=launcher) as server:
            url = f"http://{server.http_url}"

            def one(name: str) -> str | None:
                try:
                    load_model(url, name, timeout=LOAD_TIMEOUT_S)
                    return None
                except ModelLoadError as e:
                    return e.message

            ens = ensembles(scratch, names)
            result: dict[str, str | None] = {}
            # NOTE: ensembles one at a time: two ensembles that name each other, loaded concurrently, may fail
            # with "no version is available" instead of Triton's cycle message.
            for batch, workers in (([n for n in names if n not in ens], 8), ([n for n in names if n in ens], 1)):
                if batch:
                    with ThreadPoolExecutor(max_workers=min(workers, len(batch))) as pool:
                        result.update(zip(batch, pool.map(one, batch), strict=True))
            log = server.log_path.read_text(errors="replace")
            which = server.describe()
        for name, error in result.items():
            if error is not None:  # a path Triton names is the user's, not the scratch copy's
                result[name] = explain_load_error(error, log, name).replace(str(scratch), str(Path(root)))
        return result, changes, which
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
