"""Safe YAML loading that keeps the line of every key and rejects duplicate keys."""

from __future__ import annotations

from dataclasses import dataclass, field

import yaml

Path_ = tuple  # a key path such as ("batching", "preferred_batch_sizes", 0)


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


def load_located(text: str) -> Located:
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        raise YamlProblem(f"YAML syntax error: {e.problem or e.context}",
                          mark.line + 1 if mark else None,
                          "fix the YAML syntax at that line (indentation, a missing ':' or quote)") from None
    finally:
        loader.dispose()
    located = Located(None)
    if node is None:
        located.data = None
        return located
    located.lines[()] = node.start_mark.line + 1
    located.data = _build(loader, node, (), located.lines)
    return located


def _build(loader: yaml.SafeLoader, node: yaml.Node, path: tuple, lines: dict):
    if isinstance(node, yaml.MappingNode):
        loader.flatten_mapping(node)
        out: dict = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            if not isinstance(key, (str, int, float, bool)) or key is None:
                raise YamlProblem("mapping keys must be plain scalars", key_node.start_mark.line + 1)
            if key in out:
                raise YamlProblem(f"duplicate key {key!r} (first at line {lines[path + (key,)]})",
                                  key_node.start_mark.line + 1, "remove one of the two entries")
            lines[path + (key,)] = key_node.start_mark.line + 1
            out[key] = _build(loader, value_node, path + (key,), lines)
        return out
    if isinstance(node, yaml.SequenceNode):
        items = []
        for i, item in enumerate(node.value):
            lines[path + (i,)] = item.start_mark.line + 1
            items.append(_build(loader, item, path + (i,), lines))
        return items
    return loader.construct_object(node, deep=True)
