"""Every recorded fact names where upstream says it: repository, commit sha (never a description), path and line
(or the package, version and wheel it was read from); see README.md here."""

from __future__ import annotations

import json
import re

from tests.contracts.facts import paths

SHA = re.compile(r"[0-9a-f]{40}")
WHERE = re.compile(r"\d|^whole file|^per value")  # a line, a range, or the extractor's whole file
# Read through a code index that names no commit for the version read, and no other stored version with a commit
# holds the content (each fact says why in its source's why_no_commit; README.md, 'What is checked').
NO_COMMIT_HERE = {
    "llm_args.json.source",
    "llm_args.json.speculative_config.source",
    "llm_args.json.speculative_config.at_main.source",
    "llm_args.json.route_keys.source",
    "trtllm_quantization.json.llmapi_reads.newer.source",
    "trtllm_speculative.json.medusa.heads_dir.weights.newer_source",
}


def _sources(node, where: str):
    """(where, source, the fact around it) for every source a fact records: keys named source / *_source."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "source" or key.endswith("_source"):
                many = isinstance(value, list)
                for i, src in enumerate(value if many else [value]):
                    if isinstance(src, dict) and ("repository" in src or "package" in src):
                        yield f"{where}.{key}" + (f"[{i}]" if many else ""), src, node
            else:
                yield from _sources(value, f"{where}.{key}")
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from _sources(item, f"{where}[{i}]")


def _problem(src: dict, fact) -> str | None:
    """What the source lacks; entries that carry their own file:line ('where', 'line') count as lines. A package
    source (no repository commit) is pinned by its wheel's sha256 and names version and path."""
    text = json.dumps(fact)
    entries_have_lines = bool(re.search(r'\.(cc|h|py|md):\d|"line": \d', text))
    if not SHA.fullmatch(str(src.get("commit", ""))):
        if "package" not in src:
            return f"commit {src.get('commit')!r} is not a 40-hex sha"
        if not re.fullmatch(r"[0-9a-f]{64}", str(src.get("wheel_sha256", ""))):
            return "a wheel source needs its sha256"
        if not (src.get("version") and (src.get("path") or entries_have_lines)):
            return "a package source needs version and path"
    if not src.get("path") and not entries_have_lines:
        return "no path"
    line = str(src.get("line", src.get("lines", "")))
    if src.get("at"):  # the declaration it was read at, where a code index gives no line numbers
        return None
    if (
        not WHERE.search(line)
        and not re.search(r":\d", str(src.get("path", "")))
        and not entries_have_lines
    ):
        return "no line"
    return None


def test_every_fact_names_repository_commit_path_and_line():
    problems = []
    for path in paths():
        for where, src, fact in _sources(json.loads(path.read_text()), path.name):
            problem = _problem(src, fact)
            excused = (
                where in NO_COMMIT_HERE
                and problem
                and problem.startswith("commit")
                and src.get("why_no_commit")
            )
            if problem and not excused:
                problems.append(f"{where}: {problem}")
    assert not problems, "\n".join(problems)


def test_each_source_excused_from_a_commit_still_lacks_one():
    """A source re-read at a commit leaves NO_COMMIT_HERE: an entry naming a source that now has a commit (or no
    longer exists) fails here."""
    found = {
        where: src
        for path in paths()
        for where, src, _ in _sources(json.loads(path.read_text()), path.name)
    }
    assert set(found) >= NO_COMMIT_HERE, NO_COMMIT_HERE - set(found)
    assert not [w for w in NO_COMMIT_HERE if SHA.fullmatch(str(found[w].get("commit", "")))]


def test_the_rule_catches_a_description_for_a_commit_and_a_missing_line():
    good = {"repository": "o/r", "commit": "a" * 40, "path": "x.py", "lines": "3-9"}
    assert _problem(good, {}) is None
    assert "40-hex" in _problem({**good, "commit": "(1.x; read via the index)"}, {})
    assert _problem({k: v for k, v in good.items() if k != "lines"}, {}) == "no line"
    assert (
        _problem({"package": "vllm", "version": "0.11.1", "commit": "439368496", "path": "p"}, {})
        == "a wheel source needs its sha256"
    )


def test_facts_about_files_deleted_upstream_say_so_and_which_images_ship_them():
    """TensorRT-LLM deleted the converters, quantize.py, trtllm-build and the Triton backend from its main; the
    facts read from them say so, and name the images (the whole trtllm table) whose release still has them."""
    from tests.contracts.facts import load

    images = load("triton_images")["images"]
    span = f"{min(images)}-{max(images)}"
    scripts = load("trtllm_scripts")
    note = scripts["on_main"]
    assert note["status"] == "deleted" and span in note["still_shipped_by"]
    for name, s in scripts["scripts"].items():
        for src in s["source"] if isinstance(s["source"], list) else [s["source"]]:
            if src["repository"] == "NVIDIA/TensorRT-LLM" and "plugin.py" not in src["path"]:
                assert src["path"].startswith(tuple(note["paths"])), name
    moved = load("tensorrtllm_backend")["templates"]["moved"]["note"]
    assert "#15907" in moved and f"({span}" in moved
