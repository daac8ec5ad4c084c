"""Property-based fuzzing of recipes, names and paths, with a fixed seed and a small budget.

Properties: the CLI never ends in a traceback (exit 1), a bad recipe is exit 3 with file:line, and a build
writes nothing outside OUT and the build cache (the directory tree around them is compared before and after)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import textwrap
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import PY_MODEL
from tritonbuild.cli import main

pytestmark = (
    pytest.mark.slow
)  # hundreds of generated cases: the full suite runs them, ci/test.sh --fast does not


def fuzz(max_examples: int):
    """A fixed seed (derandomize), no example database, a small budget: the same cases on every run."""
    return settings(
        derandomize=True,
        database=None,
        deadline=None,
        print_blob=True,
        max_examples=max_examples,
        suppress_health_check=list(HealthCheck),
    )


BASE = {
    "name": "doubler",
    "version": 1,
    "backend": "python",
    "source": {"path": "model.py"},
    "max_batch_size": 4,
    "inputs": [{"name": "X", "dtype": "fp32", "dims": [3]}],
    "outputs": [{"name": "Y", "dtype": "fp32", "dims": [3]}],
    "verify": {"goldens": "goldens/doubler.npz", "repeats": 2, "samples": 3},
}

# Key paths into BASE (and a few optional keys) that the fuzzer overwrites.
KEYS = [
    ("name",),
    ("version",),
    ("backend",),
    ("source", "path"),
    ("source", "files"),
    ("max_batch_size",),
    ("inputs", 0, "name"),
    ("inputs", 0, "dims"),
    ("inputs", 0, "dtype"),
    ("outputs", 0, "name"),
    ("verify", "goldens"),
    ("verify", "repeats"),
    ("instances",),
    ("batching",),
    ("version_policy",),
    ("warmup",),
    ("parameters",),
    ("schema_version",),
]

HOSTILE_TEXT = st.sampled_from(
    [
        "",
        ".",
        "..",
        "../x",
        "../../../../tmp/x",
        "/etc/passwd",
        "/dev/zero",
        "a/b",
        "x\n",
        "\x00",
        "a\x1bb",
        " X",
        "X ",
        "m" * 256,
        "m" * 255,
        "\\x",
        "é",
        "model.py",
        "goldens/../../x.npz",
        "~/x",
        "$HOME",
        "%s",
        "{x}",
        "[1]",
        "*a",
        "&a",
        "? x",
    ]
)
INTS = st.one_of(
    st.integers(-5, 10),
    st.sampled_from(
        [0, -1, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**63 - 1, 2**63, 2**64, 2**70, -(2**63) - 1]
    ),
)
SCALARS = st.one_of(
    INTS, HOSTILE_TEXT, st.text(max_size=12), st.booleans(), st.none(), st.floats(allow_nan=True)
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.sampled_from(["kind", "count", "latest", "data", "x", "name"]), inner, max_size=3
        ),
    ),
    max_leaves=6,
)


def _set(doc: dict, loc: tuple, value) -> dict:
    node = doc
    for part in loc[:-1]:
        node = node[part]
    node[loc[-1]] = value
    return doc


def _run(*args) -> object:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=True)


def _assert_clean(r, allowed: set[int]) -> None:
    out = (r.stdout or "") + (r.stderr or "")
    assert r.exit_code != 1, out
    assert r.exception is None or isinstance(r.exception, SystemExit), (r.exception, out)
    assert "Traceback" not in out and "internal error" not in out, out
    assert r.exit_code in allowed, (r.exit_code, out)


@pytest.fixture
def workdir(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz")
    (d / "model.py").write_text(textwrap.dedent(PY_MODEL))
    return d


@fuzz(300)
@given(edits=st.lists(st.tuples(st.sampled_from(KEYS), VALUES), min_size=1, max_size=3))
def test_fuzzed_recipe_values_are_exit_0_3_or_4_with_a_line(workdir, edits):
    """validate runs the plan's checks too (issue 43, item 5): a plan error (exit 4, e.g. source.path naming a
    directory) is as clean as a recipe error, with the recipe's file:line."""
    doc = yaml.safe_load(yaml.safe_dump(BASE))
    for loc, value in edits:
        _set(doc, loc, value)
    recipe = workdir / "r.yaml"
    recipe.write_text(yaml.safe_dump(doc, allow_unicode=True))
    r = _run("validate", recipe)
    _assert_clean(r, {0, 3, 4})
    if r.exit_code in (3, 4):
        assert re.search(re.escape(str(recipe)) + r"(:\d+)?", r.stderr), r.stderr


EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "recipes").glob("*/*.yaml"))


def _key_paths(node, loc: tuple = ()) -> list[tuple]:
    out = [loc] if loc else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _key_paths(v, (*loc, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _key_paths(v, (*loc, i))
    return out


@st.composite
def _mutated_example(draw):
    path = draw(st.sampled_from(EXAMPLES))
    doc = yaml.safe_load(path.read_text())
    for _ in range(draw(st.integers(1, 3))):
        loc = draw(st.sampled_from(_key_paths(doc)))
        with contextlib.suppress(
            TypeError, IndexError, KeyError
        ):  # an earlier edit replaced a parent
            _set(doc, loc, draw(VALUES))
    return path, doc


def test_fuzzed_examples_of_every_recipe_kind_are_exit_0_or_3(tmp_path):
    """Every recipe kind (python, onnxruntime, pytorch, tensorrt, ensemble, bls, tensorrtllm, vllm): a value
    replaced anywhere is accepted or a recipe error with the file, never a crash. The examples are copied so
    their relative paths still resolve."""
    shutil.copytree(EXAMPLES[0].parents[1], tmp_path / "recipes")
    _mutated_examples(tmp_path / "recipes")


@fuzz(400)
@given(case=_mutated_example())
def _mutated_examples(root, case):
    path, doc = case
    recipe = root / path.parent.name / f"fuzz-{path.name}"
    recipe.write_text(yaml.safe_dump(doc, allow_unicode=True))
    r = _run("validate", recipe)
    _assert_clean(r, {0, 3, 4})
    if r.exit_code in (3, 4):
        assert str(recipe) in r.stderr, r.stderr


@fuzz(150)
@given(prefix=st.binary(max_size=40), junk=st.binary(max_size=40), cut=st.integers(0, 400))
def test_fuzzed_recipe_bytes_never_crash(workdir, prefix, junk, cut):
    text = yaml.safe_dump(BASE).encode()
    recipe = workdir / "r.yaml"
    recipe.write_bytes(prefix + text[:cut] + junk + text[cut:])
    _assert_clean(_run("validate", recipe), {0, 3})


def _tree(root: Path, skip: set[Path]) -> dict[str, tuple]:
    """Every path under root (not following symlinks) with its type, and for files their size, mtime and bytes;
    skip: subtrees left out."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if Path(dirpath, d) not in skip]
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            st_ = p.lstat()
            # NOTE: a directory's own mtime moves when OUT (or its staging tree) is created in it: not a write
            out[str(p.relative_to(root))] = (
                (st_.st_mode,)
                if p.is_dir() and not p.is_symlink()
                else (
                    st_.st_mode,
                    st_.st_size,
                    st_.st_mtime_ns,
                    p.read_bytes() if p.is_file() and not p.is_symlink() else os.readlink(p),
                )
            )
    return out


NAMES = st.one_of(HOSTILE_TEXT, st.text(alphabet="Xab./\\\n _-", min_size=1, max_size=8))
PATHS = st.one_of(
    HOSTILE_TEXT,
    st.lists(
        st.sampled_from(["..", ".", "goldens", "x.npz", "link", "model.py", ""]),
        min_size=1,
        max_size=4,
    ).map("/".join),
)


def _or_valid(valid: str, hostile):
    """Mostly the valid value, so that later stages (build, assemble) are reached too."""
    return st.integers(0, 4).flatmap(lambda n: st.just(valid) if n else hostile)


SEEN: dict[int, int] = {}


def test_fuzzed_names_and_paths_never_write_outside_out(tmp_path_factory):
    SEEN.clear()
    _names_and_paths(tmp_path_factory)
    assert SEEN.get(0, 0) >= 3 and SEEN.get(3, 0) >= 3, (
        SEEN
    )  # the budget reached both good builds and refusals


@fuzz(150)
@given(
    tensor=_or_valid("X", NAMES),
    model=_or_valid("doubler", NAMES),
    goldens=_or_valid("goldens/d.npz", PATHS),
    source=_or_valid("model.py", PATHS),
    warm=st.sampled_from([None, "zero", "goldens"]),
    out_rel=_or_valid(
        "OUT",
        st.sampled_from(
            [
                ".",
                "..",
                "model.py",
                "goldens",
                "link",
                "r.yaml",
                "OUT/../OUT",
                "link/sub",
                "goldens/d.npz",
                "../neighbour",
                "full",
            ]
        ),
    ),
    force=st.booleans(),
)
def _names_and_paths(tmp_path_factory, tensor, model, goldens, source, warm, out_rel, force):
    around = tmp_path_factory.mktemp(
        "around"
    )  # a fresh sandbox: recipes/, OUT, and neighbours to watch
    project = around / "project"
    project.mkdir()
    (project / "model.py").write_text(textwrap.dedent(PY_MODEL))
    (project / "goldens").mkdir()
    (project / "link").symlink_to(around / "neighbour")
    (around / "neighbour").mkdir()
    (around / "neighbour" / "x.npz").write_bytes(b"not yours")
    doc = yaml.safe_load(yaml.safe_dump(BASE))
    doc["name"], doc["inputs"][0]["name"], doc["verify"]["goldens"], doc["source"]["path"] = (
        model,
        tensor,
        goldens,
        source,
    )
    if warm:
        doc["warmup"] = {"data": warm}
    (project / "r.yaml").write_text(yaml.safe_dump(doc, allow_unicode=True))
    (project / "goldens" / "d.npz").write_bytes(b"")
    (project / "full").mkdir()
    (project / "full" / "thesis.tex").write_text("mine")
    (project / "full" / "tritonbuild-manifest.json").write_text("{")
    out = project / out_rel
    cache = Path(os.environ["TRITONBUILD_CACHE_DIR"])
    before = _tree(around, set())
    r = _run("build", project / "r.yaml", "-o", out, *(["--force"] if force else []))
    _assert_clean(r, {0, 2, 3, 4, 5})
    SEEN[r.exit_code] = SEEN.get(r.exit_code, 0) + 1
    after = _tree(around, set())
    # OUT as written (a symlink there may be replaced) and as resolved (where the tree really lands)
    outs = {
        os.path.relpath(os.path.normpath(out), around),
        os.path.relpath(os.path.realpath(out), os.path.realpath(around)),
    }

    def under_out(rel: str) -> bool:
        return any(rel == o or rel.startswith(o + "/") for o in outs)

    # Nothing that existed may change, except what lay under OUT with --force (the user's explicit "replace it");
    # new paths may appear only under OUT.
    changed = [k for k, v in before.items() if after.get(k) != v and not (force and under_out(k))]
    added = [k for k in after if k not in before and not under_out(k)]
    assert changed == [] and added == [], (changed, added, r.exit_code, r.stderr)
    assert not cache.is_relative_to(around)
    leftovers = [k for k in after if re.search(r"(^|/)\.[^/]*\.(staging|old)-\d+", k)]
    assert leftovers == [], leftovers  # no staging or old tree left behind
    if r.exit_code == 0:
        assert (out / "tritonbuild-manifest.json").is_file()
    shutil.rmtree(around)
