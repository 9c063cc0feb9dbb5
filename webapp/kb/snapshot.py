"""Every revision of every KB article with its status: a plain snapshot, free of the database.

The automated checks (webapp/checks/rules.py) judge citations against it, in the dashboard (built
from the database by kb.service.kb_snapshot) and in prompt-evaluator (built from a KB file).

Stored revisions never change (issue 41): a revision keeps the status it was stored with (its
*stated* status), and what a revision is *now* follows from the article's newest revision
(`revision_states`, the one rule every page, check and API answer reads): the newest revision's
stated status is the article's state; an older revision stated current has been superseded and
reads "deprecated"; every revision of an article whose newest revision is "deleted" reads "deleted".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field


def revision_states(rows: Iterable[tuple[str, int, str]]) -> dict[tuple[str, int], str]:
    """Return what each revision is now, from (article id, revision, stated status) of every revision of the articles."""
    rows = list(rows)
    newest: dict[str, tuple[int, str]] = {}
    for article_id, revision, stated in rows:
        if article_id not in newest or revision > newest[article_id][0]:
            newest[article_id] = (revision, stated)
    out: dict[tuple[str, int], str] = {}
    for article_id, revision, stated in rows:
        top, top_status = newest[article_id]
        if revision == top:
            out[(article_id, revision)] = stated
        elif top_status == "deleted":
            out[(article_id, revision)] = "deleted"
        else:
            out[(article_id, revision)] = "deprecated" if stated == "current" else stated
    return out


@dataclass(frozen=True)
class KbRevisionInfo:
    article_id: str
    revision: int
    status: str  # current | deprecated | deleted: what the revision is now (revision_states)


@dataclass
class KbSnapshot:
    """Every revision of every article, as of the moment the checks run."""

    revisions: dict[tuple[str, int], KbRevisionInfo] = field(default_factory=dict)
    current: dict[str, int] = field(default_factory=dict)  # article_id -> current revision

    @classmethod
    def of(cls, rows: Iterable[tuple[str, int, str]]) -> KbSnapshot:
        """Return the snapshot of (article id, revision, stated status) rows, each read by `revision_states`."""
        snap = cls()
        for (article_id, revision), status in sorted(revision_states(rows).items()):
            snap.add(article_id, revision, status)
        return snap

    def add(self, article_id: str, revision: int, status: str) -> None:
        self.revisions[(article_id, revision)] = KbRevisionInfo(article_id, revision, status)
        if status == "current":
            self.current[article_id] = revision

    def knows(self, article_id: str) -> bool:
        return any(a == article_id for a, _ in self.revisions)
