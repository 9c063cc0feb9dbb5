"""Rubric scores: validation against the spec, and when two grades disagree."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypedDict

from webapp.core.spec import RUBRIC_COLUMNS, EvalSpec
from webapp.grading.errors import GradeInvalid
from webapp.grading.models import (
    FactualVerdict,
    Grade,
    ReferenceGrade,
)

GRADER_ROLES = ("labeler", "lead")

SCALE_KEYS = tuple(k for k, kind in RUBRIC_COLUMNS.items() if kind == "scale")
FACTUAL_KEY = "factual_accuracy"
# A grade's scores and rationale by column: the rubric's criteria, rationale and unsupported_claim.
ScoreValues = dict[str, str | int | None]

# Scores


class ScoreColumns(TypedDict):
    """Validated scores by column of the grade tables."""

    factual_accuracy: FactualVerdict
    citation_relevance: int
    tone: int
    completeness: int
    rationale: str
    unsupported_claim: str | None



@dataclass(frozen=True)
class Scores:
    """A validated set of rubric scores with the rationale."""

    factual_accuracy: FactualVerdict
    citation_relevance: int
    tone: int
    completeness: int
    rationale: str = ""
    unsupported_claim: str | None = None

    def as_dict(self) -> ScoreColumns:
        """Return the scores by column (for inserts, history and exports)."""
        return ScoreColumns(
            factual_accuracy=self.factual_accuracy,
            citation_relevance=self.citation_relevance,
            tone=self.tone,
            completeness=self.completeness,
            rationale=self.rationale,
            unsupported_claim=self.unsupported_claim,
        )


def validate_scores(*, spec: EvalSpec, data: Mapping[str, object], require_rationale: bool = False) -> Scores:
    """Check raw scores against the spec's rubric; raise GradeInvalid naming the first bad field."""
    factual = str(data.get(FACTUAL_KEY) or "").strip().lower()
    if factual not in ("pass", "fail"):
        raise GradeInvalid(
            f"{FACTUAL_KEY}: choose pass or fail (got {data.get(FACTUAL_KEY)!r})", field=FACTUAL_KEY
        )
    values: dict[str, int] = {}
    for criterion in spec.rubric.scales:
        raw = data.get(criterion.key)
        try:
            value = int(str(raw).strip()) if raw is not None and not isinstance(raw, bool) else None
            if value is not None and isinstance(raw, float) and raw != value:
                value = None
        except ValueError:
            value = None
        assert criterion.min is not None and criterion.max is not None
        if value is None or not criterion.min <= value <= criterion.max:
            raise GradeInvalid(
                f"{criterion.key}: score must be a whole number from {criterion.min} to {criterion.max} (got {raw!r})",
                field=criterion.key,
            )
        values[criterion.key] = value
    rationale = str(data.get("rationale") or "").strip()
    if require_rationale and not rationale:
        raise GradeInvalid("rationale: write a short rationale", field="rationale")
    claim = str(data.get("unsupported_claim") or "").strip() or None
    if factual == "fail" and not claim:
        raise GradeInvalid(
            "unsupported_claim: a factual 'fail' needs the claim that is not in the KB, quoted from the draft",
            field="unsupported_claim",
        )
    return Scores(
        factual_accuracy=factual,
        citation_relevance=values["citation_relevance"],
        tone=values["tone"],
        completeness=values["completeness"],
        rationale=rationale,
        unsupported_claim=claim if factual == "fail" else None,
    )


def refuse_claim_on_pass(data: Mapping[str, object]) -> None:
    """Refuse a factual 'pass' that still quotes an unsupported claim (the two contradict each other)."""
    factual = str(data.get(FACTUAL_KEY) or "").strip().lower()
    claim = str(data.get("unsupported_claim") or "").strip()
    if factual == "pass" and claim:
        raise GradeInvalid(
            "unsupported_claim: a factual 'pass' cannot keep an unsupported claim; clear the claim"
            " or grade factual accuracy 'fail'",
            field="unsupported_claim",
        )


def check_claim_in_draft(draft_text: str | None, scores: Scores) -> None:
    """A quoted claim must come from the draft, so the lead can find it (whitespace and case forgiven)."""
    if scores.unsupported_claim and draft_text:
        needle = " ".join(scores.unsupported_claim.strip("\"'“”").split()).lower()
        hay = " ".join(draft_text.split()).lower()
        if needle not in hay:
            raise GradeInvalid(
                "unsupported_claim: quote the claim exactly as it appears in the draft",
                field="unsupported_claim",
            )


def scores_of(grade: Grade | ReferenceGrade) -> ScoreValues:
    """Return a grade's scores and rationale as a plain dict."""
    return {
        FACTUAL_KEY: grade.factual_accuracy,
        "citation_relevance": grade.citation_relevance,
        "tone": grade.tone,
        "completeness": grade.completeness,
        "rationale": grade.rationale,
        "unsupported_claim": grade.unsupported_claim,
    }


def _score(scores: Mapping[str, object], key: str) -> int | float:
    """Return a scale's score from a grade's scores (a number: grades store whole numbers, final grades means)."""
    value = scores[key]
    assert isinstance(value, int | float), f"{key}: not a score: {value!r}"
    return value


def disagreement_reasons(*, spec: EvalSpec, a: Mapping[str, object], b: Mapping[str, object]) -> list[str]:
    """Return why two grades disagree under the spec's rules (empty when they agree)."""
    rules = spec.grading.disagreement
    reasons: list[str] = []
    if a[FACTUAL_KEY] != b[FACTUAL_KEY]:
        reasons.append(f"{FACTUAL_KEY}: {a[FACTUAL_KEY]} vs {b[FACTUAL_KEY]}")
    for criterion in spec.rubric.scales:
        x, y = _score(a, criterion.key), _score(b, criterion.key)
        threshold = criterion.pass_threshold
        assert threshold is not None  # every scale has one (webapp.core.spec)
        if abs(x - y) >= rules.scale_difference:
            reasons.append(f"{criterion.key}: {x} vs {y} differ by {abs(x - y)}")
        elif rules.opposite_sides_of_threshold and (x >= threshold) != (y >= threshold):
            reasons.append(f"{criterion.key}: {x} vs {y} on opposite sides of the pass threshold {threshold}")
    return reasons


def all_reasons(spec: EvalSpec, grades: list[Grade]) -> list[str]:
    reasons: list[str] = []
    for g1, g2 in itertools.combinations(grades, 2):
        reasons.extend(disagreement_reasons(spec=spec, a=scores_of(g1), b=scores_of(g2)))
    return reasons
