"""The numerics of a server's Python side (core/numerics): the portable-numerics variables a
repository's models need set before the stubs load their math libraries, and the fingerprint the
stubs' interpreter reads with the server's environment."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tritonbuild.core import numerics as numerics_module
from tritonbuild.core.stores import is_url


def manifest_numerics(repository: str) -> dict[str, str]:
    """A local repository's portable numerics (its manifest's models[].numerics.env), which the
    server's Python side runs with wherever it serves them, as the serving image's entrypoint sets
    them. Models asking different values are refused by verify (repository/manifest.numerics_env);
    here the last one wins."""
    manifest = Path(repository) / "tritonbuild-manifest.json"
    if is_url(repository) or not manifest.is_file():
        return {}
    try:
        models = json.loads(manifest.read_text()).get("models") or []
    except (OSError, ValueError, AttributeError):
        return {}
    env: dict[str, str] = {}
    for model in models:
        env.update(((model or {}).get("numerics") or {}).get("env") or {})
    return env


def server_numerics(server) -> dict | None:
    """The fingerprint of a started EmbeddedServer's Python side: read by its stub's interpreter,
    started as the stub is (isolated, the server's environment), so the same libraries load with
    the same variables. None where the install's own Python runs (a --tritonserver install or
    container: not known here) or the reading fails."""
    if not server.launcher.bundled or server.started_env is None:
        return None
    interpreter = server.launcher.tool_env().interpreter
    try:
        done = subprocess.run(
            [str(interpreter), "-I", str(Path(numerics_module.__file__))],
            env=server.started_env,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None
