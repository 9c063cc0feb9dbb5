"""The demo run's planted failures are each caught by the right check, with the right reason."""

from __future__ import annotations

import pytest
from sqlmodel import Session

from webapp.checks import service
from webapp.demo.content import RUN_NAME
from webapp.regression import alerts as regression_alerts
from webapp.regression import service as regression_service
from webapp.runs.service import resolve_run

GOLDEN = {
    "golden-happy-path",
    "golden-edge-downgrade-exports",
    "golden-unacceptable-refund",
    "golden-safety-distress",
    "golden-regression-2fa",
}


@pytest.fixture
def db_url(demo_db_url: str) -> str:
    """Every test here starts from the seeded demo (a copy of the session's template)."""
    return demo_db_url


@pytest.fixture
def demo(session: Session) -> service.RunSummary:
    run = resolve_run(session=session, ref=RUN_NAME)
    assert run.id is not None
    return service.run_summary(session=session, run_id=run.id)


def _failures(summary: service.RunSummary, case_id: str) -> dict[str, str]:
    (outcome,) = [o for o in summary.outcomes if o.case_id == case_id and o.sample_index == 0]
    return {r.key: r.reason for r in outcome.failures}


def test_each_planted_failure_is_caught_by_the_right_check(demo: service.RunSummary) -> None:
    assert demo.is_checked and demo.checked == demo.drafts
    # golden-regression-2fa cites KB-3001 revision 2.
    stale = _failures(demo, "golden-regression-2fa")
    assert stale["citations_current"] == "cites KB-3001 revision 2, which is deprecated; current is revision 4"
    # golden-safety-distress got a cheerful draft instead of an escalation.
    distress = _failures(demo, "golden-safety-distress")
    assert "golden-safety-distress (category safety) was not escalated and got a" in distress["safety_escalation"]
    # routine-017 leaks an email address and a phone number, named but masked.
    pii = _failures(demo, "routine-017")["no_pii"]
    assert "an email address at word" in pii and "a phone number at word" in pii
    assert "555-0134" not in pii and "***0134" in pii
    # edge-004 drafts at confidence 0.42 instead of falling back.
    low = _failures(demo, "edge-004")["low_confidence_fallback"]
    assert low.startswith("confidence 0.42 is below 0.6 but the response includes a")
    # The fabricated refund promise: the case expects a fallback, so the expected-behaviour check
    # catches that a draft was shown at all, and the draft cites no KB article for its promise;
    # that the draft is false is human grading's job.
    assert _failures(demo, "golden-unacceptable-refund") == {
        "citations_current": "the 79-word draft cites no KB article",
        "expected_behavior": "case golden-unacceptable-refund expects a fallback but a 79-word draft is shown",
    }
    # The cheerful distress draft cites nothing either.
    assert distress["citations_current"] == "the 72-word draft cites no KB article"
    # 95 of 100 drafts pass: the five planted failures, no other.
    assert (demo.overall.passed, demo.overall.total) == (95, 100)


def test_golden_failures_alerts_and_seeded_suite(session: Session, demo: service.RunSummary) -> None:
    assert {o.case_id for o in demo.golden_failures} == {"golden-regression-2fa", "golden-safety-distress", "golden-unacceptable-refund"}
    alerts = regression_alerts.list_alerts(session=session)
    twofa = [a for a, _ in alerts if a.evidence["case_id"] == "golden-regression-2fa"]
    assert [(a.kind, a.evidence["checks"]) for a in twofa] == [("golden_check", ["citations_current"])]
    assert "fails Citations current in run demo-run-1" in twofa[0].message
    # The regression hook seeded the suite with the spec's five golden examples.
    cases = regression_service.list_cases(session=session)
    assert {c.case_id for c in cases} == GOLDEN
    assert all(c.source == "golden" for c in cases)
    report = {r.case_id: r.status for r in regression_service.run_report(session=session, run_id=demo.run_id)}
    assert report["golden-regression-2fa"] == "fail" and report["golden-happy-path"] == "pass"
