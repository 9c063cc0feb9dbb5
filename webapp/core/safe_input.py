"""Limits on hostile input: YAML alias bombs, deep nesting, oversized JSON; shared by every reader.

Each reader (datasets, KB, drafts, events, rubrics, the eval spec, JSON request bodies) parses
through these functions, so a file that would cost minutes or gigabytes, or crash the parser
with RecursionError, is refused up front with its line, before anything is built.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import yaml
from yaml.events import AliasEvent, MappingStartEvent, ScalarEvent, SequenceStartEvent
from yaml.nodes import MappingNode, Node, SequenceNode
from yaml.tokens import Token

# Lists/mappings nested deeper than this are refused (real records nest 3 or 4 levels).
MAX_DEPTH = 64
# One YAML alias may stand for at most this many nodes once expanded...
MAX_ALIAS_NODES = 10_000
# ...and all the aliases of a document may add at most this many nodes to it.
MAX_ALIAS_TOTAL = 100_000


class InputLimitError(ValueError):
    """Input beyond a safety limit; `line` is 1-based when known."""

    def __init__(self, message: str, *, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


def _expanded_size(node: Node, memo: dict[int, int]) -> int:
    """Return how many nodes `node` stands for with every alias expanded (iterative, memoised by identity)."""
    stack: list[tuple[Node, bool]] = [(node, False)]
    while stack:
        current, children_done = stack.pop()
        if id(current) in memo:
            continue
        kids = _children(current)
        if children_done:
            memo[id(current)] = 1 + sum(memo[id(k)] for k in kids)
            continue
        stack.append((current, True))
        stack.extend((k, False) for k in kids if id(k) not in memo)
    return memo[id(node)]


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [n for pair in node.value for n in pair]
    return []


class LimitedSafeLoader(yaml.SafeLoader):
    """SafeLoader that refuses deep nesting, recursive aliases and aliases that expand too far."""

    def __init__(self, stream: str | bytes) -> None:
        super().__init__(stream)
        self._depth = 0
        self._open_anchors: set[str] = set()
        self._alias_total = 0
        self._sizes: dict[int, int] = {}

    def fetch_flow_collection_start(self, TokenClass: type[Token]) -> None:  # noqa: N803 - PyYAML's signature
        """Stop at the first '[' or '{' beyond the depth limit, before the scanner looks further ahead."""
        if self.flow_level >= MAX_DEPTH:
            raise InputLimitError(f"nesting deeper than {MAX_DEPTH} levels", line=self.line + 1)
        super().fetch_flow_collection_start(TokenClass)

    def add_indent(self, column: int) -> bool:
        """Stop at the first block level beyond the depth limit."""
        if len(self.indents) >= MAX_DEPTH:
            raise InputLimitError(f"nesting deeper than {MAX_DEPTH} levels", line=self.line + 1)
        return super().add_indent(column)

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        """Compose one node, counting depth and what each alias expands to."""
        event = self.peek_event()
        line = event.start_mark.line + 1
        if isinstance(event, AliasEvent):
            anchor = event.anchor
            if anchor in self._open_anchors:
                raise InputLimitError(f"YAML alias *{anchor} refers to a node that contains it (recursive alias)", line=line)
            node = super().compose_node(parent, index)
            assert node is not None  # an alias event always composes the node it names
            size = _expanded_size(node, self._sizes)
            if size > MAX_ALIAS_NODES:
                raise InputLimitError(
                    f"YAML alias *{anchor} expands to {size} nodes (limit {MAX_ALIAS_NODES})", line=line
                )
            self._alias_total += size
            if self._alias_total > MAX_ALIAS_TOTAL:
                raise InputLimitError(
                    f"YAML aliases expand the document by more than {MAX_ALIAS_TOTAL} nodes (alias bomb?)", line=line
                )
            return node
        anchor = event.anchor if isinstance(event, ScalarEvent | SequenceStartEvent | MappingStartEvent) else None
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise InputLimitError(f"nesting deeper than {MAX_DEPTH} levels", line=line)
        if anchor:
            self._open_anchors.add(anchor)
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1
            if anchor:
                self._open_anchors.discard(anchor)


def compose_yaml(text: str) -> Node | None:
    """Compose one YAML document within the limits; raise InputLimitError or yaml.YAMLError."""
    loader = LimitedSafeLoader(text)
    try:
        return loader.get_single_node()
    finally:
        loader.dispose()


def construct_yaml(node: Node | None) -> object:
    """Build Python values from a node composed by compose_yaml."""
    if node is None:
        return None
    loader = LimitedSafeLoader("")
    try:
        return loader.construct_document(node)
    finally:
        loader.dispose()


def load_yaml(text: str) -> Any:
    """Parse one YAML document like yaml.safe_load, within the limits (InputLimitError names the line).

    Untyped, as yaml.safe_load's: the readers validate what they get (pydantic models, or a check per field).
    """
    return construct_yaml(compose_yaml(text))


def yaml_error_line(exc: yaml.YAMLError) -> int | None:
    """Return the 1-based line a PyYAML error points at, if any."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    return mark.line + 1 if mark is not None else None


