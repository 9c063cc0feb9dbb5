"""The judge's signals (webapp/ppi/signals.py): the matrix, the diagnostics and the gate's choice, against hand-worked values."""

from __future__ import annotations

import numpy as np
import pytest

from webapp.core.spec import EvalSpec
from webapp.ppi.estimator import Estimate
from webapp.ppi.signals import (
    DraftSignals,
    call_to_call_share,
    choose,
    error_correlation,
    figure_values,
    parse_signals,
    signal_matrix,
)


def estimate(se: float, *, n: int = 100, human_only_se: float = 0.1) -> Estimate:
    """An estimate whose worth is n (human_only_se / se)^2 human-only grades."""
    return Estimate(
        estimate=3.6, low=3.6 - 2 * se, high=3.6 + 2 * se, se=se, df=n - 1, confidence=0.95, lambdas=(1.0,),
        judge_alone=3.7, human_only_se=human_only_se, n_labels=n, n_drafts=1000,
    )


def signals(calls: list[tuple[str, float, float, float]], second: tuple[str, float, float, float] | None = None,
            expected: tuple[float, float, float, float] | None = None) -> DraftSignals:
    return DraftSignals(calls=tuple(calls), second=second, expected=expected)


class TestCallToCallShare:
    def test_hand_worked(self) -> None:
        # Three graded drafts. Calls [3, 5], human 3: calls' variance 2, first call's error 0.
        # Calls [4, 4], human 3: variance 0, error +1. Calls [2, 4, 3], human 4: variance 1, error -2.
        # Within-draft variance: (2 + 0 + 1) / 3 = 1. Errors 0, 1, -2: mean -1/3, squared deviations
        # 1/9 + 16/9 + 25/9 = 42/9, ddof 1: 21/9 = 7/3. Share 1 / (7/3) = 3/7.
        calls = [np.array([3.0, 5.0]), np.array([4.0, 4.0]), np.array([2.0, 4.0, 3.0])]
        assert call_to_call_share(calls, np.array([3.0, 3.0, 4.0])) == pytest.approx(3 / 7, abs=1e-12)

    def test_drafts_with_one_call_are_left_out(self) -> None:
        calls = [np.array([3.0, 5.0]), np.array([4.0, 4.0]), np.array([2.0, 4.0, 3.0]), np.array([1.0])]
        assert call_to_call_share(calls, np.array([3.0, 3.0, 4.0, 5.0])) == pytest.approx(3 / 7, abs=1e-12)

    def test_none_without_two_drafts_or_without_error_spread(self) -> None:
        assert call_to_call_share([np.array([3.0, 5.0]), np.array([4.0])], np.array([3.0, 4.0])) is None
        # first calls' errors all +1: no spread to share out
        assert call_to_call_share([np.array([4.0, 5.0]), np.array([3.0, 3.0])], np.array([3.0, 2.0])) is None


class TestErrorCorrelation:
    def test_hand_worked(self) -> None:
        # errors a = (1, 0, -1, 0), b = (1, 1, -1, -1): means 0; cov 2/4, var a 2/4, var b 4/4;
        # corr = 0.5 / sqrt(0.5 x 1) = 1/sqrt(2)
        human = np.array([3.0, 3.0, 3.0, 3.0])
        corr = error_correlation(np.array([4.0, 3.0, 2.0, 3.0]), np.array([4.0, 4.0, 2.0, 2.0]), human)
        assert corr == pytest.approx(1 / np.sqrt(2), abs=1e-12)

    def test_none_below_three_drafts_or_without_spread(self) -> None:
        assert error_correlation(np.array([4.0, 3.0]), np.array([4.0, 2.0]), np.array([3.0, 3.0])) is None
        assert error_correlation(np.array([4.0, 4.0, 4.0]), np.array([4.0, 2.0, 3.0]), np.array([3.0, 3.0, 3.0])) is None


class TestChoice:
    """Learned only when it pays: worth >= 1.2 x the human grades and >= the single score's worth (worth = n (se_h / se)^2)."""

    def test_learned_that_pays_is_used(self) -> None:
        single, learned = estimate(0.08), estimate(0.07)  # worth 156.25 and 204.08 from 100 grades
        assert learned.effective_labels == pytest.approx(100 * (0.1 / 0.07) ** 2)
        choice = choose(single, learned)
        assert choice.uses_learned and choice.estimate is learned and choice.note is None

    def test_learned_above_the_grades_but_below_the_single_score_is_not_used(self) -> None:
        single, learned = estimate(0.08), estimate(0.085)  # worth 156.25 vs 138.41: >= 120 but below the single score
        choice = choose(single, learned)
        assert not choice.uses_learned and choice.estimate is single
        assert choice.note == "the extra signals do not pay here (worth 138 vs 156): the gate uses the single-score estimate"

    def test_learned_better_than_single_but_below_1_2_times_the_grades_is_not_used(self) -> None:
        single, learned = estimate(0.1), estimate(0.095)  # worth 100 vs 110.8: better, but below 120
        choice = choose(single, learned)
        assert not choice.uses_learned and choice.estimate is single
        assert choice.note is not None and "worth 111 vs 100" in choice.note
        # exactly 1.2 x the grades pays (at least): se = 0.1 / sqrt(1.2)
        assert choose(single, estimate(0.1 / np.sqrt(1.2) - 1e-12)).uses_learned

    def test_without_a_learned_estimate_the_single_one_is_used_silently(self) -> None:
        single = estimate(0.08)
        assert choose(single, None).estimate is single and choose(single, None).note is None
        assert choose(None, None).estimate is None


