"""What a given server serves under a model's name, compared with the repository's config and version."""

from __future__ import annotations

from pathlib import Path

from tritonbuild.repository.manifest import ManifestModel


def _served_projection(config) -> dict:
    def tensors(tensor_list) -> list:
        return [(tensor.name, type(config).DESCRIPTOR.fields_by_name["input"].message_type.fields_by_name["data_type"]
                 .enum_type.values_by_number[tensor.data_type].name, list(tensor.dims)) for tensor in tensor_list]

    return {"max_batch_size": config.max_batch_size, "inputs": tensors(config.input), "outputs": tensors(config.output),
            "backend": config.backend or config.platform}


def _get(url: str, method: str = "GET") -> dict | list:
    import json
    import urllib.request

    request = urllib.request.Request(url, method=method, data=b"{}" if method == "POST" else None)
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def _identity(url: str, name: str, mine: dict, theirs: dict) -> dict:
    """What the server says it loaded under the name: its version, the model's ready versions (repository index),
    and a digest of the served config's {backend, max_batch_size, inputs, outputs} beside ours (Triton reports no
    digest of the model's files: the bytes are proved by the goldens, bit for bit)."""
    import urllib.error

    from tritonbuild.core.hashing import sha256_json

    try:
        server = _get(f"{url}/v2")
        index = _get(f"{url}/v2/repository/index", "POST")
    except (urllib.error.URLError, OSError, ValueError):
        server, index = {}, []
    as_json = lambda projection: {k: [list(t) for t in v] if isinstance(v, list) else v  # noqa: E731
                                  for k, v in projection.items()}
    return {"server": f"{server.get('name', 'triton')} {server.get('version', '?')}", "name": name,
            "ready_versions": sorted(int(entry["version"]) for entry in index if entry.get("name") == name
                                     and entry.get("state") == "READY" and entry.get("version")),
            "config_sha256": sha256_json(as_json(theirs)), "ours_config_sha256": sha256_json(as_json(mine))}


def served_differences(url: str, root: Path, model: ManifestModel) -> tuple[list[str], dict | None]:
    """What the server at url serves under the model's name, compared with OUT's config.pbtxt and version: a shared
    staging server may hold another build of the same model (GET v2/models/<model>/config, .../versions/<v>/ready);
    and the served identity (_identity; None when the config could not be read)."""
    import json
    import urllib.error
    import urllib.request

    from google.protobuf import json_format

    from tritonbuild.triton.config import model_config_pb2, parse

    try:
        with urllib.request.urlopen(f"{url}/v2/models/{model.name}/config", timeout=30) as response:
            served = json_format.ParseDict(json.loads(response.read()), model_config_pb2().ModelConfig(),
                                           ignore_unknown_fields=True)
    except (urllib.error.URLError, OSError, ValueError, json_format.ParseError) as e:
        return [f"cannot read its config ({e})"], None
    mine = _served_projection(parse((root / model.name / "config.pbtxt").read_bytes()))
    theirs = _served_projection(served)
    if not (mine["backend"] and theirs["backend"]) or theirs["backend"] in (served.platform, served.backend):
        mine.pop("backend"), theirs.pop("backend")
    out = [f"{k}: served {theirs[k]}, this OUT {mine[k]}" for k in mine if mine[k] != theirs.get(k)]
    if not version_ready(url, model):
        out.append(f"version {model.version} is not ready there")
    return out, _identity(url, model.name, mine, theirs)


def version_ready(url: str, model: ManifestModel) -> bool:
    """Whether the server at url serves this version (GET v2/models/<model>/versions/<v>/ready answers 200)."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"{url}/v2/models/{model.name}/versions/{model.version}/ready", timeout=30):
            return True
    except (urllib.error.URLError, OSError, ValueError):
        return False
