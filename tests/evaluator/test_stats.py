"""Statistics of a dataset evaluation against values worked out by hand and with numpy."""

from __future__ import annotations

import numpy as np
import pytest

from webapp.evaluator import stats as st
from webapp.evaluator.artifact_models import Sample


class TestMetricStats:
    def test_hand_computed(self) -> None:
        # scores 3, 4, 5: mean 4; deviations -1, 0, 1 -> sum of squares 2; sample variance 2/2 = 1 -> std 1.
        # std 1.0 is not above 1.0, but it is above 20% of the mean (0.8): high variance.
        s = st.metric_stats([3, 4, 5]).model_dump()
        assert s == {"mean": 4.0, "std": 1.0, "min": 3, "max": 5, "count": 3, "high_variance": True}

    def test_matches_numpy_sample_std(self) -> None:
        values = [1, 5, 4, 4, 2, 5, 3]
        s = st.metric_stats(values).model_dump()
        assert s["mean"] == pytest.approx(np.mean(values))
        assert s["std"] == pytest.approx(np.std(values, ddof=1))
        assert s["std"] != pytest.approx(np.std(values, ddof=0))  # the sample formula, not the population one

    def test_single_sample_has_no_std(self) -> None:
        assert st.metric_stats([4]).model_dump() == {"mean": 4.0, "std": None, "min": 4, "max": 4, "count": 1, "high_variance": False}

    def test_no_valid_sample(self) -> None:
        assert st.metric_stats([]).model_dump()["count"] == 0
        assert st.metric_stats([]).model_dump()["mean"] is None

    def test_high_variance_above_one(self) -> None:
        # 1 and 5: mean 3, sample std sqrt(((-2)^2 + 2^2) / 1) = sqrt(8) = 2.83 > 1.0
        s = st.metric_stats([1, 5]).model_dump()
        assert s["std"] == pytest.approx(8**0.5)
        assert s["high_variance"] is True

    def test_high_variance_above_twenty_percent_of_mean(self) -> None:
        # 0, 0, 1 on a 0-1 scale: mean 1/3, std sqrt((2*(1/3)^2 + (2/3)^2)/2) = sqrt(1/3) = 0.577 < 1 but > 0.2*mean
        s = st.metric_stats([0, 0, 1]).model_dump()
        assert s["std"] == pytest.approx((1 / 3) ** 0.5)
        assert s["high_variance"] is True

    def test_low_variance_not_marked(self) -> None:
        # 4, 4, 5: mean 4.333, std 0.577 < 1.0 and < 0.2 * 4.333 = 0.867
        assert st.metric_stats([4, 4, 5]).model_dump()["high_variance"] is False


class TestFlagStats:
    def test_counts_and_proportion(self) -> None:
        assert st.flag_stats([True, False, False, True, False]).model_dump() == {
            "true_count": 2,
            "false_count": 3,
            "total_count": 5,
            "true_proportion": 0.4,
        }

    def test_empty(self) -> None:
        assert st.flag_stats([]).model_dump()["true_proportion"] is None


class TestCaseStats:
    def test_only_completed_samples_count(self) -> None:
        samples = [
            Sample(sample_index=0, status="completed", judge_scores={"m": 2}, flags={"f": True}),
            Sample(sample_index=1, status="completed", judge_scores={"m": 4}, flags={"f": False}),
            Sample(sample_index=2, status="judge_invalid_response"),
            Sample(sample_index=3, status="generation_error"),
        ]
        metrics, flags = st.case_stats(samples, ["m"], ["f"])
        assert metrics["m"].count == 2
        assert metrics["m"].mean == 3.0
        assert flags["f"].model_dump() == {"true_count": 1, "false_count": 1, "total_count": 2, "true_proportion": 0.5}


class TestOverall:
    def test_mean_of_means_skips_cases_without_valid_samples(self) -> None:
        per_case = [
            {"m": st.metric_stats([4, 5])},  # 4.5
            {"m": st.metric_stats([2])},  # 2.0
            {"m": st.metric_stats([])},  # no valid sample: left out
        ]
        o = st.overall_metric_stats(per_case, ["m"])["m"].model_dump()
        assert o["mean_of_means"] == pytest.approx((4.5 + 2.0) / 2)
        assert (o["min_of_means"], o["max_of_means"], o["num_cases"]) == (2.0, 4.5, 2)

    def test_flag_totals(self) -> None:
        per_case = [{"f": st.flag_stats([True, False])}, {"f": st.flag_stats([True, True, False, False])}]
        assert st.overall_flag_stats(per_case, ["f"])["f"].model_dump() == {
            "true_count": 3,
            "false_count": 3,
            "total_count": 6,
            "true_proportion": 0.5,
        }
