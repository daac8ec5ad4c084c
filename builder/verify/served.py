"""What a given server serves under a model's name, compared with the repository's config and
version."""

from __future__ import annotations

import functools
from pathlib import Path

from tritonbuild.repository.manifest import ManifestModel
from tritonbuild.triton.client import Server
from tritonbuild.triton.model_dir import ModelDir

TIMEOUT_S = 30.0


def _served_projection(config) -> dict:
    def tensors(tensor_list) -> list:
        return [
            (
                tensor.name,
                type(config)
                .DESCRIPTOR.fields_by_name["input"]
                .message_type.fields_by_name["data_type"]
                .enum_type.values_by_number[tensor.data_type]
                .name,
                list(tensor.dims),
            )
            for tensor in tensor_list
        ]

    return {
        "max_batch_size": config.max_batch_size,
        "inputs": tensors(config.input),
        "outputs": tensors(config.output),
        "backend": config.backend or config.platform,
    }


def _identity(url: str, name: str, mine: dict, theirs: dict) -> dict:
    """What the server says it loaded under the name: its version, the model's ready versions
    (repository index), and a digest of the served config's {backend, max_batch_size, inputs,
    outputs} beside ours (Triton reports no digest of the model's files: the bytes are proved by the
    goldens, bit for bit)."""
    from tritonbuild.core.hashing import sha256_json

    try:
        with Server(url, TIMEOUT_S) as asked:
            server, index = asked.metadata(), asked.index()
    except Exception:  # noqa: BLE001 - the identity is then unknown; the comparison above stands
        server, index = {}, []

    def as_json(projection):
        return {
            k: [list(t) for t in v] if isinstance(v, list) else v for k, v in projection.items()
        }

    return {
        "server": f"{server.get('name', 'triton')} {server.get('version', '?')}",
        "name": name,
        "ready_versions": sorted(
            int(entry["version"])
            for entry in index
            if entry.get("name") == name and entry.get("state") == "READY" and entry.get("version")
        ),
        "config_sha256": sha256_json(as_json(theirs)),
        "ours_config_sha256": sha256_json(as_json(mine)),
    }


def served_differences(
    url: str, model_dir: Path | ModelDir, model: ManifestModel
) -> tuple[list[str], dict | None]:
    """What the server at url serves under the model's name, compared with OUT's config.pbtxt (the
    model's directory as read; a repository root: its model.name read now) and
    version: a shared staging server may hold another build of the same model (GET
    v2/models/<model>/config, .../versions/<v>/ready); and the served identity (_identity; None when
    the config could not be read)."""
    from google.protobuf import json_format

    from tritonbuild.triton.config import ConfigParseError, model_config_pb2

    try:
        with Server(url, TIMEOUT_S) as asked:
            served = json_format.ParseDict(
                asked.model_config(model.name),
                model_config_pb2().ModelConfig(),
                ignore_unknown_fields=True,
            )
    except Exception as e:  # noqa: BLE001 - unreachable, refused, not a ModelConfig: reported
        return [f"cannot read its config ({e})"], None
    if isinstance(model_dir, Path):
        model_dir = ModelDir.read(model_dir / model.name)
    if model_dir.config is None:  # the static checks fail on it first
        raise ConfigParseError(model_dir.error or "config.pbtxt is missing")
    mine = _served_projection(model_dir.config)
    theirs = _served_projection(served)
    if not (mine["backend"] and theirs["backend"]) or theirs["backend"] in (
        served.platform,
        served.backend,
    ):
        mine.pop("backend"), theirs.pop("backend")
    out = [f"{k}: served {theirs[k]}, this OUT {mine[k]}" for k in mine if mine[k] != theirs.get(k)]
    if not version_ready(url, model):
        out.append(f"version {model.version} is not ready there")
    return out, _identity(url, model.name, mine, theirs)


def version_ready(url: str, model: ManifestModel) -> bool:
    """Whether the server at url serves this version (GET v2/models/<model>/versions/<v>/ready
    answers 200)."""
    try:
        with Server(url, TIMEOUT_S) as asked:
            return asked.version_ready(model.name, model.version)
    except Exception:  # noqa: BLE001 - not reachable: not served
        return False


def served_check(model: ManifestModel, report, route: str, log: Path | None):
    """report with what the server's log says its runtime chose for the model (the backend's
    served_check: e.g. an invariant model's kernels): problems fail it, a note says what could not
    be checked. Only models that loaded and were asked live."""
    from tritonbuild.backends import REGISTRY

    backend = REGISTRY.for_manifest(model.backend)
    if not route.startswith("live-") or not report.loaded or backend is None:
        return report
    text = log.read_text(errors="replace") if log is not None and log.is_file() else None
    problems, note = backend.served_check(model, text)
    if not problems and note is None:
        return report
    return report.model_copy(
        update={
            "served_problems": problems,
            "passed": report.passed and not problems,
            "notes": [*report.notes, *([note] if note else [])],
        }
    )


LOOPBACK = ("127.0.0.1", "localhost", "::1", "0.0.0.0")


def host_numerics(url: str | None, model: ManifestModel) -> dict | None:
    """The numerics of a given server's model whose bits its host decides (a backend that only runs
    in a server: GPU, driver, CUDA, the serving engine), where the server runs on this host (a
    loopback URL): this process's fingerprint with its GPUs, driver and engines, marked as read
    beside the server, not in it. None otherwise (Triton reports none of it)."""
    from urllib.parse import urlparse

    from tritonbuild.backends import REGISTRY

    backend = REGISTRY.for_manifest(model.backend)
    if backend is None or backend.route != "live-server":
        return None
    if not url or urlparse(url).hostname not in LOOPBACK:
        return None
    return {**_this_host(), "read": "beside the server (verify's process, same host)"}


@functools.cache
def _this_host() -> dict:
    """This process's fingerprint with torch's GPUs: read once (importing torch, asking CUDA), not
    once per model."""
    from tritonbuild.core.numerics import fingerprint

    return fingerprint(("torch",))
