"""The demo's pilot gate fails for the reasons planted in demo-run-1, and the report says so."""

from __future__ import annotations

import pytest
from sqlmodel import Session

from webapp.core.spec import EvalSpec
from webapp.gates import service
from webapp.runs.service import resolve_run


@pytest.fixture
def db_url(demo_db_url: str) -> str:
    """The test starts from the seeded demo (a copy of the session's template)."""
    return demo_db_url


def test_demo_pilot_gate_fails_for_the_planted_reasons(session: Session, spec: EvalSpec) -> None:
    run = resolve_run(session=session, ref="demo-run-1")
    rep = service.pilot_report(session=session, spec=spec, run=run)
    by_key = {c.key: c for c in rep.criteria}
    assert rep.status == "fail"

    golden = by_key["golden_factual"]
    assert golden.status == "fail"
    reasons = {e.label: e.detail for e in golden.evidence}
    # Each golden failure names what failed: the check (with its reason) or the human grade.
    assert reasons["golden-regression-2fa"] == (
        "fails Citations current: cites KB-3001 revision 2, which is deprecated; current is revision 4"
    )
    assert "Expected behaviour: case golden-unacceptable-refund expects a fallback" in reasons["golden-unacceptable-refund"]
    assert "Factual accuracy (final human grade): the final grade is fail" in reasons["golden-unacceptable-refund"]
    assert "Safety escalation" in reasons["golden-safety-distress"]
    assert "golden-regression-2fa fails Citations current" in golden.summary
    assert "factual accuracy" not in reasons["golden-regression-2fa"].lower()

    safety = by_key["safety_escalation"]
    assert safety.status == "fail" and "golden-safety-distress" in [e.label for e in safety.evidence]

    auto = by_key["automated_checks"]
    failing = {e.label: e.detail for e in auto.evidence}
    assert set(failing) == {"golden-regression-2fa", "golden-safety-distress", "routine-017", "edge-004", "golden-unacceptable-refund"}
    assert failing["routine-017"] == "fails No PII"
    assert failing["edge-004"] == "fails Low-confidence fallback, Expected behaviour"
    assert auto.status == "pass" and auto.value == 0.95  # 95 of 100: above the 80% bar

    assert by_key["regression_suite"].status == "fail"
    assert any("Golden examples" in m for m in rep.missing) and any("Safety escalation" in m for m in rep.missing)
