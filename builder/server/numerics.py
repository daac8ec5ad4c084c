"""The numerics of a server's Python side (core/numerics): the portable-numerics variables a
repository's models need set before the stubs load their math libraries, and the fingerprint the
stubs' interpreter reads with the server's environment."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

from tritonbuild.core import numerics as numerics_module
from tritonbuild.core.stores import is_url
from tritonbuild.repository.manifest import MANIFEST_NAME, Manifest, numerics_env


def manifest_numerics(repository: str) -> dict[str, str]:
    """A local repository's portable numerics (repository/manifest.numerics_env over its manifest's
    models), which the server's Python side runs with wherever it serves them, as the serving
    image's entrypoint sets them. A repository without a readable manifest: none."""
    path = Path(repository) / MANIFEST_NAME
    if is_url(repository) or not path.is_file():
        return {}
    try:
        manifest = Manifest.model_validate_json(path.read_bytes())
    except (OSError, ValueError):
        return {}
    return numerics_env(manifest.models)


def server_numerics(server) -> Callable[[], dict | None]:
    """The fingerprint of a started EmbeddedServer's Python side, read by its stub's interpreter
    started as the stub is (isolated, the server's environment), so the same libraries load with
    the same variables. Started now, in the background (importing torch takes seconds: verify
    loads the models meanwhile); the function returned waits for it. Its answer is None where the
    install's own Python runs (a --tritonserver install or container: not known here) or the
    reading fails."""
    if not server.launcher.bundled or server.started_env is None:
        return lambda: None
    try:
        proc = subprocess.Popen(
            [str(server.launcher.tool_env().interpreter), "-I", numerics_module.__file__],
            env=server.started_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
    except OSError:
        return lambda: None

    def answer() -> dict | None:
        try:
            out, _ = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            return None
        try:
            return json.loads(out.strip().splitlines()[-1]) if proc.returncode == 0 else None
        except (ValueError, IndexError):
            return None

    return answer
