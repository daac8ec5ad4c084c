"""The vLLM facts behind the invariance table (builder/backends/vllm/invariant/table.py ROWS), derived whole:
`python -m tests.contracts.vllm_invariance_facts WHEEL SDIST_DIR [--torch TORCH_WHEEL] [--write]`.

WHEEL: `pip download vllm==0.22.0 --no-deps --only-binary :all:`; SDIST_DIR: the same release's sdist unpacked
(`pip download --no-deps --no-binary :all: --no-clean vllm==0.22.0` leaves it in pip's build directory even though
vLLM's metadata step fails without torch), for tests/ and docs/, which the wheel does not ship. For each cite of a row,
the file's sha256 and one line of its cited range (the longest, as an anchor that a later release moves or changes),
written to facts/vllm_invariance.json. A SDIST_DIR that does not exist keeps the sdist facts recorded. The table's
torch cites ("torch 2.11.0 PATH:LINES": Inductor as vLLM 0.22's serving image runs it) likewise from TORCH_WHEEL
(`pip download torch==2.11.0 --no-deps --only-binary :all: --python-version 3.12 --platform manylinux_2_28_x86_64`),
under "torch_facts". Standard library only."""

from __future__ import annotations

import hashlib
import json
import sys
import zipfile
from pathlib import Path

FACTS = Path(__file__).parent / "facts" / "vllm_invariance.json"
WHEEL_PREFIX, SDIST_PREFIX = "vllm 0.22.0 ", "vllm 0.22.0 sdist "
TORCH_PREFIX = "torch 2.11.0 "


def vllm_cites(rows) -> list[str]:
    """Every cite of the rows that is vLLM's, in row order, once."""
    seen: dict[str, None] = {}
    for row in rows:
        for cite in row.cites:
            if cite.startswith(WHEEL_PREFIX):
                seen[cite] = None
    return list(seen)


def torch_cites(rows) -> list[str]:
    """Every cite of the rows that is torch's, in row order, once."""
    return list({c: None for row in rows for c in row.cites if c.startswith(TORCH_PREFIX)})


def derive_torch(wheel: Path, rows) -> list[dict]:
    """The torch cites' facts, read from the torch wheel (the same fields as derive's)."""
    zf = zipfile.ZipFile(wheel)
    out = []
    for cite in torch_cites(rows):
        path, _, lines = cite[len(TORCH_PREFIX) :].partition(":")
        first, _, last = lines.partition("-")
        out.append(
            fact(cite, "torch wheel", path, int(first), int(last or first), zf.read(path), rows)
        )
    return out


def split(cite: str) -> tuple[str, str, int, int]:
    """(wheel | sdist, path, first line, last line) of a cite."""
    kind = "sdist" if cite.startswith(SDIST_PREFIX) else "wheel"
    where = cite[len(SDIST_PREFIX if kind == "sdist" else WHEEL_PREFIX) :]
    path, _, lines = where.partition(":")
    first, _, last = lines.partition("-")
    return kind, path, int(first), int(last or first)


def anchor(text: str, first: int, last: int) -> str:
    rows = [line.strip() for line in text.splitlines()[first - 1 : last]]
    return max(rows, key=len)[:120]


def fact(cite: str, kind: str, path: str, first: int, last: int, data: bytes, rows) -> dict:
    """One cite's recorded fact: where, the file's sha256, the range's anchor line, the rows citing it."""
    return {
        "cite": cite,
        "from": kind,
        "where": f"{path}:{first}" + (f"-{last}" if last != first else ""),
        "file_sha256": hashlib.sha256(data).hexdigest(),
        "text": anchor(data.decode(), first, last),
        "rows": [r.id for r in rows if cite in r.cites],
    }


def derive(wheel: Path, sdist: Path, rows, wheel_only: bool = False) -> list[dict]:
    zf = zipfile.ZipFile(wheel)
    entries = []
    for cite in vllm_cites(rows):
        kind, path, first, last = split(cite)
        if wheel_only and kind == "sdist":
            continue
        data = zf.read(path) if kind == "wheel" else (sdist / path).read_bytes()
        entries.append(fact(cite, kind, path, first, last, data, rows))
    return entries


def main(args: list[str]) -> int:
    from tritonbuild.backends.vllm.invariant.table import ROWS

    wheel, sdist = Path(args[0]), Path(args[1])
    doc = json.loads(FACTS.read_text())
    facts = derive(wheel, sdist, ROWS, wheel_only=not sdist.is_dir())
    if not sdist.is_dir():  # the sdist facts as recorded, in the table's order
        kept = {f["cite"]: f for f in doc["facts"] if f["from"] == "sdist"}
        facts += [kept[c] for c in vllm_cites(ROWS) if c in kept]
        order = {c: i for i, c in enumerate(vllm_cites(ROWS))}
        facts.sort(key=lambda f: order[f["cite"]])
    doc["facts"] = facts
    if "--torch" in args:
        torch_wheel = Path(args[args.index("--torch") + 1])
        version = zipfile.ZipFile(torch_wheel).read("torch/version.py").decode()
        doc["torch_source"] = {
            "repository": "pytorch/pytorch",
            "package": "torch",
            "version": next(
                v.split("'")[1] for v in version.splitlines() if v.startswith("__version__")
            ),
            "commit": next(
                v.split("'")[1] for v in version.splitlines() if v.startswith("git_version")
            ),
            "commit_from": "torch/version.py git_version in the wheel",
            "wheel": torch_wheel.name,
            "wheel_sha256": hashlib.sha256(torch_wheel.read_bytes()).hexdigest(),
        }
        doc["torch_facts"] = derive_torch(torch_wheel, ROWS)
    json.dump(doc["facts"], sys.stdout, indent=1)
    if "--write" in args:
        FACTS.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
