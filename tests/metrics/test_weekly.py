"""Hallucination reports per ISO week against the plan's "0 per week": events counted by hand across a week boundary."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from fastapi.testclient import TestClient
from sqlmodel import Session

from tests.metrics.conftest import ev, load
from webapp.core.db import stored_id
from webapp.core.spec import EvalSpec
from webapp.gates.production_criteria import HallucinationFacts, no_confirmed_hallucinations
from webapp.metrics import reports, weekly

D = dt.date.fromisoformat


def decide(session: Session, event_id: str, decision: str = "confirmed") -> None:
    """Report the event as a hallucination, then decide the report."""
    report = reports.report_hallucination(session=session, event_id=event_id, note="wrong", reported_by=None)
    report_id = stored_id(report.id)
    reports.decide_report(session=session, report_id=report_id, decision=decision, decided_by=None, note="x")


class TestWeeks:
    def test_iso_weeks_start_on_monday_and_count_across_a_week_boundary(self, spec: EvalSpec) -> None:
        # 2026-11-08 is a Sunday, 2026-11-09 a Monday (ISO week 46 of 2026).
        assert weekly.week_start(D("2026-11-08")) == D("2026-11-02")
        assert weekly.week_start(D("2026-11-09")) == D("2026-11-09")
        # Sunday Nov 8: 1 (week 45); Monday Nov 9: 2 and Sunday Nov 15: 1 (week 46); week 47: none.
        counts = {D("2026-11-08"): 1, D("2026-11-09"): 2, D("2026-11-15"): 1, D("2026-10-30"): 5}
        weeks = weekly.weekly_counts(counts, start=D("2026-11-05"), end=D("2026-11-16"), spec=spec, today=D("2026-11-18"))
        assert [(w.iso, w.start, w.end, w.count, w.met, w.complete) for w in weeks] == [
            ("2026-W45", D("2026-11-02"), D("2026-11-08"), 1, False, True),
            ("2026-W46", D("2026-11-09"), D("2026-11-15"), 3, False, True),
            ("2026-W47", D("2026-11-16"), D("2026-11-22"), 0, True, False),
        ]


class TestFromTheDatabase:
    def test_confirmed_reports_per_week_and_the_page(self, session: Session, spec: EvalSpec, client_as: Callable[..., TestClient]) -> None:
        load(session, spec, [
            ev("2026-11-08", event_id="sun"),   # week 45
            ev("2026-11-09", event_id="mon1"),  # week 46
            ev("2026-11-09", event_id="mon2"),  # week 46, reported but dismissed: not counted
            ev("2026-11-10", event_id="tue"),   # week 46, not reported
            ev("2026-11-16", event_id="next"),  # week 47
        ])
        for event_id in ("sun", "mon1", "next"):
            decide(session, event_id)
        decide(session, "mon2", "dismissed")
        session.commit()
        weeks = weekly.weekly_hallucinations(session=session, spec=spec, start=D("2026-11-09"), end=D("2026-11-15"), today=D("2026-11-30"))
        # The range is week 46 exactly: Monday's confirmed report only (Sunday's is week 45, the 16th week 47).
        assert [(w.iso, w.count, w.met) for w in weeks] == [("2026-W46", 1, False)]
        weeks = weekly.weekly_hallucinations(session=session, spec=spec, start=D("2026-11-07"), end=D("2026-11-16"), today=D("2026-11-30"))
        assert [(w.iso, w.count) for w in weeks] == [("2026-W45", 1), ("2026-W46", 1), ("2026-W47", 1)]
        page = client_as("support_lead").get("/metrics", params={"start": "2026-11-09", "end": "2026-11-15"}).text
        assert 'id="hallucinations-weekly"' in page
        assert ('<tr data-week="2026-W46"><td>2026-W46</td><td>2026-11-09 – 2026-11-15</td>\n'
                '        <td class="num">1</td><td class="num">0</td>') in page
        assert "missed" in page


class TestProductionGate:
    def test_the_gate_shows_each_pilot_week_against_0_per_week(self, spec: EvalSpec) -> None:
        # Pilot 2026-11-02 (Mon) - 2026-11-13 (Fri): weeks 45 and 46. One report on Fri Nov 6 (week 45).
        after = spec.online_metrics.pilot.end + dt.timedelta(days=1)
        r = no_confirmed_hallucinations([HallucinationFacts(1, "ev-1", D("2026-11-06"))], spec, today=after)
        assert r.status == "fail"
        assert r.measured == "1 confirmed; most in one week: 1 in 2026-W45 (Nov 02 – Nov 08)"
        assert [(p.title, p.measured, p.threshold, p.status) for p in r.parts] == [
            ("Week 2026-W45 (Nov 02 – Nov 08)", "1 confirmed", "0 per week", "fail"),
            ("Week 2026-W46 (Nov 09 – Nov 15)", "0 confirmed", "0 per week", "pass"),
        ]
        # During the pilot's second week: week 45 is over and clean, week 46 not yet.
        during = no_confirmed_hallucinations([], spec, today=D("2026-11-10"))
        assert [p.status for p in during.parts] == ["pass", "incomplete"] and during.status == "incomplete"
