"""The seams ARCHITECTURE.md names, guarded: one module speaks raw HTTP to Triton (the endpoints tritonclient has
no call for), one reads and parses config.pbtxt, one maps dynamic batching between recipe and config. Each test
also breaks its seam on purpose (a copy of a module with the forbidden call added) and sees the check fail."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

SOURCE = ROOT / "builder"


# Shipped to run inside the serving image, where tritonclient is not installed: the probe deploy-snippets puts in
# its ConfigMap and Dockerfile.triton COPYs for its HEALTHCHECK (standard library + numpy only)
IN_THE_SERVING_IMAGE = {"publish/probe.py"}


def _sources() -> dict[str, str]:
    return {
        path: p.read_text()
        for p in sorted(SOURCE.rglob("*.py"))
        if p.parent.name
        != "models"  # the Python models we ship run inside Triton, not in our process
        and (path := str(p.relative_to(SOURCE))) not in IN_THE_SERVING_IMAGE
    }


def _imports_of(text: str) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
    return out


def raw_http_modules(sources: dict[str, str]) -> list[str]:
    return sorted(
        path
        for path, text in sources.items()
        if {"urllib.request", "urllib.error", "http.client", "requests"} & _imports_of(text)
    )


CONFIG_READ = re.compile(
    r"""config\.pbtxt["']\)?\s*\)?\.read_(bytes|text)\(|text_format\.(Parse|Merge)\("""
)


def config_parsers(sources: dict[str, str]) -> list[str]:
    return sorted(path for path, text in sources.items() if CONFIG_READ.search(text))


def foreign_imports(text: str) -> set[str]:
    """What a module imports beyond the standard library and numpy: what the serving image may lack."""
    return {
        name
        for name in _imports_of(text)
        if name.split(".")[0] not in sys.stdlib_module_names | {"numpy", "__future__"}
    }


@pytest.mark.parametrize("module", sorted(IN_THE_SERVING_IMAGE))
def test_what_runs_in_the_serving_image_imports_only_the_standard_library_and_numpy(module):
    text = (SOURCE / module).read_text()
    assert foreign_imports(text) == set()
    # broken on purpose: the seam check sees a project import (the file is copied alone)
    assert foreign_imports(text + "from tritonbuild.errors import UsageError\n") == {
        "tritonbuild.errors"
    }


def test_only_plain_http_speaks_http_without_tritonclient():
    assert raw_http_modules(_sources()) == ["triton/plain_http.py"]


def test_config_pbtxt_is_read_and_parsed_in_one_module():
    assert config_parsers(_sources()) == ["triton/config.py"]


# A config.pbtxt (or CONFIG_FILE) path written with pathlib, open(..., "w"/"wb"), or write_atomic
CONFIG_WRITE = re.compile(
    r"""(config\.pbtxt["']|CONFIG_FILE)\)?\s*\)?\.write_(bytes|text)\("""
    r"""|write_atomic\([^)\n]*(config\.pbtxt|CONFIG_FILE)"""
    r"""|open\([^)\n]*(config\.pbtxt|CONFIG_FILE)[^)\n]*["'][wax]b?["']"""
)


def config_writers(sources: dict[str, str]) -> list[str]:
    return sorted(path for path, text in sources.items() if CONFIG_WRITE.search(text))


def test_config_pbtxt_is_written_by_one_function():
    """triton/config.py:write_config (atomic) is the one writer of a model's config.pbtxt; the
    generic writer, each backend's emit and the stand-ins all call it."""
    assert config_writers(_sources()) == ["triton/config.py"]
    from tritonbuild.triton import config

    assert [
        node.name
        for node in ast.walk(ast.parse(Path(config.__file__).read_text()))
        if isinstance(node, ast.FunctionDef) and CONFIG_WRITE.search(ast.unparse(node))
    ] == ["write_config"]


@pytest.mark.parametrize(
    ("module", "added", "check"),
    [
        ("server/status.py", "import urllib.request\n", raw_http_modules),
        (
            "backends/composition/backend.py",
            "(root / 'm' / 'config.pbtxt').write_bytes(b'')\n",
            config_writers,
        ),
        (
            "repository/assemble.py",
            "write_atomic(model_dir / 'config.pbtxt', data)\n",
            config_writers,
        ),
        ("triton/standin.py", "(dest / CONFIG_FILE).write_text(text)\n", config_writers),
        ("backends/vllm/emit.py", "open(d / 'config.pbtxt', 'wb').write(data)\n", config_writers),
        ("tune/run.py", "mc = parse((root / 'm' / 'config.pbtxt').read_bytes())\n", config_parsers),
        ("verify/served.py", "text_format.Parse(raw, mc)\n", config_parsers),
    ],
)
def test_each_seam_check_fails_when_the_seam_is_broken(module, added, check):
    sources = _sources()
    before = check(sources)
    sources[module] += added
    assert check(sources) != before and module in check(sources)


