"""Transitions into the ledger and outbox, channel filters, "no data", the evaluator lease across processes."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import select, update
from sqlmodel import Session

from tests.alerts.conftest import DAY1, bad_accept_days, queue_bad_days
from tests.factories import make_dataset, make_run, make_user
from tests.metrics.conftest import ev, load
from webapp.alerts import channels, messages, transitions
from webapp.alerts import outbox as alerts_outbox
from webapp.alerts.models import AlertNotice, AlertOutbox
from webapp.core.spec import EvalSpec
from webapp.core.timeutil import as_utc, utcnow
from webapp.metrics import alert_states as metrics_alert_states
from webapp.metrics import reports as metrics_reports
from webapp.metrics.models import Event
from webapp.regression.models import RegressionAlert

ROOT = Path(__file__).resolve().parents[2]


def _items(session: Session) -> list[dict]:  # type: ignore[type-arg]
    session.expire_all()
    return [it for m in session.execute(select(AlertOutbox).order_by(AlertOutbox.id)).scalars() for it in m.payload["items"]]  # type: ignore[arg-type]


def _spec_with_pilot(spec: EvalSpec, start: dt.date) -> EvalSpec:
    om = spec.online_metrics.model_copy(update={"pilot": spec.online_metrics.pilot.model_copy(update={"start": start, "end": start + dt.timedelta(days=30)})})
    return spec.model_copy(update={"online_metrics": om})


class TestMetricTransitions:
    def test_resolved_is_sent_only_to_channels_that_want_it(self, session, spec) -> None:  # type: ignore[no-untyped-def]
        keen = channels.add_channel(session=session, name="keen", kind="file", target="/tmp/unused.jsonl")
        quiet = channels.add_channel(session=session, name="quiet", kind="file", target="/tmp/unused2.jsonl", send_resolved=False)
        load(session, spec, bad_accept_days())
        alerts_outbox.record_transitions(session=session, spec=spec)
        # a good day (4 of 4 accepted): the accept rate is back above 0.65, the alert resolves
        load(session, spec, [ev(DAY1 + dt.timedelta(days=3), h) for h in range(9, 13)])
        result = alerts_outbox.record_transitions(session=session, spec=spec)
        session.commit()
        assert [(t["topic"], t["state"], t["days"]) for t in result.transitions] == [("accept_rate", "resolved", ["2026-11-06"])]
        assert result.transitions[0]["value"] == 1.0
        by_channel = {m.channel_id: m for m in result.messages}
        assert set(by_channel) == {keen.id}
        assert quiet.id not in by_channel

    def test_matches_the_metrics_alert_history(self, session, spec) -> None:  # type: ignore[no-untyped-def]
        load(session, spec, bad_accept_days(n=4))
        result = alerts_outbox.record_transitions(session=session, spec=spec)
        history = [
            (a.metric, t.day.isoformat()) for a in metrics_alert_states.alerts(session=session, spec=spec) for t in a.history if t.to_state == "firing"
        ]
        assert [(t["topic"], t["days"][-1]) for t in result.transitions] == history == [("accept_rate", "2026-11-05")]

    def test_latency_alert_carries_its_unit(self, session, spec) -> None:  # type: ignore[no-untyped-def]
        # every draft of the day took 9000 ms: the p95 is 9 s, above the spec's 6 s alert threshold
        load(session, spec, [ev(DAY1, h, latency_ms=9000) for h in range(9, 13)])
        result = alerts_outbox.record_transitions(session=session, spec=spec)
        item = next(t for t in result.transitions if t["topic"] == "latency_p95_s")
        assert (item["value"], item["threshold"]) == (9.0, 6.0)
        assert (item["value_text"], item["threshold_text"]) == ("9.00 s", "6.00 s")
        line = messages.item_line(item, "https://dd.example.test")
        assert "value 9.00 s vs threshold 6.00 s" in line
        slack = json.dumps(messages.slack_body({"items": [item]}, "https://dd.example.test"))
        assert "Value 9.00 s vs threshold 6.00 s" in slack

    def test_history_before_any_channel_is_recorded_not_sent(self, session, spec) -> None:  # type: ignore[no-untyped-def]
        load(session, spec, bad_accept_days())
        first = alerts_outbox.record_transitions(session=session, spec=spec)
        assert len(first.transitions) == 1 and first.messages == []
        session.commit()
        channels.add_channel(session=session, name="late", kind="file", target="/tmp/unused.jsonl")
        assert alerts_outbox.record_transitions(session=session, spec=spec).messages == []
        # the alert it never heard of resolves: not sent to it either
        load(session, spec, [ev(DAY1 + dt.timedelta(days=3), h) for h in range(9, 13)])
        resolved = alerts_outbox.record_transitions(session=session, spec=spec)
        assert [t["state"] for t in resolved.transitions] == ["resolved"] and resolved.messages == []

    def test_topic_filters(self, session) -> None:  # type: ignore[no-untyped-def]
        metric = {"kind": "metric", "topic": "accept_rate", "state": "firing"}
        silence = {"kind": "no_data", "topic": "no_data", "state": "firing"}
        regression = {"kind": "regression", "topic": "regression", "state": "raised"}
        by_metric = channels.add_channel(session=session, name="m", kind="file", target="x", topics=["reject_rate"])
        metrics = channels.add_channel(session=session, name="ms", kind="file", target="y", topics=["metrics"])
        regr = channels.add_channel(session=session, name="r", kind="file", target="z", topics=["regression", "hallucination"])
        assert [channels.matches(by_metric, i) for i in (metric, silence, regression)] == [False, False, False]
        assert [channels.matches(metrics, i) for i in (metric, silence, regression)] == [True, True, False]
        assert [channels.matches(regr, i) for i in (metric, silence, regression)] == [False, False, True]


class TestNoData:
    def test_fires_after_the_gap_and_resolves_when_events_arrive(self, session, spec) -> None:  # type: ignore[no-untyped-def]
        t0 = (utcnow() - dt.timedelta(days=2)).replace(microsecond=0)
        spec = _spec_with_pilot(spec, (t0 - dt.timedelta(days=1)).date())
        channels.add_channel(session=session, name="ops", kind="file", target="/tmp/unused.jsonl")
        load(session, spec, [ev(t0.date(), 12)])
        session.execute(update(Event).values(received_at=t0))  # the last event arrived at t0
        session.commit()
        hours = spec.alerts.no_data_hours
        assert hours == 6
        quiet = alerts_outbox.record_transitions(session=session, spec=spec, now=t0 + dt.timedelta(hours=5, minutes=59))
        assert [t for t in quiet.transitions if t["kind"] == "no_data"] == []
        fired = alerts_outbox.record_transitions(session=session, spec=spec, now=t0 + dt.timedelta(hours=7))
        [item] = [t for t in fired.transitions if t["kind"] == "no_data"]
        assert item["state"] == "firing" and item["value"] == pytest.approx(7.0) and item["threshold"] == 6
        assert len(fired.messages) == 1
        # still silent: nothing new
        assert alerts_outbox.record_transitions(session=session, spec=spec, now=t0 + dt.timedelta(hours=9)).transitions == []
        # events arrive (ingested now, two days after t0): resolved
        load(session, spec, [ev(utcnow().date(), 1)])
        resolved = alerts_outbox.record_transitions(session=session, spec=spec)
        [item] = [t for t in resolved.transitions if t["kind"] == "no_data"]
        assert item["state"] == "resolved"
        assert item["value"] == pytest.approx((utcnow() - t0).total_seconds() / 3600, abs=0.05)
        session.commit()
        states = list(session.execute(select(AlertNotice.state).where(AlertNotice.kind == "no_data").order_by(AlertNotice.id)).scalars())
        assert states == ["firing", "resolved"]

    def test_quiet_before_the_pilot(self, session, spec) -> None:  # type: ignore[no-untyped-def]
        spec = _spec_with_pilot(spec, utcnow().date() + dt.timedelta(days=3))
        assert transitions.no_data_items(session=session, spec=spec, now=utcnow()) == []
        midnight = dt.datetime.combine(spec.online_metrics.pilot.start, dt.time(), tzinfo=spec.tz)
        assert transitions.no_data_items(session=session, spec=spec, now=midnight + dt.timedelta(hours=5)) == []
        [item] = transitions.no_data_items(session=session, spec=spec, now=midnight + dt.timedelta(hours=7))
        assert item["state"] == "firing" and item["value"] == pytest.approx(7.0)


def _pass_rate_drop(session: Session, fingerprint: str, message: str, **evidence: object) -> None:
    """A pass-rate-drop regression alert on a run named nightly."""
    run = make_run(session, make_dataset(session, []), name="nightly")
    assert run.id is not None
    session.add(RegressionAlert(run_id=run.id, kind="pass_rate_drop", fingerprint=fingerprint, message=message,
                                evidence=evidence))


class TestRegressionAndHallucination:
    def test_regression_alert_and_confirmed_report_are_sent_once(self, session, spec, client_as) -> None:  # type: ignore[no-untyped-def]
        user = make_user(session, email="u@example.test", roles=["lead"])
        _pass_rate_drop(session, "f", "Pass rate of run nightly is 80.0%, down 10.0 points",
                        pass_rate=0.8, baseline_pass_rate=0.9, drop=0.1, threshold=0.05)
        channels.add_channel(session=session, name="lead", kind="file", target="/tmp/unused.jsonl", topics=["regression", "hallucination"])
        load(session, spec, [ev(DAY1, 9, event_id="bad-1", intent="billing_charge", plan="pro")])
        report = metrics_reports.report_hallucination(session=session, event_id="bad-1", note="wrong refund window", reported_by=user.id)
        session.commit()
        lead = client_as("lead")
        r = lead.post(f"/metrics/hallucinations/{report.id}/decide", data={"decision": "confirmed", "note": "KB says otherwise"}, follow_redirects=False)
        assert r.status_code == 303
        items = _items(session)
        assert [(i["kind"], i["state"]) for i in items] == [("regression", "raised"), ("hallucination", "confirmed")]
        reg, hal = items
        assert reg["value"] == pytest.approx(0.1) and reg["threshold"] == 0.05 and reg["segment"] == "run nightly"
        assert hal["days"] == ["2026-11-03"] and hal["segment"] == "intent=billing_charge, plan=pro"
        assert "wrong refund window" in hal["rule"]
        assert alerts_outbox.record_transitions(session=session, spec=spec).transitions == []

    def test_sampled_drop_says_its_interval(self, session: Session, spec: EvalSpec) -> None:
        _pass_rate_drop(session, "f:sample", "Run nightly against baseline base: ...", method="sample",
                        difference=-0.072, low=-0.11, high=-0.055, drop=0.072, threshold=0.05,
                        interval_text="pass rate -7.2 points [-11.0, -5.5]")
        session.commit()
        (item,) = transitions.regression_items(session=session, spec=spec)
        assert item["value_text"] == "pass rate -7.2 points [-11.0, -5.5]"
        assert item["value"] == pytest.approx(0.072) and item["threshold_text"] == "5 points"


class TestChannels:
    @pytest.mark.parametrize(
        ("kwargs", "field"),
        [
            ({"kind": "pager"}, "kind"),
            ({"kind": "slack", "target": "ftp://x"}, "url"),
            ({"kind": "slack", "target": "https://x.test", "topics": ["latency"]}, "topics"),
            ({"kind": "email", "email": {"host": "", "from_addr": "a@b", "to": "c@d"}}, "smtp_host"),
            ({"kind": "email", "email": {"host": "h", "from_addr": "a@b", "to": "c@d", "security": "ssl"}}, "security"),
            ({"kind": "email", "email": {"host": "h", "from_addr": "a@b", "to": "nobody"}}, "to"),
            ({"kind": "email", "email": {"host": "h", "from_addr": "a@b", "to": "c@d", "username": "u"}}, "password_env"),
        ],
    )
    def test_bad_settings_name_the_field(self, session, kwargs, field) -> None:  # type: ignore[no-untyped-def]
        with pytest.raises(channels.AlertsError, match=f"^{field}:"):
            channels.add_channel(session=session, name="c", **kwargs)
        assert channels.list_channels(session=session) == []

    def test_remove_drops_queued_messages(self, session, spec) -> None:  # type: ignore[no-untyped-def]
        channels.add_channel(session=session, name="gone", kind="file", target="/tmp/unused.jsonl")
        queue_bad_days(session, spec)
        channels.remove_channel(session=session, ref="gone")
        session.commit()
        assert _items(session) == []


_LEASE_SCRIPT = """
import sys, json
from webapp.core.db import make_engine
from webapp.alerts import channels
from webapp.alerts import outbox as alerts_outbox
from webapp.alerts import transitions
url, holder = sys.argv[1], sys.argv[2]
engine = make_engine(url)
engine.connect().close()
print("ready", flush=True)
sys.stdin.readline()  # both processes are ready: go at once
got = alerts_outbox.acquire_lease(engine=engine, holder=holder, ttl_s=30)
print(json.dumps({"holder": holder, "got": got}))
"""


class TestEvaluatorLease:
    def test_two_processes_one_evaluator(self, db_url, engine) -> None:  # type: ignore[no-untyped-def]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        procs = [
            subprocess.Popen([sys.executable, "-c", _LEASE_SCRIPT, db_url, name], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True, env=env, cwd=ROOT)
            for name in ("proc-a", "proc-b")
        ]
        for proc in procs:  # each has imported the app and connected
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        outs = [json.loads(p.communicate(timeout=60)[0].strip().splitlines()[-1]) for p in procs]
        winners = [o["holder"] for o in outs if o["got"]]
        assert len(winners) == 1
        loser = "proc-b" if winners == ["proc-a"] else "proc-a"
        assert alerts_outbox.acquire_lease(engine=engine, holder=winners[0], ttl_s=30)  # the holder renews
        assert not alerts_outbox.acquire_lease(engine=engine, holder=loser, ttl_s=30)
        later = utcnow() + dt.timedelta(seconds=31)
        assert alerts_outbox.acquire_lease(engine=engine, holder=loser, ttl_s=30, now=later)  # the holder died: taken over
        alerts_outbox.release_lease(engine=engine, holder=loser)
        assert alerts_outbox.acquire_lease(engine=engine, holder=winners[0], ttl_s=30)

    def test_two_processes_run_once_queue_one_message(self, db_url, session, spec, tmp_path) -> None:  # type: ignore[no-untyped-def]
        log = tmp_path / "notifications.jsonl"
        channels.add_channel(session=session, name="log", kind="file", target=str(log))
        load(session, spec, bad_accept_days())
        script = (
            "import sys, json\n"
            "from webapp.core.db import make_engine\nfrom webapp.core.spec import load_spec\n"
            "from webapp.alerts.background import run_pass\n"
            "engine = make_engine(sys.argv[1])\n"
            f"r = run_pass(engine=engine, spec=load_spec({str(ROOT / 'data' / 'eval_spec.yaml')!r}), base_url='http://x', "
            "secret_key='k', holder=sys.argv[2], lease_ttl_s=60)\n"
            "print(json.dumps({'evaluated': r.evaluated, 'sent': len(r.delivery.sent)}))\n"
        )
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        procs = [subprocess.Popen([sys.executable, "-c", script, db_url, h], stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT) for h in ("a", "b")]
        outs = [json.loads(p.communicate(timeout=120)[0].strip().splitlines()[-1]) for p in procs]
        assert sum(o["evaluated"] for o in outs) == 1
        session.expire_all()
        msgs = list(session.execute(select(AlertOutbox)).scalars())
        assert len(msgs) == 1
        lines = log.read_text().splitlines()
        assert len(lines) == 1 and json.loads(lines[0])["items"][0]["topic"] == "accept_rate"
        assert as_utc(msgs[0].sent_at) <= utcnow()  # type: ignore[arg-type]
