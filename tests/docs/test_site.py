"""The documentation site: `mkdocs build --strict` passes; the generated reference pages list every command, option,
recipe key and exit code of the code; the README stays short and its two commands stay as they are."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from html import unescape
from pathlib import Path
from urllib.parse import unquote

import click
import pytest

ROOT = Path(__file__).resolve().parents[2]


def generator():
    spec = importlib.util.spec_from_file_location(
        "docs_reference", ROOT / "ci" / "docs_reference.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site as CI builds it: strict (a broken link, a missing nav page or snippet fails the build)."""
    out = tmp_path_factory.mktemp("site")
    r = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return out


def text_of(html: str) -> str:
    return unescape(re.sub(r"<[^>]+>", "", html))


def test_the_cli_page_lists_every_command_and_option(site):
    from tritonbuild.cli import main

    page = text_of((site / "reference" / "cli.html").read_text())
    commands = list(generator().walk_commands(main))
    assert len(commands) >= 18  # the group and its 17 commands, cache's subcommands on top
    for path, command in commands:
        assert f"{' '.join(path)}" in page, f"{' '.join(path)} is missing from the CLI reference"
        section = page.split(" ".join(path), 1)[1]
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                assert param.opts[0] in section, f"{' '.join(path)} {param.opts[0]}"


def test_the_recipe_page_lists_every_key_of_the_schema(site):
    schema = json.loads((ROOT / "recipes" / "recipe.schema.json").read_text())
    html = (site / "reference" / "recipe.html").read_text()
    page = text_of(html)
    for name, definition in schema["$defs"].items():
        assert f'id="{name.lower()}"' in html, f"{name} has no section"
        section = page.split(name, 1)[1]
        for key in definition.get("properties", {}):
            assert key in section, f"{name}.{key} is missing from the recipe reference"
    assert set(schema["discriminator"]["mapping"]) <= set(re.findall(r"\b[a-z]+\b", page))