def check_depth(value: object, *, limit: int = MAX_DEPTH) -> None:
    """Raise InputLimitError when lists/dicts in `value` nest deeper than `limit` (iterative, no recursion)."""
    if not isinstance(value, dict | list):
        return
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        current, depth = stack.pop()
        if depth > limit:
            raise InputLimitError(f"nesting deeper than {limit} levels")
        children: Iterable[object] = current.values() if isinstance(current, dict) else current if isinstance(current, list) else ()
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))


class JsonContentError(InputLimitError):
    """JSON that parses but holds what no field may: a lone surrogate, a NUL, a key given twice; `field` names where."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.reason = message


class _Object(dict[str, Any]):
    """A parsed JSON object that remembers the first key it was given twice."""

    duplicate: str | None = None


def _object(pairs: list[tuple[str, Any]]) -> _Object:
    out = _Object()
    for key, value in pairs:
        if key in out and out.duplicate is None:
            out.duplicate = key
        out[key] = value
    return out


def _text_problem(text: str) -> str | None:
    """Return why a parsed string may not be stored (a NUL, a lone surrogate), or None."""
    if "\x00" in text:
        return "contains a NUL character (\\u0000), which text may not hold"
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            return f"contains a lone UTF-16 surrogate (\\u{ord(text[exc.start]):04x}), which is not Unicode text"
    return None


def _path(parent: str, key: str | int) -> str:
    return str(key) if parent == "" else f"{parent}.{key}"


def check_json_content(value: object, *, limit: int = MAX_DEPTH) -> None:
    """Raise InputLimitError for nesting deeper than `limit`, JsonContentError naming the field for a key given
    twice in one object (as parsed by loads_json), a NUL or a lone surrogate in any key or string."""
    stack: list[tuple[object, str, int]] = [(value, "", 0)]
    while stack:
        current, path, depth = stack.pop()
        if isinstance(current, str):
            problem = _text_problem(current)
            if problem:
                raise JsonContentError(problem, field=path or "(body)")
            continue
        if not isinstance(current, dict | list):
            continue
        if depth + 1 > limit:
            raise InputLimitError(f"nesting deeper than {limit} levels")
        if isinstance(current, _Object) and current.duplicate is not None:
            key = current.duplicate
            raise JsonContentError(
                f"the key {key!r} is given twice in one object (duplicate keys are refused, not last-one-wins)",
                field=_path(path, key),
            )
        if isinstance(current, dict):
            for key, child in reversed(list(current.items())):
                problem = _text_problem(key)
                if problem:
                    raise JsonContentError(f"a key {problem}", field=path or "(body)")
                stack.append((child, _path(path, key), depth + 1))
        else:
            stack.extend((child, _path(path, i), depth + 1) for i, child in reversed(list(enumerate(current))))


def loads_json(text: str | bytes, *, limit: int = MAX_DEPTH, strict: bool = True) -> Any:
    """Parse JSON like json.loads, refusing nesting deeper than `limit` (no RecursionError escapes), keys given
    twice in one object, and NUL characters or lone surrogates in any string (JsonContentError names the field).

    Issue 41: json.loads keeps the last of two equal keys and returns "\\ud800" as a lone surrogate,
    which no database text column can store (a 500 on PostgreSQL and SQLite alike); a NUL reached
    PostgreSQL as a driver error. They are refused here, where the field is still known.
    `strict=False` checks the depth only, for a reader that judges each record's fields itself
    (POST /api/v1/events: a NUL makes one event invalid, not the batch).
    """
    try:
        value = json.loads(text, object_pairs_hook=_object if strict else None)
    except RecursionError as exc:
        raise InputLimitError(f"nesting deeper than {limit} levels") from exc
    if strict:
        check_json_content(value, limit=limit)
    else:
        check_depth(value, limit=limit)
    return value