def test_read_config_tells_absent_from_invalid(tmp_path: Path):
    from tritonbuild.triton.config import ConfigParseError, read_config, read_config_or_none

    with pytest.raises(FileNotFoundError):
        read_config(tmp_path)
    (tmp_path / "config.pbtxt").write_text('name: "m"\nmax_batch_size: x\n')
    with pytest.raises(ConfigParseError, match=r"^2:\d+ "):
        read_config(tmp_path)
    (tmp_path / "config.pbtxt").write_bytes(b'name: "\xff"\n')
    with pytest.raises(ConfigParseError, match="utf-8"):
        read_config(tmp_path)
    assert read_config_or_none(tmp_path) is None
    (tmp_path / "config.pbtxt").write_text('name: "m"\nbackend: "python"\n')
    assert read_config(tmp_path).backend == "python"


BATCHING_FIELD = re.compile(
    r"\.(preferred_batch_size|max_queue_delay_microseconds|default_timeout_microseconds)\b"
)


def batching_mappers(sources: dict[str, str]) -> list[str]:
    return sorted(path for path, text in sources.items() if BATCHING_FIELD.search(text))


def test_dynamic_batching_is_mapped_in_one_module():
    # triton/rules.py checks a config against Triton's own rules: it reads the fields, it maps nothing.
    assert batching_mappers(_sources()) == ["triton/batching.py", "triton/rules.py"]
    sources = _sources()
    sources["tune/space.py"] += "db.max_queue_delay_microseconds = 5\n"
    assert "tune/space.py" in batching_mappers(sources)


def test_the_batching_mapping_covers_every_recipe_key_and_names_real_config_fields():
    from tritonbuild.recipe.models import Batching, QueuePolicy
    from tritonbuild.triton.batching import FIELDS, QUEUE_FIELDS
    from tritonbuild.triton.config import model_config_pb2

    pb2 = model_config_pb2()
    assert set(Batching.model_fields) == set(FIELDS) | {
        "default_queue_policy",
        "priority_queue_policy",
    }
    assert set(QueuePolicy.model_fields) == set(QUEUE_FIELDS)
    assert set(FIELDS.values()) <= set(pb2.ModelDynamicBatching.DESCRIPTOR.fields_by_name)
    assert set(QUEUE_FIELDS.values()) <= set(pb2.ModelQueuePolicy.DESCRIPTOR.fields_by_name)


def test_recipe_batching_round_trips_through_the_config():
    from tritonbuild.recipe.models import Batching
    from tritonbuild.triton.batching import read_dynamic_batching, write_dynamic_batching
    from tritonbuild.triton.config import model_config_pb2, parse, render

    batching = Batching(
        preferred_batch_sizes=[4, 8],
        max_queue_delay_us=100,
        preserve_ordering=True,
        priority_levels=2,
        default_priority_level=1,
        default_queue_policy={
            "timeout_action": "delay",
            "default_timeout_us": 7,
            "max_queue_size": 3,
        },
        priority_queue_policy={2: {"allow_timeout_override": True}},
    )
    mc = model_config_pb2().ModelConfig()
    write_dynamic_batching(mc, batching.model_dump())
    text = render(mc).decode()
    assert (
        "max_queue_delay_microseconds: 100" in text
        and "TimeoutAction" not in text
        and "DELAY" in text
    )
    assert Batching.model_validate(read_dynamic_batching(parse(text.encode()))) == batching
    write_dynamic_batching(mc, None)
    assert read_dynamic_batching(mc) is None


MACHINE_PATH = re.compile(
    r"""Path\(\s*["'](/work|/home|/root|/tmp)\b|=\s*["'](/work|/home|/root)/"""
)


def machine_paths(texts: dict[str, str]) -> list[str]:
    return sorted(path for path, text in texts.items() if MACHINE_PATH.search(text))


def test_no_test_names_a_directory_of_one_machine():
    # a machine's directories reach tests through tmp_path or an environment variable, never as a literal
    tests = {
        str(p.relative_to(ROOT)): p.read_text()
        for p in sorted((ROOT / "tests").rglob("*.py"))
        if p.name != "test_seams.py"
    }  # this file names one, to break the check on purpose
    assert machine_paths(tests) == []
    tests["tests/contracts/test_refresh.py"] += 'MIRRORS = Path("/work/.mirror")\n'
    assert machine_paths(tests) == ["tests/contracts/test_refresh.py"]
