"""Metrics service: each metric, alert window and streak against values worked out by hand."""

from __future__ import annotations

import datetime as dt
import random

import numpy as np
import pytest
from sqlalchemy import func, select
from sqlmodel import Session

from tests.metrics.conftest import ev, load
from webapp.core.spec import EvalSpec
from webapp.metrics import (
    aggregates,
    alert_states,
    calibration,
    daily,
    event_input,
    reports,
    stale,
    streaks,
    targets,
    versions,
)
from webapp.metrics.daily import DayMetrics
from webapp.metrics.models import DailyAggregate, Event

D = dt.date.fromisoformat


def _count(session: Session) -> int:
    return int(session.execute(select(func.count()).select_from(Event)).scalar_one())


# kitten -> sitting: 3 edits, the longer text has 7 characters; both empty: 0; one empty: 1
@pytest.mark.parametrize(("a", "b", "want"), [("kitten", "sitting", 3 / 7), ("", "", 0.0), ("", "abc", 1.0)])
def test_edit_distance_is_normalized_by_the_longer_text(a: str, b: str, want: float) -> None:
    assert event_input.normalized_edit_distance(a, b) == pytest.approx(want)


class TestIngest:
    def test_statuses_and_valid_events_kept_beside_invalid(self, session: Session, spec: EvalSpec) -> None:
        edit = ev("2026-11-02", event_id="k", draft_text="kitten", sent_text="sitting", action="edit")
        batch = [edit, ev("2026-11-02", confidence=1.5), ev("2026-11-02", occurred_at="2026-11-02T10:00:00")]
        res = load(session, spec, batch)
        assert [r.status for r in res] == ["created", "invalid", "invalid"]
        assert res[1].errors[0].field == "confidence"
        assert res[2].errors[0].field == "occurred_at"
        assert "timezone" in res[2].errors[0].reason.lower()
        assert _count(session) == 1
        stored = session.execute(select(Event.edit_distance).where(Event.event_id == "k")).scalar_one()
        assert stored == pytest.approx(3 / 7)  # the edit distance is stored once, at ingestion
        no_ticket = ev("2026-11-02")
        del no_ticket["ticket_id"]
        res = load(session, spec, [no_ticket, ev("2026-11-02", draft_shown=False, action="accept")])
        assert [(r.status, r.errors[0].field) for r in res] == [("invalid", "ticket_id"), ("invalid", "action")]

    def test_retried_batch_creates_nothing_twice(self, session: Session, spec: EvalSpec) -> None:
        batch = [ev("2026-11-02"), ev("2026-11-03")]
        assert [r.status for r in load(session, spec, batch)] == ["created", "created"]
        assert [r.status for r in load(session, spec, batch)] == ["duplicate", "duplicate"]
        assert _count(session) == 2
        days = daily.daily_metrics(session=session, spec=spec, start=D("2026-11-02"), end=D("2026-11-03"))
        assert [d.events for d in days] == [1, 1]
        e = ev("2026-11-02")  # the same id twice in one batch
        assert [r.status for r in load(session, spec, [e, dict(e)])] == ["created", "duplicate"]


