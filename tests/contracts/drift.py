"""`python -m tests.contracts.refresh --check SOURCES...`: re-derive the facts that have an extractor from upstream's
own files, at the commit each fact records and at upstream's newest release, and report per fact and ref:

- same: the extractor reads what the fact records;
- drift: it reads something else (detail: what differs);
- moved: the file is gone (or its cited lines changed) there, as the fact records (detail: where it went, which
  images still ship it);
- pinned: the cited lines changed there, and the fact says it stays at its commit (detail: why, what changed);
- gone: the file is gone there and the fact does not say so;
- unread: no source was given for that repository (detail: how to give one).
Besides the extractors (checks.py all_checks), every line range a hand-read fact cites is looked up at the newest
release (checks.py cited_checks): its text at the recorded commit, whitespace aside, must still be in the file.

Sources, any number of each:
    --mirror OWNER/NAME=GITDIR            a git directory (bare mirrors work); files are read with `git show`
    --file OWNER/NAME@COMMIT:PATH=LOCAL   one upstream file read elsewhere (a repository too large to clone);
                                          checked against the git blob id the fact records
    --wheel FILE.whl                      a package's wheel (vLLM); checked against the sha256 the fact records
    --mirrors DIR                         every DIR/OWNER+NAME/repo git directory (the fetch tool's layout)
Newest release of a mirror: its newest `v*` tag or `rYY.MM` release branch by commit date, else HEAD. For --file
sources, every commit given besides the recorded one. Exit 1 when a fact differs from its own source or is stale
at the newest release (drift or gone); 0 otherwise."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


def blob_id(data: bytes) -> str:
    """git's object id of a file's content (`git hash-object`), the same for a clone and a copy of the file."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Mirror:
    def __init__(self, git_dir: Path):
        self.git_dir = git_dir
        self._seen: dict[tuple[str, ...], str | None] = {}

    def _git(self, *args: str) -> str | None:
        if args not in self._seen:
            res = subprocess.run(
                ["git", "--git-dir", str(self.git_dir), *args], capture_output=True, text=True
            )
            self._seen[args] = res.stdout if res.returncode == 0 else None
        return self._seen[args]

    def show(self, commit: str, path: str) -> str | None:
        return self._git("show", f"{commit}:{path}")

    def resolve(self, commit: str, path: str) -> str:
        """A path as the fact wrote it (sometimes a bare file name) → its path in the tree, when unique."""
        if "/" in path or self.show(commit, path) is not None:
            return path
        hits = [
            p
            for p in (self._git("ls-tree", "-r", "--name-only", commit) or "").split()
            if p.endswith("/" + path)
        ]
        return hits[0] if len(hits) == 1 else path

    def newest(self) -> list[str]:
        refs = (
            self._git(
                "for-each-ref",
                "--sort=-refname",
                "--sort=-committerdate",
                "--format=%(refname:short)",
                "refs/tags/v*",
                "refs/heads/r*",
                "refs/remotes/origin/r*",
            )
            or ""
        ).split()
        releases = [r for r in refs if re.fullmatch(r"(origin/)?r\d\d\.\d\d|v[\d.]+", r)]
        return releases[:1] or ["HEAD"]


class Files:
    """Upstream files given one by one: (repository, commit, path) -> local copy."""

    def __init__(self):
        self.files: dict[tuple[str, str], Path] = {}

    def add(self, commit: str, path: str, local: Path) -> None:
        self.files[(commit, path)] = local

    def show(self, commit: str, path: str) -> str | None:
        local = self.files.get((commit, path))
        return local.read_text() if local else None

    def blob(self, commit: str, path: str) -> str | None:
        local = self.files.get((commit, path))
        return blob_id(local.read_bytes()) if local else None

    def commits(self, path: str) -> list[str]:
        return [c for c, p in self.files if p == path]


@dataclass(frozen=True)
class Check:
    fact: str
    repository: str
    paths: tuple[str, ...]
    commit: str
    derive: Callable[..., object]  # derive(*texts) -> value
    recorded: Callable[[], object]
    moved: str | None = None  # where the files went, when upstream deleted them (the fact says so)
    blobs: tuple[
        str, ...
    ] = ()  # git blob ids of the files at the recorded commit, for --file sources
    # a fact about one release (the image of that tag): read at its own commit only, since the newest
    # release has a fact of its own
    one_release: bool = False


def _named(items) -> dict | None:
    """A list of tensors ({'name': ...}) keyed by name, else None."""
    if isinstance(items, list) and all(isinstance(i, dict) and "name" in i for i in items):
        return {i["name"]: i for i in items}
    return None


def _diff(recorded, derived) -> str:
    if isinstance(recorded, dict) and isinstance(derived, dict):
        keys = sorted(set(recorded) | set(derived))
        parts = [
            f"{k}: {_diff(recorded.get(k), derived.get(k))}"
            for k in keys
            if recorded.get(k) != derived.get(k)
        ]
        return "; ".join(parts[:8]) + (f" (+{len(parts) - 8} more)" if len(parts) > 8 else "")
    old, new = _named(recorded), _named(derived)
    if old is not None and new is not None:
        changed = sorted(n for n in set(old) & set(new) if old[n] != new[n])
        return (
            f"upstream added {sorted(set(new) - set(old))}, removed {sorted(set(old) - set(new))}"
            + (f", changed {changed}" if changed else "")
        )
    if isinstance(recorded, list) and isinstance(derived, list):
        added, removed = (
            sorted(set(map(str, derived)) - set(map(str, recorded))),
            sorted(set(map(str, recorded)) - set(map(str, derived))),
        )
        return f"upstream added {added}, removed {removed}"
    return f"{recorded!r} -> {derived!r}"


