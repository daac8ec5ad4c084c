"""Which of a repository's files a published version carries, and where they lie at a target.

A version carries its version directory, its goldens, and the files beside config.pbtxt that Triton
opens when it loads the model (label files, warmup data: core src/model.cc, Model::Init and the
warmup reader, both relative to the model directory).

At the target a version's own side files, its goldens (golden-v<N>.npz) and its stored config
(config-v<N>.pbtxt), lie inside its version folder (<model>/<N>/), uploaded with it before the
switch. Triton counts every entry of a model directory other than config.pbtxt and the version
folders as part of every version's timestamp (tests/contracts/facts/kubernetes.json
poll_side_files): a file written beside the version folders marks the live version modified. Backends
open a version folder's files by name (model.py, model.onnx), so the two are never read. The built
repository keeps its goldens beside config.pbtxt (verify, the manifest, the committed examples read
them there); publish maps the paths. Targets published before kept both beside the version folders:
readers look inside first, then beside (`side_places`), and a complete version is never moved."""

from __future__ import annotations

import re

from tritonbuild.core.cas import FileEntry
from tritonbuild.errors import PublishError
from tritonbuild.publish import objects
from tritonbuild.publish.pinning import version_config_name
from tritonbuild.publish.target import Target
from tritonbuild.repository.assemble import golden_name
from tritonbuild.repository.manifest import Manifest, ManifestModel

# config.pbtxt is the switch, written by the protocol itself; config-v<N>.pbtxt and golden-v<N>.npz
# belong to their own version
_OWN = re.compile(r"^(config\.pbtxt|config-v[0-9]+\.pbtxt|golden-v[0-9]+\.npz)$")


def side_places(version: int, name: str) -> tuple[str, str]:
    """Where a version's own side file `name` lies at a target, model-directory relative, newest
    layout first: inside its version folder, then beside it (published before the files moved)."""
    return f"{version}/{name}", name


def side_names(version: int) -> tuple[str, str]:
    """The names of a version's own side files: its goldens, its stored config."""
    return golden_name(version), version_config_name(version)


def own_side_files(version: int) -> set[str]:
    """The version's own side files in their place inside its version folder."""
    return {side_places(version, name)[0] for name in side_names(version)}


def version_files(manifest: Manifest, model: ManifestModel) -> dict[str, FileEntry]:
    """Target path (model-directory relative) → entry, for the files that belong to version
    model.version: the goldens inside its version folder (`source_rel` gives the repository's
    path). A version directory holding a file of the name publish gives a side file is refused."""
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
    taken = sorted(own_side_files(model.version) & set(files))
    if taken:
        raise PublishError(
            f"{model.name}/{taken[0]} is a file of the version directory, and publish keeps the "
            "version's goldens and stored config under that name in it at the target",
            where=f"{model.name}/{taken[0]}",
            hint="rename that file (and its uses in the model), rebuild, verify, publish",
        )
    if model.goldens:
        files[_golden_at(model)] = manifest.files[model.goldens]
    return files


def _golden_at(model: ManifestModel) -> str:
    return f"{model.version}/{model.goldens[len(model.name) + 1 :]}"


def source_rel(model: ManifestModel, rel: str) -> str:
    """The repository's path (model-directory relative) of the version's file at target path rel."""
    if model.goldens and rel == _golden_at(model):
        return model.goldens[len(model.name) + 1 :]
    return rel


def in_version_dir(files: dict[str, FileEntry], version: int) -> dict[str, FileEntry]:
    """The part of a version's files inside its version directory (its goldens too, in the layout
    that puts them there): uploaded and checked before anything else of the version."""
    return {rel: entry for rel, entry in files.items() if rel.startswith(f"{version}/")}


def version_content(files: dict[str, FileEntry], version: int) -> dict[str, FileEntry]:
    """What 'never rewritten' is about: the version directory's files less the version's own side
    files, in either layout (a version published before the files beside config.pbtxt travelled
    with it, or before its goldens moved into its folder, is the same version; goldens recorded again
    for the same files are too)."""
    own = own_side_files(version)
    return {rel: entry for rel, entry in in_version_dir(files, version).items() if rel not in own}


def read_stored_config(target: Target, model: str, version: int) -> tuple[str, bytes | None]:
    """(model-directory relative path, bytes) of the config version `version` was verified with,
    stored at publish: inside its version folder, else beside it (a version published before);
    (the place inside, None) where neither holds it."""
    places = side_places(version, version_config_name(version))
    for rel in places:
        data = objects.read_text(target, target.path(model, rel))
        if data is not None:
            return rel, data
    return places[0], None
