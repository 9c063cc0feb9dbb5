"""Every revision of every KB article with its status: a plain snapshot, free of the database.

The automated checks (webapp/checks/rules.py) judge citations against it, in the dashboard (built
from the database by kb.service.kb_snapshot) and in prompt-evaluator (built from a KB file).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class KbRevisionInfo:
    article_id: str
    revision: int
    status: str  # current | deprecated | deleted


@dataclass
class KbSnapshot:
    """Every revision of every article, as of the moment the checks run."""

    revisions: dict[tuple[str, int], KbRevisionInfo] = field(default_factory=dict)
    current: dict[str, int] = field(default_factory=dict)  # article_id -> current revision

    def add(self, article_id: str, revision: int, status: str) -> None:
        self.revisions[(article_id, revision)] = KbRevisionInfo(article_id, revision, status)
        if status == "current":
            self.current[article_id] = revision

    def knows(self, article_id: str) -> bool:
        return any(a == article_id for a, _ in self.revisions)
