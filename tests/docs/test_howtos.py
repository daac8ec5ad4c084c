"""The how-to pages are for doing, not reading: each starts with a runnable code block (within its first 40 lines,
the first screen), no paragraph runs over 150 words, no Markdown list renders inline (Python-Markdown needs a blank
line before a list; `mkdocs build --strict` does not catch it), and every `tritonbuild ...` command line they show
names a real command and real options (checked against the click command tree; on every page and the README).

Pages are rendered with the Markdown extensions mkdocs.yml configures, as the site renders them."""

from __future__ import annotations

import re
import shlex
from html.parser import HTMLParser
from pathlib import Path

import click
import markdown
import pytest
from mkdocs.config import load_config

from tests.conftest import ROOT

HOWTOS = sorted((ROOT / "docs" / "howto").glob("*.md"))
PAGES = sorted(p for p in (ROOT / "docs").rglob("*.md") if "runs" not in p.parts)
FIRST_SCREEN, MAX_WORDS = 40, 150


def render(path: Path) -> str:
    """The page's HTML body as the site builds it (mkdocs.yml's markdown_extensions and their configs)."""
    config = load_config(str(ROOT / "mkdocs.yml"))
    md = markdown.Markdown(
        extensions=config["markdown_extensions"], extension_configs=config["mdx_configs"]
    )
    return md.convert(path.read_text(encoding="utf-8"))


class Blocks(HTMLParser):
    """The text of each <p> and each <li> (its own text, not a nested list's)."""

    def __init__(self):
        super().__init__()
        self.stack: list[list] = []  # [tag, text parts]
        self.blocks: list[tuple[str, str]] = []

    def handle_starttag(self, tag, attrs):
        if tag in ("p", "li"):
            self.stack.append([tag, []])

    def handle_endtag(self, tag):
        if tag in ("p", "li") and self.stack and self.stack[-1][0] == tag:
            kind, parts = self.stack.pop()
            self.blocks.append((kind, "".join(parts)))

    def handle_data(self, data):
        if self.stack:
            self.stack[-1][1].append(data)


def blocks(path: Path) -> list[tuple[str, str]]:
    parser = Blocks()
    parser.feed(render(path))
    return parser.blocks


def _name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)


@pytest.mark.parametrize("page", HOWTOS, ids=_name)
def test_a_howto_shows_a_code_block_on_its_first_screen(page):
    head = page.read_text(encoding="utf-8").splitlines()[:FIRST_SCREEN]
    assert any(line.lstrip().startswith(("```", "~~~")) for line in head), (
        f"{_name(page)}: no code block in its first {FIRST_SCREEN} lines: show the task's commands first"
    )


@pytest.mark.parametrize("page", HOWTOS, ids=_name)
def test_no_paragraph_of_a_howto_runs_over_150_words(page):
    long = [
        f"{kind} of {len(text.split())} words: {' '.join(text.split()[:12])} ..."
        for kind, text in blocks(page)
        if len(text.split()) > MAX_WORDS
    ]
    assert long == [], f"{_name(page)}: split these into short paragraphs, lists or tables"


LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+\.)\s+\S")


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_no_list_renders_inline(page):
    """A list item line of the source that the rendered page holds inside a paragraph (`<p>... \\n- item`)
    rendered inline: a list right after a paragraph line, without the blank line Python-Markdown needs."""
    inline = [
        line.strip()[:60]
        for kind, text in blocks(page)
        if kind == "p"
        for line in text.split("\n")[1:]
        if LIST_ITEM.match(line)
    ]
    assert inline == [], f"{_name(page)}: a list renders as a paragraph: put a blank line before it"


def test_the_inline_list_check_catches_a_list_without_a_blank_line(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("Three things:\n- one\n- two\n\nAnd:\n\n- fine\n")
    html = render(page)
    assert html.count("<li>") == 1  # the first list is inline: Python-Markdown needs the blank line
    with pytest.raises(AssertionError, match="renders as a paragraph"):
        test_no_list_renders_inline(page)


# -- the command lines the how-tos show ----------------------------------------------------------------------


def command_lines(path: Path) -> list[str]:
    """Each `tritonbuild ...` command: lines of code blocks (continuations joined, comments and prompts dropped)
    and inline code spans."""
    text = path.read_text(encoding="utf-8")
    found = []
    for block in re.findall(r"^```[^\n]*\n(.*?)^```", text, re.S | re.M):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = re.sub(r"^\s*\$\s+", "", line)
            line = re.split(r"\s+#\s", line)[0]
            for part in re.split(r"\s*(?:&&|\|\||;|\|)\s*", line):
                if part.strip().startswith("tritonbuild "):
                    found.append(part.strip())
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    found += [span for span in re.findall(r"`(tritonbuild [^`]+)`", text)]
    return found


def check_command(line: str) -> list[str]:
    """What is wrong with one command line: an unknown command, or an option the command lacks."""
    from tritonbuild.cli import main

    try:
        words = shlex.split(line)[1:]
    except ValueError:
        words = line.split()[1:]
    command: click.Command = main
    path = ["tritonbuild"]
    options = {opt for param in main.params for opt in (*param.opts, *param.secondary_opts)}
    problems = []
    for word in words:
        if word.startswith("-"):
            continue
        if isinstance(command, click.Group):
            if word not in command.commands:
                if re.fullmatch(r"[a-z][a-z-]*", word):
                    problems.append(f"{' '.join(path)} has no command {word!r}")
                break
            command = command.commands[word]
            path.append(word)
            options |= {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
        else:
            break
    options |= {"--help", "-h"}
    for word in words:
        flag = word.split("=", 1)[0]
        if re.fullmatch(r"--?[a-zA-Z][\w-]*", flag) and flag not in options:
            problems.append(f"{' '.join(path)} has no option {flag}")
    return problems


@pytest.mark.parametrize("page", [*PAGES, ROOT / "README.md"], ids=_name)
def test_every_command_a_page_shows_exists_with_its_options(page):
    """How-tos first, and every other page and the README too: a renamed option breaks the docs here."""
    problems = [f"`{line}`: {p}" for line in command_lines(page) for p in check_command(line)]
    assert problems == [], f"{_name(page)}:\n" + "\n".join(problems)


def test_the_command_check_catches_a_wrong_flag_and_command():
    assert check_command("tritonbuild publish OUT s3://b/p --endpoint-url http://x") == []
    assert check_command("tritonbuild publish OUT s3://b/p --endpoint http://x") == [
        "tritonbuild publish has no option --endpoint"
    ]
    assert check_command("tritonbuild publsh OUT") == ["tritonbuild has no command 'publsh'"]
    assert check_command("tritonbuild cache gc --max-size 20G") == []
