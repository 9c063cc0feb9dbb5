"""One business-day streak for /metrics, /gates/production and the API, each stating its window and segment.

The events (spec: pilot Mon 2 - Fri 13 Nov 2026, holiday Thu 26 Nov) are laid out so the streaks
can be counted by hand:
- every day 2-27 Nov (weekends too): ten billing_charge events, one escalated (10%, within 8% ± 2),
  all accepted: every target met;
- Mon 9 Nov also ten plan_change events, five rejected: all traffic misses (5 of 20 rejected =
  25%), billing_charge alone does not;
- Thu 26 Nov (a holiday) also ten rejected plan_change events: not a business day, ignored.

All traffic, pilot window: 2-6 Nov (5), Mon 9 misses, 10-13 Nov (4) -> longest 5, now 4.
All traffic, 2-27 Nov: 10-13, 16-20, 23-25, 27 Nov -> 4 + 5 + 3 + 1 = 13, longest = now = 13.
billing_charge, 2-27 Nov: 5 + 5 + 5 + 4 = 19 business days, none missed.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session

from tests.metrics.conftest import ev, load
from webapp.core.spec import EvalSpec
from webapp.metrics import daily as metrics_daily
from webapp.metrics import streaks as metrics_streaks

D = dt.date.fromisoformat
TODAY = D("2026-11-30")  # after the pilot: its window is the whole pilot


def _events() -> list[dict[str, Any]]:
    out = []
    day = D("2026-11-02")
    while day <= D("2026-11-27"):
        out += [ev(day, intent="billing_charge", escalated=i == 0) for i in range(10)]
        if day == D("2026-11-09"):
            out += [ev(day, intent="plan_change", escalated=i == 0, action="reject" if i < 5 else "accept") for i in range(10)]
        if day == D("2026-11-26"):
            out += [ev(day, intent="plan_change", action="reject") for _ in range(10)]
        day += dt.timedelta(days=1)
    return out


@pytest.fixture
def seeded(session: Session, spec: EvalSpec, monkeypatch: pytest.MonkeyPatch) -> None:
    load(session, spec, _events())
    monkeypatch.setattr(metrics_daily, "today_in", lambda spec: TODAY)


@pytest.fixture
def pm(seeded: None, client_as: Callable[..., TestClient]) -> TestClient:
    return client_as("pm")


def _text(html: str, element_id: str) -> str:
    m = re.search(rf'id="{element_id}">(.*?</div></div>)', html, re.S)
    assert m, element_id
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", m.group(1)))


class TestService:
    def test_pilot_window_all_traffic(self, session: Session, spec: EvalSpec, seeded: None) -> None:
        s = metrics_streaks.pilot_streaks(session=session, spec=spec, today=TODAY)
        assert (s.longest, s.longest_start, s.longest_end) == (5, D("2026-11-02"), D("2026-11-06"))
        assert (s.current, s.current_start) == (4, D("2026-11-10"))
        assert s.missed == [(D("2026-11-09"), ["accept_rate", "reject_rate"])]  # 15/20 accepted = 75%, not above 75%
        assert s.scope_text == "pilot window 2026-11-02 – 2026-11-13, all traffic"
        # while the pilot runs its window stops at today
        s = metrics_streaks.pilot_streaks(session=session, spec=spec, today=D("2026-11-05"))
        assert (s.longest, s.current, s.window_end) == (4, 4, D("2026-11-05"))  # Mon 2 - Thu 5

    def test_range_and_segment(self, session: Session, spec: EvalSpec, seeded: None) -> None:
        s = metrics_streaks.business_day_streaks(session=session, spec=spec, start=D("2026-11-02"), end=D("2026-11-27"))
        assert (s.longest, s.longest_start, s.longest_end, s.current) == (13, D("2026-11-10"), D("2026-11-27"), 13)
        assert s.scope_text == "range 2026-11-02 – 2026-11-27, all traffic"
        b = metrics_streaks.business_day_streaks(
            session=session, spec=spec, start=D("2026-11-02"), end=D("2026-11-27"), intent="billing_charge"
        )
        assert (b.longest, b.longest_start, b.current, b.missed) == (19, D("2026-11-02"), 19, [])
        assert b.scope_text == "range 2026-11-02 – 2026-11-27, intent = billing_charge"


class TestEverySurfaceAgrees:
    def test_metrics_page_shows_the_range_and_the_gates_figure_for_the_segment(self, pm: TestClient) -> None:
        page = pm.get("/metrics?start=2026-11-02&end=2026-11-27").text
        rng, gate = _text(page, "streak-range"), _text(page, "streak-gate")
        assert rng.startswith(" 13 ") and "now 13 in a row" in rng and "range 2026-11-02 – 2026-11-27, all traffic" in rng
        assert gate.startswith(" 5 ") and "now 4 in a row" in gate and "the gate needs 10" in gate
        assert "pilot window 2026-11-02 – 2026-11-13, all traffic" in gate
        # the range's streak follows the segment and says so; the gate's does not
        page = pm.get("/metrics?start=2026-11-02&end=2026-11-27&intent=billing_charge").text
        rng = _text(page, "streak-range")
        assert rng.startswith(" 19 ") and "range 2026-11-02 – 2026-11-27, intent = billing_charge" in rng
        assert _text(page, "streak-gate").startswith(" 5 ")
        # the pilot window as the range: the gate's figure is not repeated
        page = pm.get("/metrics?start=2026-11-02&end=2026-11-13").text
        assert 'id="streak-gate"' not in page
        rng = _text(page, "streak-range")
        assert rng.startswith(" 5 ") and "now 4 in a row" in rng and "same as the production gate's figure" in rng

    def test_api_and_gate_agree(self, session: Session, spec: EvalSpec, pm: TestClient) -> None:
        from tests.gates.test_service import build_run
        from webapp.gates import service as gates_service

        data = pm.get("/api/v1/metrics/streaks?start=2026-11-02&end=2026-11-27").json()
        assert (data["range"]["longest"], data["range"]["current"], data["range"]["longest_start"]) == (13, 13, "2026-11-10")
        assert data["range"]["window"] == {"kind": "range", "start": "2026-11-02", "end": "2026-11-27"}
        assert (data["gate"]["longest"], data["gate"]["current"], data["needed"]) == (5, 4, 10)
        assert data["gate"]["window"] == {"kind": "pilot", "start": "2026-11-02", "end": "2026-11-13"}
        assert data["gate"]["segment"] == {"intent": None, "plan": None, "agent_id": None}
        assert [d["day"] for d in data["gate"]["missed_days"]] == ["2026-11-09"]
        seg = pm.get("/api/v1/metrics/streaks?start=2026-11-02&end=2026-11-27&intent=billing_charge").json()
        assert seg["range"]["longest"] == 19 and seg["range"]["segment"]["intent"] == "billing_charge"
        assert seg["gate"] == data["gate"]
        r = pm.get("/api/v1/metrics/streaks?start=2026-11-10&end=2026-11-02")
        assert r.status_code == 422 and "before start" in r.text

        run = build_run(session)
        session.commit()
        report = gates_service.production_report(session=session, spec=spec, run=run)  # today from the same clock
        crit = report.criteria[0]
        assert crit.value == 5 and "current 4" in crit.measured
        assert "pilot window 2026-11-02 – 2026-11-13, all traffic" in crit.measured
        page = pm.get(f"/gates/production?run={run.name}").text
        assert "longest streak 5 business days (Nov 02–Nov 06); current 4" in page
