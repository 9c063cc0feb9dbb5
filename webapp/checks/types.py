"""Plain inputs and results of the automated checks, free of the database.

The checks in webapp/checks/rules.py (the spec's seven and `expected_behavior`) take these, so that
the dashboard (drafts in the database) and prompt-evaluator (samples in memory) run exactly the same code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# The KB as the checks see it is the KB's own plain snapshot (the checks read the KB, never the reverse).
# (Named here too for prompt-evaluator's support code, which reads all the checks' inputs from this module.)
from webapp.kb.snapshot import KbRevisionInfo as KbRevisionInfo

CheckStatus = Literal["pass", "fail", "not_applicable"]
CHECK_STATUSES: tuple[CheckStatus, ...] = ("pass", "fail", "not_applicable")


def check_status(value: str) -> CheckStatus:
    """Read a stored status back as a CheckStatus; raise ValueError for any other text."""
    for status in CHECK_STATUSES:
        if status == value:
            return status
    raise ValueError(f"status: {value!r} is not one of {', '.join(CHECK_STATUSES)}")


# The kinds of regression alert a check (or a final grade) raises, stored by webapp.regression.models.RegressionAlert:
# a golden example fails a check, a golden example's final human grade is not factual, the pass rate dropped from the
# baseline. Named here, below the regression domain, because the re-check API answers with the alerts it raised.
RegressionAlertKind = Literal["golden_check", "golden_factual", "pass_rate_drop"]

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
    # The case's own expectations (a golden example's "confidence above 0.8", "both articles are cited").
    "case_expectations",
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
    # What the case expects of the response beyond its behaviour (all optional; see docs/data-in.md):
    expected_confidence_above: float | None = None  # strictly above ("confidence above 0.8")
    expected_confidence_min: float | None = None  # at least ("between 0.6 and 0.8": both ends count)
    expected_confidence_max: float | None = None  # at most
    expected_citations: tuple[str, ...] = ()  # article ids the draft must all cite

    @property
    def has_expectations(self) -> bool:
        bounds = (self.expected_confidence_above, self.expected_confidence_min, self.expected_confidence_max)
        return any(b is not None for b in bounds) or bool(self.expected_citations)


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
