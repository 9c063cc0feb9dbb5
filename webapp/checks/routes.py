"""JSON API of the automated checks: a run's summary, re-checking, one draft's results."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, HTTPException

from webapp.app import flows
from webapp.auth.service import Principal
from webapp.checks import service
from webapp.checks.schemas import DraftChecksPublic, RecheckPublic, RunChecksPublic
from webapp.core.db import SessionDep, stored_id
from webapp.core.spec import EvalSpec
from webapp.runs.deps import RunDep
from webapp.runs.service import DraftNotFound
from webapp.web.deps import ANY_ROLE, SpecDep, require_role

router = APIRouter(tags=["checks"])

RECHECK_ROLES = ("lead", "admin", "pm")


def summary_payload(
    session: SessionDep, summary: service.RunSummary, spec: EvalSpec, principal: Principal
) -> dict[str, Any]:
    """Return a run summary as JSON, with the CI gate's verdict; a blind grader's figures count only drafts they graded."""
    signals = flows.signals_view(session=session, spec=spec, principal=principal, run_id=summary.run_id)
    data = service.summary_for_viewer(summary, signals).as_dict()
    reasons = flows.ci_gate_failures(session=session, spec=spec, summary=summary, signals=signals)
    data["gate"] = {"passes": not reasons, "reasons": reasons, "pass_rate_required": spec.gates.pilot.automated_pass_rate}
    return data


@router.get("/runs/{run}/checks", response_model=RunChecksPublic)
def get_run_checks(
    session: SessionDep, spec: SpecDep, *, principal: Principal = Depends(require_role(*ANY_ROLE)), run: RunDep
) -> dict[str, Any]:
    """Return a run's check results: overall, per check, per category, per intent, failing drafts."""
    return summary_payload(session, service.run_summary(session=session, run_id=stored_id(run.id)), spec, principal)


@router.post("/runs/{run}/checks", response_model=RecheckPublic)
def recheck_run(
    session: SessionDep, spec: SpecDep, *, principal: Principal = Depends(require_role(*RECHECK_ROLES)), run: RunDep
) -> dict[str, Any]:
    """Check (or re-check) a run against the KB as it is now; return its summary and any new alerts."""
    result = service.check_run(session=session, spec=spec, run_id=stored_id(run.id))
    alerts = flows.after_run_checked(session=session, spec=spec, run_id=result.run_id)
    data = summary_payload(session, result.summary, spec, principal)
    data["new_alerts"] = [{"id": a.id, "kind": a.kind, "message": a.message} for a in alerts]
    return data


@router.get("/drafts/{draft_id}/checks", response_model=DraftChecksPublic)
def get_draft_checks(
    draft_id: int, session: SessionDep, spec: SpecDep, principal: Principal = Depends(require_role(*ANY_ROLE))
) -> dict[str, Any]:
    """Return one draft's check results with reasons (hidden from a blind grader until they grade it)."""
    try:
        results = service.draft_results(session=session, draft_id=draft_id)
    except DraftNotFound as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from None
    return results.as_dict(flows.signals_view(session=session, spec=spec, principal=principal, draft_ids=[draft_id]))
