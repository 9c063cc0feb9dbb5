"""The PPI figures' intervals stay within what the figure can be, and the gate's "above" is strict."""

from __future__ import annotations

from webapp.ppi.estimator import Estimate
from webapp.ppi.report import FIGURE_RANGE, GateCall, gate_call, within_range


def _estimate(estimate: float, low: float, high: float, n_labels: int = 100) -> Estimate:
    return Estimate(
        estimate=estimate, low=low, high=high, se=(high - low) / 3.92, df=99.0, confidence=0.95,
        lambdas=(1.0, 1.0), judge_alone=estimate, human_only_se=0.1, n_labels=n_labels, n_drafts=300,
    )


def test_a_share_interval_is_cut_to_0_and_1() -> None:
    # the demo's factual accuracy read "97% [79%, 116%]"
    cut = within_range(_estimate(0.97, 0.79, 1.16), *FIGURE_RANGE["factual_accuracy"])
    assert (cut.estimate, cut.low, cut.high) == (0.97, 0.79, 1.0)
    cut = within_range(_estimate(0.02, -0.05, 0.09), *FIGURE_RANGE["pass_rate"])
    assert (cut.low, cut.high) == (0.0, 0.09)


def test_a_score_interval_is_cut_to_1_and_5() -> None:
    cut = within_range(_estimate(4.9, 4.7, 5.1), *FIGURE_RANGE["tone"])
    assert (cut.low, cut.high) == (4.7, 5.0)
    inside = within_range(_estimate(4.09, 3.95, 4.23), *FIGURE_RANGE["completeness"])
    assert (inside.low, inside.high) == (3.95, 4.23)


def test_a_lower_bound_at_the_threshold_does_not_pass_above_it() -> None:
    assert gate_call(_estimate(3.6, 3.5, 3.7), 3.5).verdict == "undecided"
    assert gate_call(_estimate(3.6, 3.5000001, 3.7), 3.5).verdict == "pass"


def test_an_upper_bound_at_the_threshold_fails() -> None:
    assert gate_call(_estimate(3.4, 3.3, 3.5), 3.5).verdict == "fail"
    assert gate_call(_estimate(3.4, 3.3, 3.5000001), 3.5).verdict == "undecided"


def test_more_grades_than_the_run_has_left_are_not_promised() -> None:
    # 100 grades, half-width 0.25, estimate 0.0625 above 3.5: 100 x (0.25 / 0.0625)^2 = 1,600 grades
    # would decide, 1,500 more (binary-exact values, worked out by hand)
    near = _estimate(3.5625, 3.3125, 3.8125)
    assert gate_call(near, 3.5).more_grades == 1500
    assert gate_call(near, 3.5, undrawn=2000).more_grades == 1500
    # a run with 1,000 drafts not yet drawn cannot give 1,500 more grades: no count is promised
    assert gate_call(near, 3.5, undrawn=1000) == GateCall("undecided", None)
