"""Which of a repository's files a published version carries: its version directory, its goldens,
and the files beside config.pbtxt that Triton opens when it loads the model (label files, warmup
data: core src/model.cc, Model::Init and the warmup reader, both relative to the model
directory)."""

from __future__ import annotations

import re

from tritonbuild.core.cas import FileEntry
from tritonbuild.repository.manifest import Manifest, ManifestModel

# config.pbtxt is the switch, written by the protocol itself; config-v<N>.pbtxt and golden-v<N>.npz
# belong to their own version
_OWN = re.compile(r"^(config\.pbtxt|config-v[0-9]+\.pbtxt|golden-v[0-9]+\.npz)$")


def version_files(manifest: Manifest, model: ManifestModel) -> dict[str, FileEntry]:
    """Model-directory relative path → entry, for the files that belong to version model.version."""
    files = {}
    for key, entry in manifest.files.items():
        if not key.startswith(f"{model.name}/"):
            continue
        rel = key[len(model.name) + 1 :]
        top = rel.split("/", 1)[0]
        if (
            top == str(model.version)
            or ("/" in rel and not top.isdigit())
            or ("/" not in rel and not _OWN.match(rel))
        ):
            files[rel] = entry
    if model.goldens:
        files[model.goldens[len(model.name) + 1 :]] = manifest.files[model.goldens]
    return files


def in_version_dir(files: dict[str, FileEntry], version: int) -> dict[str, FileEntry]:
    """The part of a version's files inside its version directory: what 'never rewritten' is about
    (a version published before the files beside config.pbtxt travelled with it is the same
    version)."""
    return {rel: entry for rel, entry in files.items() if rel.startswith(f"{version}/")}
