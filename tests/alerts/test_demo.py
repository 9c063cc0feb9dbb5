"""`draftdesk demo` queues the demo's alert notifications for a local log channel and says where they go."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlmodel import Session

from tests.datasets.helpers import invoke
from webapp.alerts import demo as alerts_demo
from webapp.core.spec import EvalSpec
from webapp.metrics import alert_states as metrics_alert_states


def test_demo_prints_where_notifications_go_and_writes_them(
    db_url: str, session: Session, spec: EvalSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = alerts_demo.demo_log_path(session)
    log.unlink(missing_ok=True)
    r = invoke(monkeypatch, db_url, ["demo", "--seed-only"])
    assert r.exit_code == 0, r.output
    assert f"alert notifications go to:\n  Demo log (file): {log}\n" in r.output
    # issue 41: the demo says why a webhook to a local receiver is refused, and how to allow it
    assert "(127.0.0.1, 10.x, 192.168.x) is refused: start the demo with DRAFTDESK_ALERTS_ALLOW_PRIVATE_TARGETS=1" in r.output
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    # the metric transitions and the report, grouped in one message; then the golden factual failure that the
    # demo-ppi run's grading raised through its reactions (graded after the metrics, as on a server)
    assert len(lines) == 2
    assert [(it["kind"], it["alert"]) for it in lines[1]["items"]] == [("regression", "Regression: golden factual failure")]
    assert "golden-safety-distress fails factual accuracy in run demo-ppi" in lines[1]["text"]
    got = [(it["topic"], it["state"]) for it in lines[0]["items"]]
    # the same transitions the metrics service shows, plus the confirmed hallucination report
    expected = [
        (a.metric, "firing" if t.to_state == "firing" else "resolved")
        for a in metrics_alert_states.alerts(session=session, spec=spec)
        for t in a.history
        if t.to_state == "firing" or (t.from_state, t.to_state) == ("firing", "resolved")
    ]
    assert expected and [g for g in got if g[0] not in ("hallucination", "regression")] == expected
    assert ("hallucination", "confirmed") in got
    assert "http://127.0.0.1:8000/metrics?start=" in lines[0]["text"]
    again = invoke(monkeypatch, db_url, ["demo", "--seed-only"])
    assert again.exit_code == 0 and len(log.read_text().splitlines()) == 2  # nothing sent twice
    if Path(log).parent.name != "data":
        log.unlink()
