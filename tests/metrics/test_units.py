"""One unit per metric: each formatter against hand-worked values, and the pages that use them."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session

from tests.metrics.conftest import ev, load
from webapp.core import units
from webapp.core.spec import METRIC_NAMES, EvalSpec
from webapp.metrics import alert_states, targets


class TestFormatters:
    @pytest.mark.parametrize(
        ("metric", "value", "shown"),
        [
            ("accept_rate", 0.943, "94.3%"),  # 0.943 x 100 = 94.3
            ("accept_rate", 33 / 35, "94.3%"),  # 94.2857... rounds up
            ("reject_rate", 0.0, "0.0%"),
            ("escalation_rate", 1.0, "100.0%"),
            ("edit_distance", 0.2, "0.200"),
            ("edit_distance", 30 / 32, "0.938"),  # 0.9375 -> 0.938
            ("handle_time_s", 212.44, "212.4 s"),
            ("handle_time_s", 300, "300.0 s"),
            ("latency_p95_s", 1.8924, "1.89 s"),
            ("cost_per_draft", 0.021, "$0.0210"),
            ("cost_per_draft", 0.03, "$0.0300"),
            ("hallucination_reports", 2, "2"),
            ("pass_rate", 0.8, "80.0%"),
            ("accept_rate", None, "—"),
        ],
    )
    def test_text(self, metric: str, value: float | None, shown: str) -> None:
        assert units.text(metric, value) == shown

    def test_every_metric_of_the_spec_has_a_unit(self) -> None:
        assert set(METRIC_NAMES) <= set(units.UNITS)
        with pytest.raises(KeyError, match="accept_ratio"):
            units.text("accept_ratio", 0.5)

    def test_number_is_the_text_without_the_unit_and_the_csv_column_carries_it(self) -> None:
        assert units.number("accept_rate", 0.943) == "94.3"
        assert units.number("cost_per_draft", 0.021) == "0.0210"
        assert units.number("handle_time_s", 212.44) == "212.4"
        assert units.number("hallucination_reports", None) == ""
        assert units.number("reject_rate", -0.0001) == "0.0"  # never "-0.0"
        assert [units.csv_column(m) for m in ("accept_rate", "cost_per_draft", "handle_time_s", "edit_distance")] == [
            "accept_rate_pct", "cost_per_draft_usd", "handle_time_s", "edit_distance",
        ]

    @pytest.mark.parametrize(
        ("value", "text", "tone"),
        [
            (0.012, "+1.2 pts", "up"),
            (-0.125, "-12.5 pts", "down"),
            (-0.0004, "0.0 pts", ""),  # -0.04 points rounds to 0: neutral, no sign
            (0.0004, "0.0 pts", ""),
            (0.0, "0.0 pts", ""),
            (None, "—", ""),
        ],
    )
    def test_delta_in_points(self, value: float | None, text: str, tone: str) -> None:
        assert units.delta(value) == units.Delta(text, tone)  # type: ignore[arg-type]

    def test_score_delta(self) -> None:
        assert units.score_delta(0.25) == units.Delta("+0.25", "up")
        assert units.score_delta(-0.004) == units.Delta("0.00", "")

    def test_thresholds_targets_and_alert_rules_in_the_metrics_unit(self, spec: EvalSpec) -> None:
        assert units.threshold("accept_rate", "<", 0.65) == "< 65.0%"
        assert units.threshold("handle_time_s", ">", 420) == "> 420.0 s"
        assert units.threshold("cost_per_draft", ">", 0.05) == "> $0.0500"
        assert targets.describe_target("accept_rate", spec) == "> 75.0%"
        assert targets.describe_target("escalation_rate", spec) == "8.0% ± 2.0 pts"  # baseline 0.08, within 0.02
        assert targets.describe_target("handle_time_s", spec) == "< 300.0 s"
        rules = {a.metric: a.describe() for a in alert_states.evaluate_alerts([], spec)}
        assert rules["accept_rate"] == "Accept rate < 65.0% on 3 consecutive days"
        assert rules["escalation_rate"] == "Escalation rate > 13.0% on a day"  # baseline 8% + 5 points
        assert rules["handle_time_s"] == "Handle time (s): mean over the trailing 7 days > 420.0 s"
        assert rules["cost_per_draft"] == "Cost per draft ($) > $0.0500 on a day"


class TestPages:
    def test_metrics_page_alerts_and_table_in_one_unit(
        self, session: Session, spec: EvalSpec, client_as: Callable[..., TestClient]
    ) -> None:
        # 2 Nov: 3 accepted + 1 rejected -> accept 75.0%, reject 25.0%; handle times 100 and 251 s -> 175.5 s
        load(session, spec, [
            ev("2026-11-02", action="accept", handle_time_s=100), ev("2026-11-02", action="accept", handle_time_s=251),
            ev("2026-11-02", action="accept"), ev("2026-11-02", action="reject"),
        ])
        page = client_as("support_lead").get("/metrics?start=2026-11-02&end=2026-11-02").text
        assert "Accept rate &lt; 65.0% on 3 consecutive days" in page and "&lt; 0.65" not in page
        assert ">75.0%</td>" in page and ">25.0%</td>" in page and ">175.5 s</td>" in page
        alerts = client_as("support_lead").get("/api/v1/alerts").json()
        assert {a["metric"]: a["rule"] for a in alerts}["reject_rate"] == "Reject rate > 10.0% on 2 consecutive days"
        day = client_as("support_lead").get("/metrics/day/2026-11-02").text
        assert "175.5 s" in day and "75.0%" in day

    def test_run_comparison_shows_a_rounded_zero_change_as_neutral(
        self, session: Session, spec: EvalSpec, client_as: Callable[..., TestClient], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from tests.checks.conftest import build_world
        from webapp.checks import service as checks_service
        from webapp.regression import comparison

        world = build_world(session)
        for run in (world.a, world.b):
            checks_service.check_run(session=session, spec=spec, run_id=run.id)
        session.commit()
        real = comparison.compare_runs

        def nearly_equal(**kw):  # type: ignore[no-untyped-def]
            cmp = real(**kw)
            # 2/3 of the drafts pass in A and 0.6663 in B: a change of -0.04 points, which rounds to 0.0
            cmp.overall = comparison.CheckDelta(
                "overall", "All checks", 2, 3, 6663, 10000, comparison.PairedTest(pairs=3, fixed=0, broke=0)
            )
            return cmp

        monkeypatch.setattr(comparison, "compare_runs", nearly_equal)
        page = client_as("pm").get("/runs/compare?a=run-a&b=run-b").text
        assert '<div class="value compare-delta ">0.0 pts</div>' in page
        assert "-0.0" not in page
        assert '<td class="num compare-delta ">0.0 pts</td>' in page  # the overall row of the table
