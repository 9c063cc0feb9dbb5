"""The judge's signals per draft (issue 35): the shapes stored in `ppi_judge_score.signals`, their checks,
and the log-probability expectation of a judge answer's scores.

Stored shape (the comment on `PpiJudgeScore.signals` in webapp/ppi/models.py; the report reads it):
`{"calls": [CriterionScores, ...], "second": CriterionScores | None, "expected": ExpectedScores | None}`.

**Decision: finding the score tokens in a JSON answer.** The judge answers the rubric's JSON
object, e.g. `{"factual_accuracy": 1, "citation_relevance": 4, ...}`. For each criterion the
first `"<name>": <integer>` in the answer's text gives the character where its digit stands; the
answer's tokens (concatenated, they are the answer's text) give the token that starts there. That
token must be the number itself (spaces around it allowed): otherwise the expectation is not
computed for the answer (`expected` stays None) rather than guessed. At that token the
alternatives are its `top_logprobs` plus the chosen token itself; alternatives that read as an
integer on the criterion's scale are kept (" 4" and "4" both count for 4), their probabilities
renormalised to sum to 1 (the mass of other tokens, such as a quote or a space, is left out), and
the expected score is sum(v x p(v)). For factual accuracy (0-1) that is P(pass).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Literal, NotRequired, TypedDict

from webapp.evaluator.client import TokenLogprob

# The scales the PPI tables and the estimator expect of each criterion.
REQUIRED_SCALES: dict[str, tuple[int, int]] = {
    "factual_accuracy": (0, 1),
    "citation_relevance": (1, 5),
    "tone": (1, 5),
    "completeness": (1, 5),
}
ScaleName = Literal["citation_relevance", "tone", "completeness"]
SCALE_NAMES: tuple[ScaleName, ...] = ("citation_relevance", "tone", "completeness")


class CriterionScores(TypedDict):
    """One judge answer's four criteria as stored: factual accuracy "pass"/"fail", the others 1-5."""

    factual_accuracy: str
    citation_relevance: float
    tone: float
    completeness: float


class ExpectedScores(TypedDict):
    """The expected score of each criterion under the answer's log-probabilities (factual accuracy: P(pass))."""

    factual_accuracy: float
    citation_relevance: float
    tone: float
    completeness: float


class JudgeSignals(TypedDict):
    """A draft's judge signals: the primary judge's parsed calls in call order, the second judge, the expectation."""

    calls: list[CriterionScores]
    second: CriterionScores | None
    expected: ExpectedScores | None


class RawCall(TypedDict):
    """One judge call as stored in `ppi_judge_score.raw_calls` (failed calls too: `response` or `error` None)."""

    judge: str  # "primary" | "second"
    index: int  # the call's number for its judge, 0-based: its sample_index
    model: str
    request: dict[str, object]  # as sent: model, messages, temperature, seed, response_format (+ logprobs)
    response: str | None  # the answer's raw text; None when the request failed
    error: str | None  # why the call gave no score (request failed, or the answer does not parse)
    cached: bool
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None
    # per criterion, each score's probability at its token (keys are the scores; JSON makes them strings)
    score_probabilities: NotRequired[dict[str, dict[int, float]]]


def score_distributions(
    tokens: Sequence[TokenLogprob], content: str, scales: Mapping[str, tuple[int, int]] = REQUIRED_SCALES
) -> dict[str, dict[int, float]] | None:
    """Return, per criterion, the probability of each score on its scale at the answer's score token (None if not found)."""
    if "".join(t.token for t in tokens) != content:
        return None  # the tokens are not this answer's: no offsets to trust
    starts: dict[int, TokenLogprob] = {}
    offset = 0
    for t in tokens:
        starts[offset] = t
        offset += len(t.token)
    out: dict[str, dict[int, float]] = {}
    for name, (lo, hi) in scales.items():
        m = re.search(rf'"{re.escape(name)}"\s*:\s*(-?\d+)', content)
        if m is None:
            return None
        token = starts.get(m.start(1)) or starts.get(
            m.start(1) - 1
        )  # the digit's token may carry the space before it
        if token is None or token.token.strip() != m.group(1):
            return None
        alternatives = dict(token.top)
        alternatives.setdefault(token.token, token.logprob)
        probs: dict[int, float] = {}
        for text, logprob in alternatives.items():
            value = _integer(text)
            if value is not None and lo <= value <= hi:
                probs[value] = probs.get(value, 0.0) + math.exp(logprob)
        total = sum(probs.values())
        if total <= 0:
            return None
        out[name] = {v: p / total for v, p in sorted(probs.items())}
    return out


def _integer(text: str) -> int | None:
    text = text.strip()
    return int(text) if re.fullmatch(r"-?\d+", text) else None


def expected_scores(distributions: Mapping[str, Mapping[int, float]]) -> ExpectedScores:
    """Return each criterion's expected score under its distribution (0-1 factual accuracy: P(pass))."""

    def mean(name: str) -> float:
        return sum(v * p for v, p in distributions[name].items())

    return ExpectedScores(
        factual_accuracy=mean("factual_accuracy"),
        citation_relevance=mean("citation_relevance"),
        tone=mean("tone"),
        completeness=mean("completeness"),
    )


def check_signals(signals: JudgeSignals, where: str, scale: tuple[int, int]) -> None:
    """Raise ValueError naming the field when a signal is off its scale or the shape is wrong."""
    if not signals["calls"]:
        raise ValueError(f"{where}.calls: at least one parsed call")
    for i, call in enumerate(signals["calls"]):
        check_criteria(call, f"{where}.calls[{i}]", scale)
    if signals["second"] is not None:
        check_criteria(signals["second"], f"{where}.second", scale)
    expected = signals["expected"]
    if expected is not None:
        if not 0.0 <= expected["factual_accuracy"] <= 1.0:
            raise ValueError(
                f"{where}.expected.factual_accuracy: P(pass) {expected['factual_accuracy']} is outside 0-1"
            )
        check_scales(expected, f"{where}.expected", scale)


def check_criteria(scores: CriterionScores, where: str, scale: tuple[int, int]) -> None:
    """Raise ValueError naming the field when factual accuracy is not pass/fail or a scale score is off the scale."""
    if scores["factual_accuracy"] not in ("pass", "fail"):
        raise ValueError(
            f"{where}.factual_accuracy: expected pass or fail, got {scores['factual_accuracy']!r}"
        )
    check_scales(scores, where, scale)


def check_scales(scores: CriterionScores | ExpectedScores, where: str, scale: tuple[int, int]) -> None:
    """Raise ValueError naming the field when one of the three scale scores lies off the scale."""
    for name in SCALE_NAMES:
        value = float(scores[name])
        if not scale[0] <= value <= scale[1]:
            raise ValueError(f"{where}.{name}: {value} is outside {scale[0]}-{scale[1]}")