class TestDailyMetrics:
    def test_each_metric_by_hand(self, session: Session, spec: EvalSpec) -> None:
        load(session, spec, [
            ev("2026-11-02", action="accept", draft_text="abcde", sent_text="abcde", latency_ms=1000, handle_time_s=100, cost_usd=0.01, confidence=0.9),
            ev("2026-11-02", action="edit", draft_text="abcdefghij", sent_text="abcdefghiX", latency_ms=2000, handle_time_s=200, cost_usd=0.02),
            ev("2026-11-02", action="edit", intent="not_supported", draft_text="abcde", sent_text="vwxyz", latency_ms=3000, handle_time_s=1000, cost_usd=0.03),
            ev("2026-11-02", action="reject", sent_text=None, latency_ms=4000, handle_time_s=300),
            ev("2026-11-02", draft_shown=False, action=None, draft_text=None, sent_text=None, escalated=True, handle_time_s=50),
        ])
        day, empty = daily.daily_metrics(session=session, spec=spec, start=D("2026-11-02"), end=D("2026-11-03"))
        assert day.drafts_shown == 4
        assert day.accept_rate == pytest.approx(2 / 4)  # accept + edit at 0.1 <= 0.2
        assert day.reject_rate == pytest.approx(1 / 4)
        assert day.edit_distance == pytest.approx((0 + 0.1 + 1.0) / 3)  # reject has no sent text
        assert day.escalation_rate == pytest.approx(1 / 5)
        assert day.handle_time_s == pytest.approx((100 + 200 + 300 + 50) / 4)  # unsupported intent left out
        assert day.latency_p95_s == pytest.approx(3.85)  # rank 2.85 of [1,2,3,4]: 3 + 0.85
        assert day.latency_p95_s == pytest.approx(float(np.percentile([1, 2, 3, 4], 95)))
        assert day.cost_per_draft == pytest.approx(0.02)
        assert day.hallucination_reports == 0
        assert day.target_met["accept_rate"] is False
        assert day.target_met["latency_p95_s"] is True
        assert day.target_met["escalation_rate"] is False  # 0.20 is outside 0.08 +/- 0.02
        assert day.all_targets_met is False
        # nothing to divide by: null, never 0
        assert empty.events == 0
        assert all(empty.value(m) is None for m in ("accept_rate", "edit_distance", "latency_p95_s", "cost_per_draft", "hallucination_reports"))
        assert empty.all_targets_met is None

    def test_only_suppressed_drafts_give_null_rates(self, session: Session, spec: EvalSpec) -> None:
        load(session, spec, [ev("2026-11-02", draft_shown=False, action=None, escalated=True)])
        (day,) = daily.daily_metrics(session=session, spec=spec, start=D("2026-11-02"), end=D("2026-11-02"))
        assert day.drafts_shown == 0
        assert day.accept_rate is None and day.reject_rate is None and day.latency_p95_s is None
        assert day.escalation_rate == 1.0

    def test_day_boundary_in_non_utc_time_zone(self, session: Session, spec: EvalSpec) -> None:
        ny = spec.model_copy(update={"timezone": "America/New_York"})
        # 03:30 UTC on 3 November is 22:30 on 2 November in New York (EST, UTC-5)
        load(session, ny, [ev("2026-11-03", 3, event_id="late", action="reject")])
        load(session, ny, [ev("2026-11-03", 6, event_id="early", action="accept")])
        d2, d3 = daily.daily_metrics(session=session, spec=ny, start=D("2026-11-02"), end=D("2026-11-03"))
        assert (d2.events, d2.reject_rate) == (1, 1.0)
        assert (d3.events, d3.accept_rate) == (1, 1.0)

    def test_offset_in_timestamp_is_honoured(self, session: Session, spec: EvalSpec) -> None:
        # 23:30 at UTC-5 is 04:30 UTC the next day: a UTC spec puts it on the 3rd
        load(session, spec, [ev("2026-11-02", 23, tz="-05:00")])
        d2, d3 = daily.daily_metrics(session=session, spec=spec, start=D("2026-11-02"), end=D("2026-11-03"))
        assert (d2.events, d3.events) == (0, 1)

    def test_segment_filters_apply_to_every_metric(self, session: Session, spec: EvalSpec) -> None:
        load(session, spec, [
            ev("2026-11-02", event_id="a", intent="billing_charge", plan="pro", action="accept", latency_ms=1000),
            ev("2026-11-02", event_id="b", intent="plan_change", plan="pro", action="reject", latency_ms=5000, escalated=True),
        ])
        reports.report_hallucination(session=session, event_id="b", note="made up a fee", reported_by=None)
        report = reports.list_reports(session=session)[0][0]
        reports.decide_report(session=session, report_id=report.id, decision="confirmed", decided_by=None, note="no such fee")  # type: ignore[arg-type]
        session.commit()
        (billing,) = daily.daily_metrics(session=session, spec=spec, start=D("2026-11-02"), end=D("2026-11-02"), intent="billing_charge")
        (change,) = daily.daily_metrics(session=session, spec=spec, start=D("2026-11-02"), end=D("2026-11-02"), intent="plan_change", plan="pro")
        (both,) = daily.daily_metrics(session=session, spec=spec, start=D("2026-11-02"), end=D("2026-11-02"))
        assert (billing.accept_rate, billing.escalation_rate, billing.latency_p95_s, billing.hallucination_reports) == (1.0, 0.0, 1.0, 0)
        assert (change.accept_rate, change.escalation_rate, change.latency_p95_s, change.hallucination_reports) == (0.0, 1.0, 5.0, 1)
        assert both.hallucination_reports == 1 and both.events == 2

    @pytest.mark.parametrize("rebuild", ["never", "midway", "at_end"])
    def test_aggregates_equal_recomputation_from_raw(self, session: Session, spec: EvalSpec, rebuild: str) -> None:
        """Readers show the stored figures until a rebuild, which then equals a recomputation from raw events."""
        rng = random.Random(5)
        events = []
        for _ in range(240):
            shown = rng.random() > 0.1
            action = rng.choice(["accept", "edit", "reject", "escalate"]) if shown else None
            draft = "".join(rng.choice("ab ") for _ in range(rng.randint(0, 12))) if shown else None
            sent = None if action in (None, "reject") or rng.random() < 0.1 else "".join(rng.choice("ab ") for _ in range(rng.randint(0, 12)))
            events.append(
                ev(
                    dt.date(2026, 11, 2) + dt.timedelta(days=rng.randint(0, 3)),
                    rng.randint(0, 23),
                    intent=rng.choice(["billing_charge", "plan_change", "other", None]),
                    plan=rng.choice(["free", "pro"]),
                    agent_id=rng.choice(["a1", "a2"]),
                    draft_shown=shown, action=action, draft_text=draft, sent_text=sent,
                    escalated=rng.random() < 0.1,
                    latency_ms=rng.choice([None, rng.randint(100, 9000)]) if shown else None,
                    handle_time_s=rng.choice([None, rng.uniform(10, 900)]),
                    cost_usd=rng.choice([None, rng.uniform(0, 0.08)]),
                    confidence=rng.choice([None, rng.random()]),
                )
            )
        # in several batches, so days are rebuilt repeatedly
        for k in range(0, 240, 70):
            load(session, spec, events[k : k + 70], rebuild=False)
            if rebuild == "midway" and k == 70:
                assert stale.rebuild_stale(session=session, spec=spec)
        if rebuild != "at_end":
            # until the rebuild, readers show the stored figures and name the days still updating
            pending = stale.stale_days(session)
            assert pending and daily.updating_days(session=session) == sorted(pending)
            before = {d.day: d.events for d in daily.daily_metrics(session=session, spec=spec, start=D("2026-11-01"), end=D("2026-11-06"))}
            stored = dict(session.execute(select(DailyAggregate.day, DailyAggregate.n_events).where(
                DailyAggregate.intent == "*", DailyAggregate.plan == "*", DailyAggregate.agent_id == "*")).all())
            assert before == {day: int(stored.get(day, 0)) for day in before}
            assert sum(before.values()) < len(events)  # the batches after the last rebuild are not in yet
        assert stale.rebuild_stale(session=session, spec=spec)
        assert stale.stale_days(session) == set() and daily.updating_days(session=session) == []
        for seg in ({}, {"intent": "billing_charge"}, {"plan": "pro"}, {"agent_id": "a2"}, {"intent": "plan_change", "plan": "free"}, {"intent": "other", "plan": "pro", "agent_id": "a1"}, {"plan": "free", "agent_id": "a1"}):
            got = daily.daily_metrics(session=session, spec=spec, start=D("2026-11-01"), end=D("2026-11-06"), **seg)
            for day in got:
                want = _naive_day(session, spec, day.day, seg)
                for metric, value in want.items():
                    expected = None if value is None else pytest.approx(value, rel=1e-12, abs=1e-12)
                    assert day.value(metric) == expected, (seg, day.day, metric)

    def test_range_end_before_start_is_refused(self, session: Session, spec: EvalSpec) -> None:
        with pytest.raises(daily.MetricsError, match="before"):
            daily.daily_metrics(session=session, spec=spec, start=D("2026-11-03"), end=D("2026-11-02"))

    def test_aggregate_rows_match_rollups(self, session: Session, spec: EvalSpec) -> None:
        load(session, spec, [ev("2026-11-02", plan="pro", agent_id="x"), ev("2026-11-02", plan="free", agent_id="x")], rebuild=False)
        assert session.execute(select(DailyAggregate.id)).all() == []  # ingestion only marks the day stale
        assert stale.rebuild_stale(session=session, spec=spec) == [D("2026-11-02")]
        rows = session.execute(select(DailyAggregate.intent, DailyAggregate.plan, DailyAggregate.agent_id)).all()
        assert ("*", "*", "*") in rows and ("billing_charge", "pro", "*") in rows and ("*", "*", "x") in rows
        assert len(rows) == 1 + 1 + 2 + 1 + 2