def table_rows(html: str) -> list[list[str]]:
    return [
        [text_of(cell).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
        for row in re.findall(r"<tr>(.*?)</tr>", html, re.S)
    ]


def code_kinds() -> dict[int, str]:
    from tritonbuild import errors

    classes = errors.ERROR_CLASSES
    assert len({cls.exit_code for cls in classes}) == len(classes), (
        "two error classes share an exit code"
    )
    return {0: "ok", 1: "bug", 130: "interrupted", **{cls.exit_code: cls.kind for cls in classes}}


def test_the_exit_code_page_matches_the_error_classes(site):
    rows = table_rows((site / "reference" / "exit-codes.html").read_text())
    assert {int(row[0]): row[1] for row in rows if row} == code_kinds()


def test_the_errors_explanation_names_the_same_codes(site):
    """The hand-written page (examples per code) cannot drift from the classes either."""
    rows = table_rows((site / "explanation" / "errors.html").read_text())
    documented = {int(row[0]) for row in rows if row and row[0].isdigit()}
    assert documented == set(code_kinds())


def test_the_vllm_invariance_page_is_the_table_row_for_row(site):
    """reference/vllm-invariance.md is generated from builder/backends/vllm/invariant/table.py ROWS: each row's
    setting, condition, verdict, reason and fix, in the table's order."""
    from tritonbuild.backends.vllm.invariant.table import ROWS

    rows = [r for r in table_rows((site / "reference" / "vllm-invariance.html").read_text()) if r]
    assert [r[:5] for r in rows] == [
        [" ".join(x.split()) for x in (row.setting, row.when, row.verdict, row.why, row.fix)]
        for row in ROWS
    ]
    assert all(row[5] for row in rows)  # every row cites its fact


def test_the_image_page_holds_the_recorded_tables(site):
    from tritonbuild.backends.llm.images import TRTLLM_IMAGES, VLLM_IMAGES

    rows = table_rows((site / "reference" / "images.html").read_text())
    assert {row[0]: tuple(row[1:]) for row in rows if len(row) == 4} == TRTLLM_IMAGES
    assert {row[0]: row[1] for row in rows if len(row) == 2} == VLLM_IMAGES
    source = json.loads((ROOT / "builder" / "facts" / "triton_images.json").read_text())["source"]
    assert source["commit"] in (site / "reference" / "images.html").read_text()


def test_every_run_record_is_linked(site):
    links = {
        unquote(href) for href in re.findall(r'href="([^"]+)"', (site / "runs.html").read_text())
    }
    for record in (ROOT / "docs" / "runs").rglob("*"):
        if record.is_file():
            relative = record.relative_to(ROOT / "docs" / "runs")
            if relative.suffix == ".md":  # a note: a page of the site
                relative = relative.with_suffix(".html")
            assert f"runs/{relative}" in links, relative
            assert (site / "runs" / relative).is_file(), relative


def test_a_how_to_page_per_task():
    nav = (ROOT / "mkdocs.yml").read_text()
    for task in (
        "onnx",
        "pytorch",
        "python-model",
        "vllm",
        "tensorrt-llm",
        "ensembles",
        "verify-goldens",
        "publish",
        "rollback",
        "serve-infer",
        "tune",
        "ci",
        "kubernetes",
        "adopt",
    ):
        assert f"howto/{task}.md" in nav and (ROOT / "docs" / "howto" / f"{task}.md").is_file(), (
            task
        )


def test_reference_pages_are_generated_not_committed():
    for uri in generator().PAGES:
        assert not (ROOT / "docs" / uri).exists(), (
            f"docs/{uri} is generated at build time; remove the file"
        )


def test_readme_is_short_and_keeps_the_two_commands():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 250, (
        "the README is an entry point; reference text goes to docs/"
    )
    block = re.search(r"## Two commands\n.*?```sh\n(.*?)```", readme, re.S).group(1).splitlines()
    assert [line.split("#")[0].split() for line in block] == [
        ["ci/examples.sh"],
        ["ci/test.sh"],
        ["ci/test.sh", "--fast"],
    ]
    assert "exec ci/test.sh" in (ROOT / ".ci" / "run").read_text()
    assert (
        "<!-- --8<-- [start:first-model] -->" in readme
        and "<!-- --8<-- [end:first-model] -->" in readme
    )


def test_the_environment_page_lists_every_variable_the_code_reads(site):
    """reference/environment.md as built: a row for every variable ci/docs_environment.py finds read in builder/
    and the serving image (tests/docs/test_environment.py holds the scanner to the code)."""
    from tests.docs.test_environment import scanner

    rows = table_rows((site / "reference" / "environment.html").read_text())
    listed = {row[0] for row in rows if row}
    assert sorted(set(scanner().variables_read()) - listed) == []


def test_the_config_page_lists_every_key(site):
    from tritonbuild.cli.config import KEYS

    rows = table_rows((site / "reference" / "config.html").read_text())
    assert [row[0] for row in rows if row] == list(KEYS)


def test_the_backend_interface_page_documents_every_attribute_and_method(site):
    """reference/backend-interface.md is generated from builder/backends/base.py: each class attribute of Backend
    with its comment, each public method with its signature and docstring; none of them undocumented, and the
    plug-in entry-point group named as builder/backends/plugins.py reads it."""
    import ast
    import inspect

    from tritonbuild.backends.base import Backend
    from tritonbuild.backends.plugins import GROUP

    html = (site / "reference" / "backend-interface.html").read_text()
    page = text_of(html)
    docs = importlib.util.spec_from_file_location("docs_backend", ROOT / "ci" / "docs_backend.py")
    module = importlib.util.module_from_spec(docs)
    docs.loader.exec_module(module)
    comments = module.attribute_comments((ROOT / "builder/backends/base.py").read_text(), "Backend")
    (cls,) = [
        n
        for n in ast.parse((ROOT / "builder/backends/base.py").read_text()).body
        if isinstance(n, ast.ClassDef) and n.name == "Backend"
    ]
    annotated = {n.target.id for n in cls.body if isinstance(n, ast.AnnAssign)}
    assert annotated == set(comments) and len(annotated) >= 15
    rows = {row[0]: row for row in table_rows(html) if row}

    def flat(
        text: str,
    ) -> str:  # the source's prose as the page shows it: no code marks, spaces as one
        return " ".join(text.replace("`", "").split())

    for name in annotated:
        assert comments[name], f"Backend.{name} has no comment above it"
        assert flat(comments[name]) in flat(rows[name][3]), name
    for name, member in vars(Backend).items():
        if inspect.isfunction(member) and not name.startswith("_"):
            doc = inspect.getdoc(member)
            assert doc, f"Backend.{name} has no docstring"
            assert f"def {name}(" in page, name
            assert flat(doc) in flat(page), name
    assert rows["name"][2] == "required" and rows["tools"][2] == "{}"
    assert f'[project.entry-points."{GROUP}"]' in page
