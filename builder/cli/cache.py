"""cache ls | gc | verify."""

from __future__ import annotations

import time
from pathlib import Path

import click
from rich.table import Table

from tritonbuild import api
from tritonbuild.cli.app import app
from tritonbuild.cli.common import _json, cache_dir_option, json_option, main, print_table


@main.group("cache")
def cache_group() -> None:
    """Inspect and maintain the local build cache."""


def _size(text: str) -> int:
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    normalized = text.strip().upper().removesuffix("B").removesuffix("I")
    num, unit = (
        (normalized[:-1], normalized[-1])
        if normalized and normalized[-1] in units
        else (normalized, "")
    )
    try:
        return int(float(num) * units[unit])
    except ValueError:
        raise click.BadParameter(
            f"{text!r}: expected a size like 500M or 20G", param_hint="--max-size"
        ) from None


@cache_group.command("ls")
@cache_dir_option
@json_option
def cache_ls_command(cache_dir: Path | None, as_json: bool) -> None:
    """Cached steps: key, kind, model, size, last use."""
    store = api.cache_store(cache_dir)
    rows = [
        {
            "key": key,
            "kind": record.get("kind"),
            "model": record.get("model"),
            "files": len(record.get("files", {})),
            "bytes": sum(entry["size"] for entry in record.get("files", {}).values()),
            "last_used": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(mtime)),
        }
        for key, record, mtime in store.records()
    ]
    if as_json:
        _json({"cache": str(store.root), "entries": rows})
        return
    table = Table("key", "kind", "model", "files", "bytes", "last used", box=None)
    for row in rows:
        table.add_row(
            row["key"][:16],
            row["kind"],
            row["model"],
            str(row["files"]),
            str(row["bytes"]),
            row["last_used"],
        )
    print_table(table)
    app().out.print(f"{len(rows)} entries in {store.root}")


@cache_group.command("gc")
@click.option(
    "--max-size",
    required=True,
    metavar="SIZE",
    help="Keep at most this much (e.g. 20G), least recently used entries go first.",
)
@cache_dir_option
@json_option
def cache_gc_command(max_size: str, cache_dir: Path | None, as_json: bool) -> None:
    """Shrink the cache to --max-size."""
    result = api.cache_gc(_size(max_size), cache_dir)
    if as_json:
        _json(result)
    else:
        removed = ", ".join(f"{what} {size}" for what, size in result.removed_bytes.items() if size)
        root = api.cache_store(cache_dir).root
        app().out.print(
            f"evicted {len(result.evicted_records)} entries, freed {result.freed_bytes} bytes"
            + (f" ({removed})" if removed else "")
            + f"; kept {result.kept_records} entries, "
            f"{result.kept_bytes} bytes in {root} (blobs {result.kept_blob_bytes})"
        )


@cache_group.command("verify")
@cache_dir_option
@json_option
def cache_verify_command(cache_dir: Path | None, as_json: bool) -> None:
    """Re-hash every cached file; corrupt ones are evicted (and rebuilt by the next build)."""
    result = api.cache_verify(cache_dir)
    if as_json:
        _json(result)
    else:
        app().out.print(
            f"{result.blobs_checked} files checked, {len(result.corrupt_blobs)} corrupt, "
            f"{len(result.evicted_records)} entries evicted"
        )
