"""A model directory read once (issue 44, item 4): its config.pbtxt as written and parsed, its
numeric versions and the names it holds. verify reads each model of a repository once into a
ModelDirs and hands the ModelDir to every load rule, stand-in and check instead of the path, so
none of them opens config.pbtxt again. Nothing here changes a ModelDir: the parsed config is shared,
and a caller that changes a config parses its own copy from `raw` (the stand-ins do)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tritonbuild.triton.config import CONFIG_FILE, ConfigParseError, config_bytes, parse

VERSION_RE = re.compile(r"^[1-9][0-9]*$")  # the version directories Triton serves


@dataclass(frozen=True)
class ModelDir:
    """One model directory as read. raw None: no config.pbtxt (Triton autocompletes one); config
    None with error: a config.pbtxt that cannot be read or is not a ModelConfig (error says why,
    with line:col from the parser); exists False: no such directory (an ensemble step that is
    missing)."""

    path: Path
    exists: bool = False
    raw: bytes | None = None
    config: object | None = None  # the parsed ModelConfig (never changed: see the module doc)
    error: str | None = None
    unreadable: bool = False  # error is the file's (OSError), not the parser's
    dirs: tuple[str, ...] = ()  # the subdirectories' names, sorted
    files: tuple[str, ...] = ()  # the regular files' names beside config.pbtxt, sorted

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def versions(self) -> list[int]:
        """The numeric version directories Triton serves, in the directories' name order."""
        return [int(d) for d in self.dirs if VERSION_RE.match(d)]

    @classmethod
    def given(cls, model_dir: Path | ModelDir) -> ModelDir:
        """model_dir as read: a ModelDir as it is, a path read now."""
        return model_dir if isinstance(model_dir, ModelDir) else cls.read(model_dir)

    @classmethod
    def read(cls, path: Path) -> ModelDir:
        """path read once: the directory's entries and config.pbtxt (one open)."""
        path = Path(path)
        if not path.is_dir():
            return cls(path)
        dirs, files = [], []
        for child in sorted(path.iterdir()):
            if child.is_dir():
                dirs.append(child.name)
            elif child.is_file() and child.name != CONFIG_FILE:
                files.append(child.name)
        found = {"path": path, "exists": True, "dirs": tuple(dirs), "files": tuple(files)}
        try:
            raw = config_bytes(path)
        except FileNotFoundError:
            return cls(**found)
        except OSError as e:
            return cls(**found, error=str(e.strerror or e), unreadable=True)
        try:
            return cls(**found, raw=raw, config=parse(raw))
        except ConfigParseError as e:
            return cls(**found, raw=raw, error=str(e))


class ModelDirs:
    """The model directories of one repository, each read on first use and then kept: the models
    verify checks and the ensemble steps they name are read once however many rules ask."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self._read: dict[str, ModelDir] = {}

    def __getitem__(self, name: str) -> ModelDir:
        if name not in self._read:
            self._read[name] = ModelDir.read(self.root / name)
        return self._read[name]

    def config(self, name: str):
        """The named model's parsed config, or None (absent, unreadable, not a ModelConfig, or a
        name that is not a model directory: '', '..', a path)."""
        if not name or "/" in name or name in (".", ".."):
            return None
        return self[name].config

    @classmethod
    def of(cls, model_dir: Path | ModelDir, models: ModelDirs | None = None) -> ModelDirs:
        """models, or a ModelDirs of model_dir's repository holding model_dir as given."""
        if models is not None:
            return models
        path = model_dir.path if isinstance(model_dir, ModelDir) else Path(model_dir)
        out = cls(path.parent)
        if isinstance(model_dir, ModelDir):
            out._read[model_dir.name] = model_dir
        return out