class TestMatrix:
    def test_columns_and_values_hand_worked(self, spec: EvalSpec) -> None:
        # tone: draft 1 calls 4 and 2 (mean 3, sd sqrt 2), second judge 5, expectation 3.5;
        # draft 2 calls 3 and 3 (mean 3, sd 0), second 4, expectation 2.75
        rows = [
            signals([("pass", 3, 4, 3), ("pass", 3, 2, 3)], ("pass", 3, 5, 3), (0.9, 3.0, 3.5, 3.0)),
            signals([("fail", 2, 3, 3), ("pass", 2, 3, 3)], ("fail", 2, 4, 3), (0.4, 2.0, 2.75, 3.0)),
        ]
        m = signal_matrix(spec, "tone", rows)
        assert m is not None and m.columns == ("calls_mean", "calls_sd", "second", "expected")
        np.testing.assert_allclose(m.values, [[3.0, np.sqrt(2), 5.0, 3.5], [3.0, 0.0, 4.0, 2.75]], atol=1e-12)
        fa = signal_matrix(spec, "factual_accuracy", rows)
        assert fa is not None
        # factual: draft 2's calls fail, pass: mean 0.5, sd sqrt(0.5); the expectation is P(pass)
        np.testing.assert_allclose(fa.values, [[1.0, 0.0, 1.0, 0.9], [0.5, np.sqrt(0.5), 0.0, 0.4]], atol=1e-12)

    def test_a_column_only_when_every_draft_has_it(self, spec: EvalSpec) -> None:
        rows = [
            signals([("pass", 3, 4, 3), ("pass", 3, 2, 3)], ("pass", 3, 5, 3)),
            signals([("pass", 3, 3, 3)], None, (1.0, 3.0, 3.0, 3.0)),
        ]
        m = signal_matrix(spec, "tone", rows)
        assert m is not None and m.columns == ("calls_mean",)  # one draft has one call, no second, no expectation
        np.testing.assert_allclose(m.values[:, 0], [3.0, 3.0])

    def test_no_learned_predictor_without_signals_or_with_the_single_score_alone(self, spec: EvalSpec) -> None:
        two = signals([("pass", 3, 4, 3), ("pass", 3, 2, 3)])
        assert signal_matrix(spec, "tone", [two, None]) is None  # a row judged before issue 35
        assert signal_matrix(spec, "tone", [signals([("pass", 3, 4, 3)]), signals([("pass", 3, 2, 3)])]) is None

    def test_pass_rate_and_overall_from_each_call_and_from_the_expectation(self, spec: EvalSpec) -> None:
        by_key = {c.key: c for c in spec.rubric.criteria}
        th = [float(by_key[k].pass_threshold or 0) for k in ("citation_relevance", "tone", "completeness")]
        high = ("pass", th[0], th[1], th[2])  # every scale at its threshold: passes
        low = ("pass", th[0], th[1] - 1, th[2])
        assert figure_values(spec, "pass_rate", [high, low, ("fail", *high[1:])]).tolist() == [1.0, 0.0, 0.0]
        # expectation: P(pass) 0.8 where the scales clear, 0 otherwise
        assert figure_values(spec, "pass_rate", [(0.8, *high[1:]), (0.8, *low[1:])]).tolist() == pytest.approx([0.8, 0.0])
        g = spec.gates.pilot
        # overall: (fail + 0.8 (pass - fail) + 3 + 4 + 2) / 4
        expected = (g.factual_fail_score + 0.8 * (g.factual_pass_score - g.factual_fail_score) + 9) / 4
        assert figure_values(spec, "overall", [(0.8, 3.0, 4.0, 2.0)])[0] == pytest.approx(expected, abs=1e-12)


class TestStored:
    def test_parse(self) -> None:
        call = {"factual_accuracy": "pass", "citation_relevance": 4, "tone": 3.5, "completeness": 5}
        expected = {"factual_accuracy": 0.7, "citation_relevance": 4.1, "tone": 3.4, "completeness": 4.9}
        parsed = parse_signals({"calls": [call, {**call, "tone": 4}], "second": call, "expected": expected})
        assert parsed == DraftSignals(
            calls=(("pass", 4.0, 3.5, 5.0), ("pass", 4.0, 4.0, 5.0)), second=("pass", 4.0, 3.5, 5.0), expected=(0.7, 4.1, 3.4, 4.9)
        )
        assert parse_signals(None) is None
        assert parse_signals({"calls": []}) is None  # no parsed call: the plain columns alone
        assert parse_signals({"calls": [{"tone": 3}]}) is None  # a shape this code does not know: the single score
