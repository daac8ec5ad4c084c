"""The recipe patch: the winner's values as top-level recipe keys, and applying them to a recipe
file.

Applying rewrites only the top-level keys the patch sets (each key's block of lines is replaced by
one flow-style line; absent keys are appended), so the rest of the recipe, comments included, is
kept.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from tritonbuild.core.fsutil import write_atomic

KEYS = ("version", "max_batch_size", "batch_buckets", "batching", "instances")


def _flow(value) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=10_000).strip()
    return text.removesuffix("...").strip()  # a scalar document ends with an explicit end marker


def patch_text(values: dict, report: dict) -> str:
    """YAML the user can commit: a comment saying where the values come from, then the keys."""
    cmp = report.get("comparison", {})
    lines = [
        f"# tritonbuild tune ({report['search']} search, {report['measurements_made']} "
        f"measurements): {report['winner']['label']} for model {report['model']}",
        f"# loads {', '.join(report['loads'])}; SLA p99 {report['sla_p99_ms']} ms; "
        f"bit-exact checked: {report['verified_with_goldens']}",
    ]
    for load, c in cmp.items():
        lines.append(
            f"#   {load}: {c['tuned']['throughput']:.0f} req/s vs default "
            f"{c['default']['throughput']:.0f} "
            f"({c['ratio']}x), p99 {c['tuned']['p99_ms']:.2f} ms"
        )
    bits = report.get("served_bits") or {}
    if bits.get("changed"):
        lines.append(f"# served bits change: {bits['text']}")
    for k in KEYS:
        if k in values:
            lines.append(f"{k}: {_flow(values[k])}")
    return "\n".join(lines) + "\n"


def parse_patch(text: str) -> dict:
    data = yaml.safe_load(text) or {}
    unknown = set(data) - set(KEYS)
    if unknown:
        raise ValueError(f"unknown keys in a tune patch: {sorted(unknown)}")
    return data


def apply_patch(recipe: Path, values: dict) -> str:
    """Rewrite recipe's top-level keys with values; returns the new text (written atomically)."""
    text = Path(recipe).read_text()
    lines = text.splitlines(keepends=True)
    for key in KEYS:
        if key not in values:
            continue
        new = f"{key}: {_flow(values[key])}\n"
        start = next(
            (i for i, line in enumerate(lines) if re.match(rf"^{re.escape(key)}\s*:", line)), None
        )
        if start is None:
            if lines and not lines[-1].endswith("\n"):
                lines[-1] += "\n"
            lines.append(new)
            continue
        end = start + 1
        while end < len(lines) and (
            lines[end].startswith((" ", "\t", "-")) or not lines[end].strip()
        ):
            end += 1
        while (
            end > start + 1 and not lines[end - 1].strip()
        ):  # keep blank lines that separate blocks
            end -= 1
        lines[start:end] = [new]
    out = "".join(lines)
    write_atomic(Path(recipe), out.encode())
    return out
