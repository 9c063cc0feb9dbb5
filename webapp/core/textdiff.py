"""Word-level differences between two texts (a draft and what was sent, or two runs' drafts)."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Literal

_TOKENS = re.compile(r"\s+|[^\s]+")


@dataclass(frozen=True)
class Segment:
    """A run of text that both sides share (`equal`), only the new side has (`insert`), or only the old (`delete`)."""

    op: Literal["equal", "insert", "delete"]
    text: str


def word_diff(old: str | None, new: str | None) -> list[Segment]:
    """Return the segments that turn `old` into `new`, compared word by word (whitespace kept)."""
    a, b = _TOKENS.findall(old or ""), _TOKENS.findall(new or "")
    # Words are compared without their surrounding whitespace, so a re-wrapped line is not a change.
    matcher = difflib.SequenceMatcher(a=[t.strip() or " " for t in a], b=[t.strip() or " " for t in b], autojunk=False)
    out: list[Segment] = []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            out.append(Segment("equal", "".join(b[j1:j2])))
            continue
        if i2 > i1:
            out.append(Segment("delete", "".join(a[i1:i2])))
        if j2 > j1:
            out.append(Segment("insert", "".join(b[j1:j2])))
    return out


def changed_words(segments: list[Segment]) -> tuple[int, int]:
    """Return how many words were removed and added."""
    removed = sum(len(s.text.split()) for s in segments if s.op == "delete")
    added = sum(len(s.text.split()) for s in segments if s.op == "insert")
    return removed, added
