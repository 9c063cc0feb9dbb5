"""Issue 41 item 4: a pruned day's drill-down says retention removed its events and that its figures are kept, and
/metrics' default range starts at the oldest kept figure, not at the oldest event left."""

from __future__ import annotations

import datetime as dt
import html
import re
from collections.abc import Callable

from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session

from tests.ops.test_retention_watermark import D10, D16, D17, D20, KEEP, NOW, _seed
from webapp.core.spec import EvalSpec
from webapp.metrics import daily as metrics_daily
from webapp.metrics.aggregates import event_days
from webapp.ops.retention import prune_database


class TestPrunedDrillDown:
    def test_says_the_events_were_removed_and_the_figures_kept(
        self, session: Session, engine: Engine, spec: EvalSpec, client_as: Callable[..., TestClient]
    ) -> None:
        _seed(session, spec)
        lead = client_as("support_lead")
        before = lead.get(f"/metrics/day/{D10.isoformat()}")
        assert before.status_code == 200 and "metrics-pruned" not in before.text and "Rejects (3)" in before.text
        prune_database(engine, KEEP, now=NOW, batch=10)
        page = lead.get(f"/metrics/day/{D10.isoformat()}")
        assert page.status_code == 200
        text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page.text)).split())
        assert (
            f"This day's events were removed by retention (by {NOW.date().isoformat()}: every day before "
            f"{D17.isoformat()} keeps only its figures)" in text
        )
        assert "computed from all 12 of its events before they were removed" in text
        # the kept figures (12 events, 3 of them rejects: 25.0%) and no list of zero rejects or "0 events" beside them
        assert 'data-metric="reject_rate"><div class="value">25.0%' in page.text
        assert "Rejects (" not in page.text and "metrics-events" not in page.text and "0 events" not in text
        # a day after the watermark keeps its events and its list
        kept = lead.get(f"/metrics/day/{D17.isoformat()}")
        assert "metrics-pruned" not in kept.text and "Rejects (1)" in kept.text


class TestDefaultRange:
    def test_starts_at_the_oldest_kept_figure(self, session: Session, engine: Engine, spec: EvalSpec) -> None:
        _seed(session, spec)
        prune_database(engine, KEEP, now=NOW, batch=10)
        session.rollback()
        assert event_days(session) == (D10, D20)  # D10 and D16 keep their figures, their events are gone
        start, end = metrics_daily.default_range(session=session, spec=spec, start=None, end=None, days=42)
        assert (start, end) == (D10, D20)
        assert D16 < D17 and dt.date(2026, 11, 10) == D10

    def test_the_metrics_page_shows_the_pruned_days(
        self, session: Session, engine: Engine, spec: EvalSpec, client_as: Callable[..., TestClient]
    ) -> None:
        _seed(session, spec)
        prune_database(engine, KEEP, now=NOW, batch=10)
        page = client_as("support_lead").get("/metrics")
        assert page.status_code == 200
        assert f'value="{D10.isoformat()}"' in page.text and 'id="metrics-pruned"' in page.text