def _naive_day(session: Session, spec: EvalSpec, day: dt.date, seg: dict[str, str]) -> dict[str, float | None]:
    """Compute a day's metrics straight from the stored events, one by one."""
    evs = [e for e in session.execute(select(Event).where(Event.day == day)).scalars() if all(getattr(e, k) == v for k, v in seg.items())]
    if not evs:
        return {m: None for m in ("accept_rate", "reject_rate", "edit_distance", "escalation_rate", "handle_time_s", "latency_p95_s", "cost_per_draft")}
    shown = [e for e in evs if e.draft_shown]
    acc = [e for e in shown if e.action == "accept" or (e.action == "edit" and e.edit_distance is not None and e.edit_distance <= spec.online_metrics.minor_edit_limit)]
    eds = [e.edit_distance for e in shown if e.action in ("accept", "edit") and e.sent_text is not None and e.edit_distance is not None]
    hts = [e.handle_time_s for e in evs if e.intent in spec.intents and e.handle_time_s is not None]
    lats = [e.latency_ms / 1000 for e in shown if e.latency_ms is not None]
    costs = [e.cost_usd for e in evs if e.cost_usd is not None]
    return {
        "accept_rate": len(acc) / len(shown) if shown else None,
        "reject_rate": sum(e.action == "reject" for e in shown) / len(shown) if shown else None,
        "edit_distance": float(np.mean(eds)) if eds else None,
        "escalation_rate": sum(e.escalated for e in evs) / len(evs),
        "handle_time_s": float(np.mean(hts)) if hts else None,
        "latency_p95_s": float(np.percentile(lats, 95)) if lats else None,
        "cost_per_draft": sum(costs) / len(costs) if costs else None,
    }


