"""Reading files and quoting their content with bounded effort: one line, never a hang.

A 1 KB YAML "alias bomb" (anchors of lists of aliases of lists ...) parses into a few
shared objects, but anything that walks it (validation, ``repr`` in an error message)
visits billions of items. :func:`load_yaml` refuses a document whose aliases would
expand it by more than :data:`MAX_ALIAS_EXPANSION` nodes, before it is built;
:func:`quote` shows a value in at most :data:`QUOTE_LIMIT` characters, whatever its
size; :func:`yaml_problem` puts a parser error on one line with its line and column.
"""

from __future__ import annotations

import reprlib
from typing import Any

import yaml

#: How many nodes aliases may add to a YAML document (a shared config block uses a few
#: hundred; an alias bomb, billions).
MAX_ALIAS_EXPANSION = 100_000
#: Longest quote of a value in an error message [characters].
QUOTE_LIMIT = 200

_REPR = reprlib.Repr()
_REPR.maxlevel = 3
_REPR.maxlist = _REPR.maxtuple = _REPR.maxset = _REPR.maxdict = 8
_REPR.maxstring = _REPR.maxother = QUOTE_LIMIT


class YamlTooLarge(yaml.YAMLError):
    """A YAML document whose aliases expand it beyond the limit, or nested too deeply."""


def clip(text: str, limit: int = QUOTE_LIMIT) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def quote(value: Any, limit: int = QUOTE_LIMIT) -> str:
    """``repr(value)`` for an error message: bounded work, at most ``limit`` characters."""
    if isinstance(value, str):
        return clip(repr(value[: limit + 1]), limit)
    return clip(_REPR.repr(value), limit)


def yaml_problem(exc: yaml.YAMLError) -> str:
    """The parser's problem and where it is, on one line (``line 3, column 5: ...``)."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None)
    if mark is None or problem is None:
        return clip(str(exc), 4 * QUOTE_LIMIT)
    context = getattr(exc, "context", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}"
    return clip(f"{where}: {problem}" + (f" ({context})" if context else ""), 4 * QUOTE_LIMIT)


class _BoundedLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that counts what aliases add before building anything.

    Not libyaml's ``CSafeLoader``, though 3-4 times faster: its composer recurses in C
    and a deeply nested file (``[[[[...``) crashes the interpreter; this one raises
    ``RecursionError``.
    """

    def construct_document(self, node: yaml.Node) -> Any:
        _check_expansion(node)
        return super().construct_document(node)


def _check_expansion(root: yaml.Node) -> None:
    """Raise :class:`YamlTooLarge` if aliases make ``root`` more than the limit larger.

    The composed graph shares the node of an anchor among its aliases, so a node's
    expanded size is computed once (post-order, without recursion) and reused.
    """
    size: dict[int, int] = {}
    distinct = 0
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    on_path: set[int] = set()
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            size[key] = 1 + sum(size[id(child)] for child in _children(node))
            continue
        if key in size:
            continue
        if key in on_path:
            raise YamlTooLarge("the YAML document refers to itself (a recursive alias)")
        distinct += 1
        on_path.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in size)
    expansion = size[id(root)] - distinct
    if expansion > MAX_ALIAS_EXPANSION:
        raise YamlTooLarge(
            f"its aliases expand it by {expansion:,} nodes (at most {MAX_ALIAS_EXPANSION:,}): "
            "an alias bomb?"
        )


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def load_yaml(text: str) -> Any:
    """``yaml.safe_load(text)``, refusing alias bombs and too deep nesting.

    Raises:
        yaml.YAMLError: not valid YAML; :class:`YamlTooLarge`: an alias bomb, a
            recursive alias, or nesting deeper than Python's recursion limit allows.
    """
    loader = _BoundedLoader(text)
    try:
        return loader.get_single_data()
    except RecursionError:
        raise YamlTooLarge("the YAML document is nested too deeply") from None
    finally:
        loader.dispose()