def _judge(check: Check, ref: str, texts: list[str | None]) -> dict:
    row = {"fact": check.fact, "repository": check.repository, "ref": ref}
    if any(t is None for t in texts):
        if check.moved and ref != check.commit:
            return {**row, "status": "moved", "detail": check.moved}
        return {**row, "status": "gone"}
    value, recorded = check.derive(*texts), check.recorded()
    if value == recorded:
        return {**row, "status": "same"}
    return {**row, "status": "drift", "detail": _diff(recorded, value)}


def _run_files(check: Check, files: Files, recorded: set[str]) -> list[dict]:
    """At the recorded commit, then at every other commit given for the same files that no fact records."""
    out = []
    refs = [check.commit, *sorted({c for p in check.paths for c in files.commits(p)} - recorded)]
    for ref in refs:
        texts = [files.show(ref, p) for p in check.paths]
        if ref == check.commit and check.blobs and None not in texts:
            got = tuple(files.blob(ref, p) for p in check.paths)
            if got != check.blobs:
                out.append(
                    {
                        "fact": check.fact,
                        "repository": check.repository,
                        "ref": ref,
                        "status": "drift",
                        "detail": f"the files given are not the recorded blobs {list(check.blobs)}: {list(got)}",
                    }
                )
                continue
        if any(t is None for t in texts) and ref == check.commit:
            out.append(
                {
                    "fact": check.fact,
                    "repository": check.repository,
                    "ref": ref,
                    "status": "unread",
                    "detail": f"give --file {check.repository}@{ref}:PATH=LOCAL for {list(check.paths)}",
                }
            )
            continue
        out.append(_judge(check, ref, texts))
    return out


def check(
    mirrors: dict[str, Path],
    files: dict[str, Files] | None = None,
    wheels: list[Path] | None = None,
) -> list[dict]:
    from tests.contracts.checks import all_checks, cited_checks, wheel_checks

    files = files or {}
    out: list[dict] = []
    checks = all_checks()
    for c in checks:
        if c.repository in mirrors:
            m = Mirror(mirrors[c.repository])
            for ref in dict.fromkeys([c.commit, *([] if c.one_release else m.newest())]):
                out.append(_judge(c, ref, [m.show(ref, p) for p in c.paths]))
        elif c.repository in files:
            recorded = {
                o.commit for o in checks if o.repository == c.repository and o.paths == c.paths
            }
            out.extend(_run_files(c, files[c.repository], recorded))
        else:
            out.append(
                {
                    "fact": c.fact,
                    "repository": c.repository,
                    "status": "unread",
                    "detail": f"no source for {c.repository}: --mirror or --file",
                }
            )
    out.extend(cited_checks(mirrors))
    out.extend(wheel_checks(wheels or []))
    return out


def read_wheel(path: Path, member: str) -> str | None:
    with zipfile.ZipFile(path) as z:
        return z.read(member).decode() if member in z.namelist() else None


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def mirrors_in(root: Path) -> dict[str, Path]:
    """OWNER/NAME → git directory for every ROOT/OWNER+NAME/repo (how the fetch tool lays out its snapshots)."""
    return {
        d.name.replace("+", "/", 1): d / "repo"
        for d in sorted(root.glob("*+*"))
        if (d / "repo").is_dir()
    }


def parse(args: list[str]) -> tuple[dict[str, Path], dict[str, Files], list[Path]]:
    mirrors, files, wheels = {}, {}, []
    it = iter(args)
    for a in it:
        value = next(it, None)
        if value is None or a not in ("--mirror", "--mirrors", "--file", "--wheel"):
            raise SystemExit(
                f"usage: --check [--mirror OWNER/NAME=GITDIR | --mirrors DIR | --file "
                f"OWNER/NAME@COMMIT:PATH=LOCAL | --wheel FILE.whl]... (at {a!r})"
            )
        if a == "--mirrors":
            mirrors.update(mirrors_in(Path(value)))
        elif a == "--mirror":
            repo, _, path = value.partition("=")
            mirrors[repo] = Path(path)
        elif a == "--file":
            m = re.fullmatch(r"([^@]+)@([0-9a-f]{7,40}):([^=]+)=(.+)", value)
            if not m:
                raise SystemExit(f"--file {value!r}: expected OWNER/NAME@COMMIT:PATH=LOCAL")
            files.setdefault(m.group(1), Files()).add(m.group(2), m.group(3), Path(m.group(4)))
        else:
            wheels.append(Path(value))
    return mirrors, files, wheels


def main(args: list[str]) -> int:
    report = check(*parse(args))
    sys.stdout.write(json.dumps(report, indent=1) + "\n")
    bad = [r for r in report if r["status"] in ("drift", "gone")]
    for r in bad:
        sys.stderr.write(
            f"STALE {r['fact']} at {r.get('ref')}: {r['status']} {r.get('detail', '')}\n"
        )
    counts = {
        s: sum(r["status"] == s for r in report)
        for s in ("same", "moved", "pinned", "drift", "gone", "unread")
    }
    sys.stderr.write("facts checked: " + ", ".join(f"{n} {s}" for s, n in counts.items()) + "\n")
    return 1 if bad else 0