class TestTargets:
    @pytest.mark.parametrize(("value", "met"), [(0.06, True), (0.10, True), (0.1001, False), (0.0599, False)])
    def test_escalation_within_baseline_band(self, spec: EvalSpec, value: float, met: bool) -> None:
        assert targets.check_target(spec.online_metrics.targets["escalation_rate"], value, spec) is met

    def test_strict_comparisons(self, spec: EvalSpec) -> None:
        t = spec.online_metrics.targets
        assert targets.check_target(t["accept_rate"], 0.75, spec) is False
        assert targets.check_target(t["accept_rate"], 0.7501, spec) is True
        assert targets.check_target(t["hallucination_reports"], 0, spec) is True
        assert targets.check_target(t["cost_per_draft"], None, spec) is None


def _day(day: str, **values: float | None) -> DayMetrics:
    d = DayMetrics(D(day), 1, 1, None, None, None, None, None, None, None, None)
    for k, v in values.items():
        if isinstance(v, tuple):
            setattr(d, k, v[0] / v[1])
            d.parts[k] = v
        else:
            setattr(d, k, v)
    return d


def _states(status: alert_states.AlertStatus) -> list[str]:
    return [status.day_states[d] for d in sorted(status.day_states)]


class TestAlerts:
    def test_consecutive_days_skip_days_without_data(self, spec: EvalSpec) -> None:
        rule = spec.online_metrics.alerts["accept_rate"]  # < 0.65 on 3 consecutive days
        days = [_day("2026-11-02", accept_rate=0.6), _day("2026-11-03", accept_rate=0.6), _day("2026-11-04"),
                _day("2026-11-05", accept_rate=0.5), _day("2026-11-06", accept_rate=0.7), _day("2026-11-07", accept_rate=0.6)]
        st = alert_states.evaluate_alert("accept_rate", rule, days, spec)
        assert _states(st) == ["pending", "pending", "pending", "firing", "resolved", "pending"]
        assert [(t.day.isoformat(), t.from_state, t.to_state, t.value) for t in st.history] == [
            ("2026-11-02", "ok", "pending", 0.6),
            ("2026-11-05", "pending", "firing", 0.5),
            ("2026-11-06", "firing", "resolved", 0.7),
            ("2026-11-07", "resolved", "pending", 0.6),
        ]
        assert st.firing_periods == [(D("2026-11-05"), D("2026-11-05"))]
        assert st.state == "pending"

    def test_window_resets_on_a_good_day(self, spec: EvalSpec) -> None:
        rule = spec.online_metrics.alerts["reject_rate"]  # > 0.10 on 2 consecutive days
        days = [_day("2026-11-02", reject_rate=0.2), _day("2026-11-03", reject_rate=0.05),
                _day("2026-11-04", reject_rate=0.2), _day("2026-11-05", reject_rate=0.3)]
        st = alert_states.evaluate_alert("reject_rate", rule, days, spec)
        assert _states(st) == ["pending", "ok", "pending", "firing"]
        assert st.firing_periods == [(D("2026-11-05"), D("2026-11-05"))]

    def test_trailing_mean_weights_by_events_and_waits_for_the_window(self, spec: EvalSpec) -> None:
        rule = spec.online_metrics.alerts["edit_distance"]  # trailing 7-day mean > 0.35
        # day 1: one draft at 0.9; day 2: nine drafts summing to 2.7 -> (0.9 + 2.7) / 10 = 0.36
        days = [_day("2026-11-02", edit_distance=(0.9, 1)), _day("2026-11-03", edit_distance=(2.7, 9))]
        days += [_day(f"2026-11-{d:02d}") for d in range(4, 8)]
        days += [_day("2026-11-08", edit_distance=(0.0, 1)), _day("2026-11-09", edit_distance=(0.0, 30))]
        st = alert_states.evaluate_alert("edit_distance", rule, days, spec)
        # window 2..8 Nov: 3.6 / 11 = 0.327 -> not above; before that only pending (window not full)
        assert [(t.day.isoformat(), t.to_state) for t in st.history] == [("2026-11-02", "pending"), ("2026-11-08", "ok")]
        assert st.history[0].value == pytest.approx(0.9)
        assert st.history[1].value == pytest.approx(3.6 / 11)
        days[-1] = _day("2026-11-09", edit_distance=(4.0, 4))  # window 3..9 Nov: (2.7 + 0 + 4) / 14
        st = alert_states.evaluate_alert("edit_distance", rule, days, spec)
        assert st.state == "firing" and st.value == pytest.approx(6.7 / 14)

    def test_escalation_above_baseline(self, spec: EvalSpec) -> None:
        rule = spec.online_metrics.alerts["escalation_rate"]  # > 0.08 + 0.05 on a day
        days = [_day("2026-11-02", escalation_rate=0.13), _day("2026-11-03", escalation_rate=0.14), _day("2026-11-04", escalation_rate=0.01)]
        st = alert_states.evaluate_alert("escalation_rate", rule, days, spec)
        assert _states(st) == ["ok", "firing", "resolved"]

    def test_alerts_from_events(self, session: Session, spec: EvalSpec) -> None:
        load(session, spec, [ev("2026-11-02", latency_ms=7000), ev("2026-11-03", latency_ms=1000)])
        by_metric = {a.metric: a for a in alert_states.alerts(session=session, spec=spec)}
        lat = by_metric["latency_p95_s"]
        assert lat.state == "resolved"
        assert lat.firing_periods == [(D("2026-11-02"), D("2026-11-02"))]
        assert by_metric["cost_per_draft"].state == "ok"


