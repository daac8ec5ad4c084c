"""Safe YAML loading that keeps the line of every key and rejects duplicate keys."""

from __future__ import annotations

from dataclasses import dataclass, field

import yaml

Path_ = tuple  # a key path such as ("batching", "preferred_batch_sizes", 0)

# NOTE: bounds that make a hostile document fail fast instead of exhausting the stack or memory:
# nesting (PyYAML composes recursively, so thousands of levels would end in RecursionError), aliases
# and the number of nodes after alias expansion ("billion laughs": 9 levels of 9 aliases expand to
# 9**9 nodes).
MAX_DEPTH = 64
MAX_ALIASES = 256
MAX_NODES = 100_000


class YamlProblem(Exception):
    def __init__(self, message: str, line: int | None, hint: str | None = None):
        super().__init__(message)
        self.message, self.line, self.hint = message, line, hint


@dataclass
class Located:
    """A parsed document plus the 1-based line of each key path."""

    data: object
    lines: dict = field(default_factory=dict)

    def line_of(self, loc: tuple) -> int | None:
        loc = tuple(loc)
        while loc:
            if loc in self.lines:
                return self.lines[loc]
            loc = loc[:-1]
        return self.lines.get(())


def _line(e: yaml.YAMLError, text: str) -> int | None:
    if isinstance(e, yaml.MarkedYAMLError):
        mark = e.problem_mark or e.context_mark
        return mark.line + 1 if mark else None
    if isinstance(e, yaml.reader.ReaderError):
        return text.count("\n", 0, max(0, e.position)) + 1
    return None


def _precheck(text: str) -> None:
    """Depth and alias limits, checked on the event stream (PyYAML's parser is not recursive)."""
    depth = aliases = 0
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    raise YamlProblem(
                        f"the document nests deeper than {MAX_DEPTH} levels",
                        event.start_mark.line + 1,
                        "flatten the structure; a recipe needs a few levels",
                    )
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
            elif isinstance(event, yaml.AliasEvent):
                aliases += 1
                if aliases > MAX_ALIASES:
                    raise YamlProblem(
                        f"more than {MAX_ALIASES} aliases (*name)",
                        event.start_mark.line + 1,
                        "write the values out instead of repeating anchors",
                    )
    except yaml.reader.ReaderError as e:
        raise YamlProblem(
            f"character {e.character!r} is not allowed in YAML (NUL and control characters are "
            "not)",
            _line(e, text),
            "remove the character, or write it as an escape in a double-quoted string",
        ) from None
    except yaml.YAMLError:
        return  # syntax errors are reported, with their line, by the loader


def load_located(text: str) -> Located:
    _precheck(text)
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        raise YamlProblem(
            f"YAML syntax error: {e.problem or e.context}",
            mark.line + 1 if mark else None,
            "fix the YAML syntax at that line (indentation, a missing ':' or quote)",
        ) from None
    except yaml.YAMLError as e:
        raise YamlProblem(f"YAML error: {e}", _line(e, text), "fix the YAML at that line") from None
    finally:
        loader.dispose()
    located = Located(None)
    if node is None:
        located.data = None
        return located
    located.lines[()] = node.start_mark.line + 1
    try:
        located.data = _build(loader, node, (), located.lines, [0])
    except yaml.YAMLError as e:  # e.g. a merge key ('<<') whose value is not a mapping
        raise YamlProblem(
            f"YAML error: {getattr(e, 'problem', None) or e}",
            _line(e, text),
            "fix the YAML at that line",
        ) from None
    return located


def _build(loader: yaml.SafeLoader, node: yaml.Node, path: tuple, lines: dict, count: list):
    count[0] += 1
    if count[0] > MAX_NODES:
        raise YamlProblem(
            f"the document expands to more than {MAX_NODES} values (aliases repeat their anchor's "
            "whole value)",
            node.start_mark.line + 1,
            "write the values out instead of nesting aliases",
        )
    if len(path) > MAX_DEPTH:  # aliases can nest deeper than the text does
        raise YamlProblem(
            f"the document nests deeper than {MAX_DEPTH} levels",
            node.start_mark.line + 1,
            "flatten the structure",
        )
    if isinstance(node, yaml.MappingNode):
        loader.flatten_mapping(node)
        out: dict = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise YamlProblem(
                    "mapping keys must be plain scalars", key_node.start_mark.line + 1
                )
            key = loader.construct_object(key_node, deep=True)
            if not isinstance(key, (str, int, float, bool)) or key is None:
                raise YamlProblem(
                    "mapping keys must be plain scalars", key_node.start_mark.line + 1
                )
            if key in out:
                raise YamlProblem(
                    f"duplicate key {key!r} (first at line {lines[(*path, key)]})",
                    key_node.start_mark.line + 1,
                    "remove one of the two entries",
                )
            lines[(*path, key)] = key_node.start_mark.line + 1
            out[key] = _build(loader, value_node, (*path, key), lines, count)
        return out
    if isinstance(node, yaml.SequenceNode):
        items = []
        for i, item in enumerate(node.value):
            lines[(*path, i)] = item.start_mark.line + 1
            items.append(_build(loader, item, (*path, i), lines, count))
        return items
    return loader.construct_object(node, deep=True)
