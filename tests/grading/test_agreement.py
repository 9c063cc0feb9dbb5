"""Agreement statistics: kappa against scikit-learn and by hand, and the report built from grades."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score
from sqlmodel import Session

from tests.grading.conftest import GradingWorld, grade
from webapp.core.spec import EvalSpec
from webapp.grading.agreement import agreement_report
from webapp.grading.stats import cohen_kappa, exact_agreement


class TestCohenKappa:
    def test_unweighted_and_exact_agreement_by_hand(self) -> None:
        # 2x2 table: both pass 2, both fail 1, A pass/B fail 1 -> po = 3/4;
        # A: pass 3/4 fail 1/4; B: pass 2/4 fail 2/4 -> pe = 3/8 + 1/8 = 1/2; kappa = (3/4-1/2)/(1/2) = 0.5
        a = ["pass", "pass", "fail", "pass"]
        b = ["pass", "pass", "fail", "fail"]
        assert cohen_kappa(a, b, labels=["fail", "pass"]) == pytest.approx(0.5)
        assert exact_agreement([1, 2, 3, 4], [1, 2, 4, 4]) == 0.75  # 3 of 4 equal

    def test_quadratic_by_hand(self) -> None:
        # Scores (1,2), (2,1), (3,3) on a 1..3 scale. Observed weighted disagreement: 1 + 1 + 0 = 2.
        # Marginals A: 1,1,1 ; B: 1,1,1 -> expected cell = 1/3 each; sum (i-j)^2 over the 3x3 grid = 12, so sum w*E = 4.
        # kappa = 1 - 2 / 4 = 0.5
        assert cohen_kappa([1, 2, 3], [2, 1, 3], labels=[1, 2, 3], weights="quadratic") == pytest.approx(0.5)

    @pytest.mark.parametrize("seed", [0, 1, 2, 3])
    def test_matches_sklearn(self, seed: int) -> None:
        rng = np.random.default_rng(seed)
        a = rng.integers(1, 6, size=40).tolist()
        b = np.clip(np.array(a) + rng.integers(-2, 3, size=40), 1, 5).tolist()
        expected = cohen_kappa_score(a, b, labels=[1, 2, 3, 4, 5], weights="quadratic")
        assert cohen_kappa(a, b, labels=[1, 2, 3, 4, 5], weights="quadratic") == pytest.approx(expected)
        rng = np.random.default_rng(seed)
        a = rng.choice(["pass", "fail"], size=30).tolist()
        b = [x if rng.random() < 0.7 else ("fail" if x == "pass" else "pass") for x in a]
        assert cohen_kappa(a, b, labels=["fail", "pass"]) == pytest.approx(cohen_kappa_score(a, b))

    def test_undefined_when_one_category_only(self) -> None:
        assert cohen_kappa(["pass"] * 3, ["pass"] * 3, labels=["fail", "pass"]) is None
        assert cohen_kappa([], [], labels=["fail", "pass"]) is None


class TestAgreementReport:
    def _grade_pairs(
        self, session: Session, spec: EvalSpec, w: GradingWorld, pairs: list[tuple[tuple, tuple]]
    ) -> None:
        for i, pair in enumerate(pairs):
            for user, (fa, cr, tone, comp) in zip((w.alice, w.bob), pair, strict=True):
                now = dt.datetime(2026, 11, 10 + i * 3, tzinfo=dt.UTC)
                grade(session, spec, w, user, i, now=now, factual=fa, cr=cr, tone=tone, comp=comp)

    def test_report_numbers(self, session: Session, spec: EvalSpec, world: GradingWorld) -> None:
        w = world
        pairs = [
            (("pass", 4, 4, 4), ("pass", 4, 5, 4)),
            (("pass", 5, 3, 4), ("fail", 5, 3, 4)),
            (("fail", 2, 4, 3), ("fail", 3, 4, 3)),
            (("pass", 3, 2, 5), ("pass", 3, 4, 5)),
        ]
        self._grade_pairs(session, spec, w, pairs)
        report = agreement_report(session=session, spec=spec, run_id=w.run.id).model_dump()
        assert report["n_pairs"] == 4
        # Pair 1 agrees; 2 (factual), 3 (2 vs 3 threshold), 4 (2 vs 4) disagree.
        assert report["disagreement_rate"] == pytest.approx(0.75)
        by_key = {c["key"]: c for c in report["criteria"]}
        a_tone, b_tone = [4, 3, 4, 2], [5, 3, 4, 4]
        assert by_key["tone"]["exact_agreement"] == pytest.approx(0.5)
        assert by_key["tone"]["kappa"] == pytest.approx(
            cohen_kappa_score(a_tone, b_tone, labels=[1, 2, 3, 4, 5], weights="quadratic")
        )
        a_fa, b_fa = ["pass", "pass", "fail", "pass"], ["pass", "fail", "fail", "pass"]
        assert by_key["factual_accuracy"]["kappa"] == pytest.approx(cohen_kappa_score(a_fa, b_fa))
        (pair,) = report["pairs"]
        assert pair["graders"] == ["Alice", "Bob"] and pair["n"] == 4
        # ISO weeks: Nov 10 (W46), Nov 13 (W46), Nov 16 (W47), Nov 19 (W47).
        assert [(wk["week"], wk["n"]) for wk in report["weeks"]] == [("2026-W46", 2), ("2026-W47", 2)]
        assert report["weeks"][0]["disagreement_rate"] == pytest.approx(0.5)
        # Only pair 1 has a final grade (agreement): tone final 4.5; Alice 4 -> bias -0.5, Bob 5 -> +0.5.
        graders = {g["grader"]: {c["key"]: c for c in g["criteria"]} for g in report["graders"]}
        assert graders["Alice"]["tone"]["bias"] == pytest.approx(-0.5)
        assert graders["Bob"]["tone"]["bias"] == pytest.approx(0.5)
        assert graders["Alice"]["tone"]["mean"] == pytest.approx(np.mean(a_tone))
        assert graders["Bob"]["factual_accuracy"]["mean"] == pytest.approx(0.5)