class TestReaders:
    def test_streaks_skip_weekends_holidays_and_empty_days(
        self, session: Session, spec: EvalSpec, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # the days run to 2 December: ingest them as of 3 December (events more than a day ahead are refused)
        monkeypatch.setattr("webapp.metrics.ingest.utcnow", lambda: dt.datetime(2026, 12, 3, 12, tzinfo=dt.UTC))
        def good_day(day: str, bad: bool = False) -> list[dict]:
            # 9 accepted drafts + 1 suppressed escalation: escalation 10% (within 8% +/- 2 points)
            out = [ev(day, action="accept", latency_ms=1000, handle_time_s=100, cost_usd=0.01) for _ in range(9)]
            out.append(ev(day, draft_shown=False, action=None, escalated=True, handle_time_s=100, cost_usd=0.01))
            if bad:
                out[0]["action"] = "reject"
            return out

        events = []
        for day in ("2026-11-23", "2026-11-24", "2026-11-25", "2026-11-27", "2026-12-02"):
            events += good_day(day)
        events += good_day("2026-11-26", bad=True)  # Thanksgiving: a holiday in the spec, not counted
        events += good_day("2026-11-28", bad=True)  # Saturday
        events += good_day("2026-12-01", bad=True)  # Tuesday: breaks the run
        load(session, spec, events)
        st = streaks.business_day_streaks(session=session, spec=spec, start=D("2026-11-23"), end=D("2026-12-03"))
        verdicts = {d.isoformat(): v for d, v in st.verdicts}
        assert verdicts == {
            "2026-11-23": True, "2026-11-24": True, "2026-11-25": True, "2026-11-27": True,
            "2026-11-30": None, "2026-12-01": False, "2026-12-02": True, "2026-12-03": None,
        }
        assert (st.longest, st.longest_start, st.longest_end) == (4, D("2026-11-23"), D("2026-11-27"))
        assert (st.current, st.current_start) == (1, D("2026-12-02"))

    def test_calibration_ece_by_hand(self, session: Session, spec: EvalSpec) -> None:
        load(session, spec, [
            ev("2026-11-02", confidence=0.15, action="accept"),
            ev("2026-11-02", confidence=0.15, action="reject"),
            ev("2026-11-02", confidence=0.85, action="accept"),
            ev("2026-11-03", confidence=0.85, action="accept"),
            ev("2026-11-03", confidence=0.95, action="reject"),
            ev("2026-11-03", confidence=None, action="reject"),
        ])
        days = daily.daily_metrics(session=session, spec=spec, start=D("2026-11-02"), end=D("2026-11-03"))
        cal = calibration.calibration_from_days(days)
        # bin 0.1-0.2: 2 drafts, rate 0.5 vs 0.15; bin 0.8-0.9: 2, 1.0 vs 0.85; bin 0.9-1.0: 1, 0.0 vs 0.95
        assert cal.n == 5
        assert cal.ece == pytest.approx(2 / 5 * 0.35 + 2 / 5 * 0.15 + 1 / 5 * 0.95)
        assert [(b.n, b.accept_rate) for b in cal.bins if b.n] == [(2, 0.5), (2, 1.0), (1, 0.0)]

    def test_only_confirmed_hallucination_reports_count(self, session: Session, spec: EvalSpec) -> None:
        load(session, spec, [ev("2026-11-02", event_id="x"), ev("2026-11-03", event_id="y")])
        rx = reports.report_hallucination(session=session, event_id="x", note="wrong refund window", reported_by=None)
        ry = reports.report_hallucination(session=session, event_id="y", note="invented plan", reported_by=None)
        days = daily.daily_metrics(session=session, spec=spec, start=D("2026-11-02"), end=D("2026-11-03"))
        assert [d.hallucination_reports for d in days] == [0, 0]
        assert reports.pending_report_count(session=session) == 2
        reports.decide_report(session=session, report_id=rx.id, decision="confirmed", decided_by=None, note="KB says 3-5 days")  # type: ignore[arg-type]
        reports.decide_report(session=session, report_id=ry.id, decision="dismissed", decided_by=None, note="plan exists")  # type: ignore[arg-type]
        days = daily.daily_metrics(session=session, spec=spec, start=D("2026-11-02"), end=D("2026-11-03"))
        assert [d.hallucination_reports for d in days] == [1, 0]
        assert days[0].target_met["hallucination_reports"] is False
        confirmed = reports.confirmed_hallucination_reports(session=session, start=D("2026-11-01"), end=D("2026-11-30"))
        assert [r.event_id for r in confirmed] == ["x"]
        assert reports.confirmed_hallucination_reports(session=session, start=D("2026-11-03"), end=D("2026-11-30")) == []

        with pytest.raises(daily.MetricsError, match="event_id"):  # an unknown event
            reports.report_hallucination(session=session, event_id="nope", note="", reported_by=None)

    def test_version_changes_after_the_first_version(self, session: Session, spec: EvalSpec) -> None:
        load(session, spec, [
            ev("2026-11-02", model_version="m1", prompt_version="p1"),
            ev("2026-11-03", model_version="m1", prompt_version="p2"),
            ev("2026-11-05", model_version="m2", prompt_version="p2"),
        ])
        changes = versions.versions_for(session=session, spec=spec, start=D("2026-11-02"), end=D("2026-11-06"))
        assert [(c.day.isoformat(), c.kind, c.value) for c in changes] == [
            ("2026-11-03", "prompt_version", "p2"),
            ("2026-11-05", "model_version", "m2"),
        ]

    def test_filter_values_are_bound_not_spliced(self, session: Session, spec: EvalSpec) -> None:
        load(session, spec, [ev("2026-11-02", intent="it's", plan="p'); DROP TABLE metric_event; --", agent_id="a")])
        seg = {"intent": "it's", "plan": "p'); DROP TABLE metric_event; --", "agent_id": "a"}
        (day,) = daily.daily_metrics(session=session, spec=spec, start=D("2026-11-02"), end=D("2026-11-02"), **seg)
        assert day.events == 1 and _count(session) == 1

    def test_rebuild_all_moves_events_to_a_new_time_zones_day(self, session: Session, spec: EvalSpec) -> None:
        load(session, spec, [ev("2026-11-03", 3, action="reject"), ev("2026-11-03", 15, action="accept")])
        (d3,) = daily.daily_metrics(session=session, spec=spec, start=D("2026-11-03"), end=D("2026-11-03"))
        assert d3.events == 2
        ny = spec.model_copy(update={"timezone": "America/New_York"})
        aggregates.rebuild_all(session=session, spec=ny)
        session.commit()
        d2, d3 = daily.daily_metrics(session=session, spec=ny, start=D("2026-11-02"), end=D("2026-11-03"))
        assert (d2.events, d2.reject_rate, d3.events, d3.accept_rate) == (1, 1.0, 1, 1.0)
