"""`python -m tests.contracts.refresh --check --mirror OWNER/NAME=GITDIR ...`: re-derive the facts that have an
extractor from upstream's own files, at the commit each fact records and at the repository's newest release
(its newest v* tag, else its HEAD), and report per fact: same, drift (what differs), gone (the file no longer
exists there) or unread (no mirror given). Git directories only (bare mirrors work): files are read with
`git show COMMIT:PATH`, nothing is checked out. Exit 1 when a fact differs from its own recorded source."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.contracts import refresh
from tests.contracts.facts import load


class Mirror:
    def __init__(self, git_dir: Path):
        self.git_dir = git_dir

    def _git(self, *args: str) -> str | None:
        res = subprocess.run(["git", "--git-dir", str(self.git_dir), *args], capture_output=True, text=True)
        return res.stdout if res.returncode == 0 else None

    def show(self, commit: str, path: str) -> str | None:
        return self._git("show", f"{commit}:{path}")

    def newest(self) -> str:
        tags = (self._git("tag", "--list", "v*", "--sort=-creatordate") or "").split()
        return tags[0] if tags else "HEAD"


def _diff(recorded, derived) -> str:
    if isinstance(recorded, dict) and isinstance(derived, dict):
        keys = sorted(set(recorded) | set(derived))
        parts = [f"{k}: {recorded.get(k)!r} -> {derived.get(k)!r}" for k in keys if recorded.get(k) != derived.get(k)]
        return "; ".join(parts[:8]) + (f" (+{len(parts) - 8} more)" if len(parts) > 8 else "")
    added, removed = sorted(set(derived) - set(recorded)), sorted(set(recorded) - set(derived))
    return f"upstream added {added}, removed {removed}"


def _images(text: str) -> dict:
    facts = load("triton_images")
    table = refresh.compatibility(text)
    oldest = min(facts["images"])
    return {"images": {t: {k: v for k, v in r.items() if k != "line"} for t, r in
                       table["trtllm-python-py3"].items() if t >= oldest},
            "vllm_images": {t: {k: v for k, v in r.items() if k != "line"} for t, r in
                            table["vllm-python-py3"].items() if t >= oldest}}


def _recorded_images() -> dict:
    facts = load("triton_images")
    strip = lambda rows: {t: {k: v for k, v in r.items() if k != "line"} for t, r in rows.items()}  # noqa: E731
    return {"images": strip(facts["images"]), "vllm_images": strip(facts["vllm_images"])}


def _genai_perf_inputs(text: str) -> list[str]:
    body = text[text.index("class TensorRTLLMConverter"):]
    return sorted(set(re.findall(r'payload\["(\w+)"\]', body)) | set(re.findall(r'"(\w+)": \[', body)) - {"data"})


def _recorded_genai_perf() -> list[str]:
    g = load("clients")["genai_perf"]
    return sorted({n for kind in ("default", "streaming", "deterministic") for n in g[kind]})


def _openai_trtllm_inputs(text: str) -> list[str]:
    body = text[text.index("def _create_trtllm_generate_request"):]
    body = body[:body.index("\ndef ", 1)]
    names = set(re.findall(r'inputs\["(\w+)"\]', body))
    return sorted(names | ({"exclude_input_in_output"} if "inputs[echo_tensor_name]" in body else set()))


def _recorded_openai() -> list[str]:
    o = load("clients")["openai_frontend"]
    return sorted(set(o["always"]) | set(o["optional"]))


def _cpp(mirror: Mirror, commit: str) -> dict | None:
    texts = [mirror.show(commit, s["path"]) for s in load("tensorrtllm_backend")["cpp_parameters"]["source"]]
    if any(t is None for t in texts):
        return None
    merged = {"unguarded": set(), "guarded": set()}
    for t in texts:
        part = refresh.cpp_parameters(t)
        merged["unguarded"] |= set(part["unguarded"])
        merged["guarded"] |= set(part["guarded"])
    return {"unguarded": sorted(merged["unguarded"])}


# (fact, repository, path, commit recorded, derive(text) -> value, recorded value)
FileCheck = tuple[str, str, str, str, Callable[[str], object], Callable[[], object]]


def file_checks() -> list[FileCheck]:
    images, clients = load("triton_images"), load("clients")
    return [
        ("triton_images", images["source"]["repository"], images["source"]["path"], images["source"]["commit"],
         _images, _recorded_images),
        ("clients.genai_perf", clients["genai_perf"]["source"]["repository"], clients["genai_perf"]["source"]["path"],
         clients["genai_perf"]["source"]["commit"], _genai_perf_inputs, _recorded_genai_perf),
        ("clients.openai_frontend", clients["openai_frontend"]["source"]["repository"],
         clients["openai_frontend"]["source"]["path"], clients["openai_frontend"]["source"]["commit"],
         _openai_trtllm_inputs, _recorded_openai),
    ]


def _judge(name: str, ref: str, value, recorded) -> dict:
    if value is None:
        return {"fact": name, "ref": ref, "status": "gone"}
    if value == recorded:
        return {"fact": name, "ref": ref, "status": "same"}
    return {"fact": name, "ref": ref, "status": "drift", "detail": _diff(recorded, value)}


def check(mirrors: dict[str, Path]) -> list[dict]:
    out = []
    for name, repo, path, commit, derive, recorded in file_checks():
        if repo not in mirrors:
            out.append({"fact": name, "status": "unread", "detail": f"no mirror of {repo}"})
            continue
        m = Mirror(mirrors[repo])
        for ref in (commit, m.newest()):
            text = m.show(ref, path)
            out.append(_judge(name, ref, None if text is None else derive(text), recorded()))
    cpp_repo = load("tensorrtllm_backend")["cpp_parameters"]["source"][0]
    if cpp_repo["repository"] in mirrors:
        m = Mirror(mirrors[cpp_repo["repository"]])
        recorded = {"unguarded": sorted(load("tensorrtllm_backend")["cpp_parameters"]["unguarded"])}
        for ref in (cpp_repo["commit"], m.newest()):
            out.append(_judge("tensorrtllm_backend.cpp_parameters", ref, _cpp(m, ref), recorded))
    else:
        out.append({"fact": "tensorrtllm_backend.cpp_parameters", "status": "unread",
                    "detail": f"no mirror of {cpp_repo['repository']}"})
    return out


def main(args: list[str]) -> int:
    mirrors = {}
    for i, a in enumerate(args):
        if a == "--mirror":
            repo, _, path = args[i + 1].partition("=")
            mirrors[repo] = Path(path)
    report = check(mirrors)
    sys.stdout.write(json.dumps(report, indent=1) + "\n")
    recorded_commits = {c[3] for c in file_checks()} | \
        {load("tensorrtllm_backend")["cpp_parameters"]["source"][0]["commit"]}
    wrong = [r for r in report if r["status"] != "same" and r.get("ref") in recorded_commits]
    return 1 if wrong else 0
