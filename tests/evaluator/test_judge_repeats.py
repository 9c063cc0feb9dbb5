"""--judge-repeats K: every sample judged K times, and the judge's agreement with itself per criterion."""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

import numpy as np
import pytest

from tests.evaluator.conftest import Evaluated
from tests.evaluator.fake_openai import FakeOpenAI
from webapp.evaluator import stats as st
from webapp.evaluator.artifact_models import JudgeVerdict, Sample, SampleStatus


def verdict(scores: dict[str, int] | None, flags: dict[str, bool] | None, status: SampleStatus = "completed") -> JudgeVerdict:
    return JudgeVerdict(status=status, judge_scores=dict(scores) if scores else None, flags=flags)


def sample(verdicts: list[JudgeVerdict] | None = None, status: SampleStatus = "completed") -> Sample:
    return Sample(sample_index=0, status=status, judge_repeats=verdicts)


class TestSelfAgreementFigures:
    def test_hand_worked_example(self) -> None:
        samples = [
            sample([verdict({"m": 4}, {"f": True}), verdict({"m": 4}, {"f": False}), verdict({"m": 5}, {"f": True})]),
            sample([verdict({"m": 3}, {"f": False}), verdict({"m": 3}, {"f": False})]),
            # one valid judgement only: nothing to compare, left out
            sample([verdict({"m": 1}, {"f": True}), verdict(None, None, "judge_error")]),
            sample(status="generation_error"),
        ]
        got = st.judge_self_agreement(samples, ["m"], ["f"], repeats=3).model_dump()
        # pairs: (4,4) (4,5) (4,5) and (3,3): 2 of 4 equal, all within one point, |diffs| 0 1 1 0
        assert got["metrics"]["m"] == {
            "samples": 2,
            "exact_agreement": 0.5,
            "pairwise_agreement": 0.5,
            "within_one": 1.0,
            "mean_abs_diff": 0.5,
        }
        # flags: (T,F) (T,T) (F,T) and (F,F): 2 of 4 equal; only the second sample is unanimous
        assert got["flags"]["f"] == {"samples": 2, "exact_agreement": 0.5, "pairwise_agreement": 0.5}

    def test_nothing_to_compare(self) -> None:
        got = st.judge_self_agreement([sample([verdict({"m": 2}, {})])], ["m"], [], repeats=2).model_dump()
        assert got["metrics"]["m"]["samples"] == 0
        assert got["metrics"]["m"]["pairwise_agreement"] is None


class TestRepeatedJudging:
    def test_each_sample_judged_k_times_and_agreement_reported(
        self, evaluated: Evaluated, dataset: Path, fake: FakeOpenAI
    ) -> None:
        result, doc = evaluated("-n", "2", "--seed", "3", "--judge-repeats", "3", dataset=dataset)
        output = " ".join(result.output.split())
        assert fake.by_kind["generator"] == 6
        assert fake.by_kind["judge"] == 18
        assert "6 generations + 18 judgements (3 per sample)" in output
        assert doc["judge_config"]["repeats"] == 3
        samples = [s for r in doc["test_case_results"] for s in r["samples"]]
        for s in samples:
            assert len(s["judge_repeats"]) == 3
            assert s["judge_scores"] == s["judge_repeats"][0]["judge_scores"]  # the scores are the first judgement's
        # The judge's seeds differ per repeat, so the fake judge does not always agree with itself.
        agreement = doc["judge_self_agreement"]
        assert agreement["repeats"] == 3
        for metric in ("semantic_fidelity", "clarity"):
            groups = [[v["judge_scores"][metric] for v in s["judge_repeats"]] for s in samples]
            pairs = [(a, b) for g in groups for a, b in combinations(g, 2)]
            diffs = np.abs(np.subtract(*np.array(pairs).T))
            got = agreement["metrics"][metric]
            assert got["samples"] == 6
            assert got["pairwise_agreement"] == pytest.approx(np.mean(diffs == 0))
            assert got["within_one"] == pytest.approx(np.mean(diffs <= 1))
            assert got["mean_abs_diff"] == pytest.approx(np.mean(diffs))
            assert got["exact_agreement"] == pytest.approx(np.mean([len(set(g)) == 1 for g in groups]))
        assert any(agreement["metrics"][m]["pairwise_agreement"] < 1 for m in ("semantic_fidelity", "clarity"))
        sf = agreement["metrics"]["semantic_fidelity"]["pairwise_agreement"]
        assert f"judge self-agreement (3 judgements per sample, pairwise): semantic_fidelity {sf:.0%}" in output
        flags = [[v["flags"]["omitted_constraints"] for v in s["judge_repeats"]] for s in samples]
        flag_pairs = [a == b for g in flags for a, b in combinations(g, 2)]
        assert agreement["flags"]["omitted_constraints"]["pairwise_agreement"] == pytest.approx(np.mean(flag_pairs))

    def test_repeats_are_cached_separately(
        self, evaluated: Evaluated, dataset: Path, fake: FakeOpenAI, tmp_path: Path
    ) -> None:
        _, a = evaluated("-n", "1", "--seed", "3", "--judge-repeats", "2", dataset=dataset, out=tmp_path / "a")
        _, b = evaluated("-n", "1", "--seed", "3", "--judge-repeats", "2", dataset=dataset, out=tmp_path / "b")
        assert fake.calls == 9
        assert b["cache"] == "reused 9 of 9"
        assert a["test_case_results"] == b["test_case_results"]
        assert a["judge_self_agreement"] == b["judge_self_agreement"]
