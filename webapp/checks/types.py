"""Plain inputs and results of the automated checks, free of the database.

The checks in webapp/checks/rules.py (the spec's seven and `expected_behavior`) take these, so that
the dashboard (drafts in the database) and prompt-evaluator (samples in memory) run exactly the same code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

CheckStatus = Literal["pass", "fail", "not_applicable"]

CHECK_KEYS: tuple[str, ...] = (
    "citations_current",
    "length",
    "no_pii",
    "confidence_present",
    "intent_supported",
    "low_confidence_fallback",
    "safety_escalation",
    # Beyond the spec's seven: the assistant drafted, fell back or escalated as the case expects.
    "expected_behavior",
)


@dataclass(frozen=True)
class Citation:
    article_id: str
    revision: int | None = None


@dataclass(frozen=True)
class DraftInput:
    """What the assistant produced for one case."""

    draft_text: str | None
    citations: tuple[Citation, ...] = ()
    confidence: float | None = None
    intent: str | None = None
    escalated: bool = False


@dataclass(frozen=True)
class CaseInput:
    """What the checks need to know of the case."""

    case_id: str
    input: str
    category: str | None = None
    expected_behavior: str | None = None  # draft | escalate | fallback
    golden: bool = False


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


@dataclass(frozen=True)
class CheckResult:
    key: str
    status: CheckStatus
    reason: str

    @property
    def passed(self) -> bool:
        return self.status == "pass"

    @property
    def failed(self) -> bool:
        return self.status == "fail"
