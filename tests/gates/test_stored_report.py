"""Issue 42 item 2: a run's whole-run gate criteria are stored by the reactions and read by the gate pages, their API and the home card.

The stored report equals the one computed from the rows; after a re-check, a final grade or a new
regression case it is shown as it was, marked updating (and not signed), until the reaction (or
the sweep, for a change without a fact) stored it again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, NoReturn

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session

from tests.gates.test_service import GOOD, build_run, grade_all, principal, ready_run, small_gate_spec
from tests.reactions_support import run_pending_reactions
from webapp.checks import service as checks_service
from webapp.core import figures
from webapp.core.db import stored_id
from webapp.core.spec import EvalSpec
from webapp.gates import service, stored_report
from webapp.gates.report import GateReport
from webapp.gates.schemas import gate_report_public
from webapp.grading.outcome import finalised
from webapp.grading.status import grading_status
from webapp.regression import service as regression_service

Clients = Callable[..., TestClient]


@pytest.fixture
def loop_mode() -> Iterator[None]:
    """Reads as in `serve` with its jobs loop: they never compute the report's stored part, the reactions do."""
    figures.set_refresh_on_read(False)
    yield
    figures.set_refresh_on_read(True)


def _public(rep: GateReport) -> dict[str, Any]:
    return gate_report_public(rep).model_dump(mode="json", exclude={"generated_at"})


def _no_compute(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*args: object, **kwargs: object) -> NoReturn:
        raise AssertionError("a read computed the whole-run gate criteria")

    monkeypatch.setattr(stored_report, "compute", boom)


def _engine(session: Session) -> Engine:
    engine = session.get_bind()
    assert isinstance(engine, Engine)
    return engine


@pytest.mark.parametrize("shape", ["ready", "failing"])
def test_the_stored_report_equals_the_computed_one(session: Session, spec: EvalSpec, shape: str, monkeypatch: pytest.MonkeyPatch) -> None:
    small = small_gate_spec(spec)
    if shape == "ready":
        run, _ = ready_run(session, small)
    else:  # a drafted safety case, graded low on tone: evidence in the failing criteria
        run = build_run(session, safety_drafted=True)
        checks_service.check_run(session=session, spec=small, run_id=run.id)
        grade_all(session, small, run.id, {**GOOD, "tone": 1})
    session.commit()
    computed = {g: _public(service.report(session=session, spec=small, gate=g, run=run)) for g in service.GATES}
    assert figures.stored(session, stored_report.KIND, str(run.id)) is None  # a read stores nothing
    run_pending_reactions(_engine(session), small)
    assert figures.stored(session, stored_report.KIND, str(run.id)) is not None
    figures.set_refresh_on_read(False)
    try:
        _no_compute(monkeypatch)
        for gate in service.GATES:
            stored = _public(service.report(session=session, spec=small, gate=gate, run=run))
            assert stored == computed[gate] and stored["figures_state"] == "current"
    finally:
        figures.set_refresh_on_read(True)
    assert computed["pilot"]["status"] == ("pass" if shape == "ready" else "fail")


def test_a_recheck_marks_the_report_updating_until_the_reaction_ran(session: Session, spec: EvalSpec, loop_mode: None) -> None:
    small = small_gate_spec(spec)
    run, _ = ready_run(session, small)
    pm = principal(session, "pm@example.test", "pm")
    session.commit()
    run_pending_reactions(_engine(session), small)
    assert service.pilot_report(session=session, spec=small, run=run).current
    checks_service.check_run(session=session, spec=small, run_id=run.id)  # new check results and the fact "run_checked"
    session.commit()
    rep = service.pilot_report(session=session, spec=small, run=run)
    assert rep.report_state == "updating" and rep.figures_state == "updating" and not rep.current
    assert service.production_report(session=session, spec=small, run=run).figures_state == "updating"
    with pytest.raises(service.FiguresUpdating, match="figures are updating"):
        service.sign_off(session=session, spec=small, gate="pilot", run=run, principal=pm, decision="go")
    done = run_pending_reactions(_engine(session), small)
    assert any(name == "gates.report_after_check" for _, name in done.done)
    parts, state = stored_report.gate_parts(session=session, spec=small, run=run)
    assert state == "current" and parts == stored_report.compute(session=session, spec=small, run=run)
    assert service.sign_off(session=session, spec=small, gate="pilot", run=run, principal=pm, decision="go").verdict == "pass"


def test_a_final_grade_marks_it_updating_and_the_sweep_stores_it_outside_the_write_lock(
    session: Session, spec: EvalSpec, loop_mode: None
) -> None:
    small = small_gate_spec(spec)
    run = build_run(session)
    checks_service.check_run(session=session, spec=small, run_id=run.id)
    session.commit()
    run_pending_reactions(_engine(session), small)
    before = service.pilot_report(session=session, spec=small, run=run)
    assert before.current and {c.key: c.status for c in before.criteria}["human_grading"] == "incomplete"
    grade_all(session, small, run.id, GOOD)
    for draft_id in grading_status(session=session, run_id=run.id).states:
        finalised(session, draft_id)  # the fact a grading page records after the second grade
    session.commit()
    assert service.pilot_report(session=session, spec=small, run=run).report_state == "updating"
    # no reaction recomputes it per grade (webapp/gates/background.py says why): the sweep does
    done = run_pending_reactions(_engine(session), small)
    assert not any(name.startswith("gates.") for _, name in done.done)
    assert service.pilot_report(session=session, spec=small, run=run).report_state == "updating"
    engine = _engine(session)
    assert stored_report.stale_runs(session=session, spec=small) == [run.id]
    session.commit()
    assert stored_report.refresh_outside_write_lock(engine=engine, spec=small, run_id=stored_id(run.id))
    session.expire_all()
    assert stored_report.stale_runs(session=session, spec=small) == []
    after = service.pilot_report(session=session, spec=small, run=run)
    assert after.current and {c.key: c.status for c in after.criteria}["human_grading"] == "pass"


def test_a_change_without_a_fact_is_stored_again_by_the_sweep(
    session: Session, spec: EvalSpec, client_as: Clients, api_as: Clients, loop_mode: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    run, lead = ready_run(session, spec)
    session.commit()
    run_pending_reactions(_engine(session), spec)
    stored_report.refresh_stale(session=session, spec=spec)  # the check's reaction and the sweep store it
    session.commit()
    assert stored_report.refresh_stale(session=session, spec=spec) == []
    regression_service.add_case(session=session, created_by=lead.id, source="golden", case_id="routine-1", input="q", note="golden")
    session.commit()
    with monkeypatch.context() as m:
        _no_compute(m)
        pm = client_as("pm")
        page = pm.get(f"/gates/pilot?run={run.name}")
        assert page.status_code == 200 and "or the suite or eval set grew, since this report was computed" in page.text
        assert api_as("pm").get(f"/api/v1/gates/production?run={run.name}").json()["figures_state"] == "updating"
        signed = pm.post("/gates/pilot/signoff", data={"run": run.name, "decision": "no_go"})
        assert signed.status_code == 409 and "figures are updating" in signed.text
        assert pm.get("/").status_code == 200  # the home gate card reads it stored too
    assert stored_report.refresh_stale(session=session, spec=spec) == [stored_id(run.id)]
    session.commit()
    page = client_as("pm").get(f"/gates/pilot?run={run.name}")
    assert "figures-updating" not in page.text


def test_a_production_week_run_has_no_stored_report(session: Session, spec: EvalSpec) -> None:
    run = build_run(session)
    run.source = "production"
    assert stored_report.refresh(session=session, spec=spec, run=run) is False
