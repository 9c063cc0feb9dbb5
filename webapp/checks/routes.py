"""JSON API of the automated checks: a run's summary, re-checking, one draft's results."""

from __future__ import annotations

from fastapi import APIRouter, Depends, HTTPException

from webapp.app import flows
from webapp.auth.service import Principal
from webapp.checks import service
from webapp.checks.draft_checks import DraftChecks, draft_results
from webapp.checks.schemas import (
    CheckFailure,
    CheckRatePublic,
    CheckResultPublic,
    CiGate,
    DraftChecksPublic,
    ExamplesPublic,
    FailingDraft,
    RatePublic,
    RecheckPublic,
    RunChecksPublic,
    RunRef,
)
from webapp.core.blind import SignalsView
from webapp.core.db import SessionDep, stored_id
from webapp.core.spec import EvalSpec
from webapp.runs.deps import RunDep
from webapp.runs.service import DraftNotFound
from webapp.web.deps import ANY_ROLE, SpecDep, require_role

router = APIRouter(tags=["checks"])

RECHECK_ROLES = ("lead", "admin", "pm")


def rate_public(rate: service.Rate) -> RatePublic:
    """Return passes over drafts as JSON."""
    return RatePublic(passed=rate.passed, failed=rate.failed, total=rate.total, pass_rate=rate.rate)


def check_rate_public(c: service.CheckRate) -> CheckRatePublic:
    """Return one check's figures across a run as JSON."""
    return CheckRatePublic(
        key=c.key, label=c.label, passed=c.passed, failed=c.failed, not_applicable=c.not_applicable, pass_rate=c.rate
    )


def failing_draft(o: service.DraftOutcome) -> FailingDraft:
    """Return a failing draft and its failed checks as JSON."""
    return FailingDraft(
        draft_id=o.draft_id,
        case_id=o.case_id,
        sample_index=o.sample_index,
        category=o.category,
        intent=o.intent,
        golden=o.golden,
        safety=o.safety,
        passed=o.passed,
        failures=[CheckFailure(key=r.key, reason=r.reason) for r in o.failures],
    )


def run_checks_public(seen: service.RunSummary, gate: CiGate) -> RunChecksPublic:
    """Return a run summary as JSON (pass it through summary_for_viewer first: blind grading)."""
    shown, ex = seen.failing, seen.examples
    return RunChecksPublic(
        run=RunRef(id=seen.run_id, name=seen.run_name, dataset_id=seen.dataset_id),
        drafts=seen.drafts,
        checked=seen.checked,
        checked_at=seen.checked_at.isoformat() if seen.checked_at else None,
        kb_version=seen.kb_version,
        kb_changed_since_check=seen.kb_changed,
        overall=rate_public(seen.overall),
        examples=ExamplesPublic(
            passed=ex.passing, failed=ex.failing, unchecked=ex.unchecked, missing=ex.missing, total=ex.total, pass_rate=ex.rate
        ),
        per_check=[check_rate_public(c) for c in seen.per_check],
        per_category={k: rate_public(v) for k, v in seen.per_category.items()},
        per_intent={k: rate_public(v) for k, v in seen.per_intent.items()},
        golden_failures=[o.case_id for o in shown if o.golden],
        safety_failures=[o.case_id for o in shown if o.safety],
        failing_drafts=[failing_draft(o) for o in shown],
        drafts_hidden=seen.hidden,
        gate=gate,
    )


def summary_payload(
    session: SessionDep, summary: service.RunSummary, spec: EvalSpec, principal: Principal
) -> RunChecksPublic:
    """Return a run summary as JSON, with the CI gate's verdict; a blind grader's figures count only drafts they graded."""
    signals = flows.signals_view(session=session, spec=spec, principal=principal, run_id=summary.run_id)
    reasons = flows.ci_gate_failures(session=session, spec=spec, summary=summary, signals=signals)
    gate = CiGate(passes=not reasons, reasons=reasons, pass_rate_required=spec.gates.pilot.automated_pass_rate)
    return run_checks_public(service.summary_for_viewer(summary, signals), gate)


def draft_checks_public(d: DraftChecks, signals: SignalsView) -> DraftChecksPublic:
    """Return a draft's results as JSON: none, with `signals_hidden`, while `signals` hides the draft (blind grading)."""
    hidden = signals.hides(d.draft.id)
    return DraftChecksPublic(
        draft_id=stored_id(d.draft.id),
        run=d.run.name,
        case_id=d.case.case_id,
        checked_at=d.checked_at.isoformat() if d.checked_at else None,
        kb_version=d.kb_version,
        signals_hidden=hidden,
        passed=d.passed if d.results and not hidden else None,
        results=[] if hidden else [CheckResultPublic(key=r.key, status=r.status, reason=r.reason) for r in d.results],
    )


@router.get("/runs/{run}/checks")
def get_run_checks(
    session: SessionDep, spec: SpecDep, *, principal: Principal = Depends(require_role(*ANY_ROLE)), run: RunDep
) -> RunChecksPublic:
    """Return a run's check results: overall, per check, per category, per intent, failing drafts."""
    return summary_payload(session, service.run_summary(session=session, run_id=stored_id(run.id)), spec, principal)


@router.post("/runs/{run}/checks")
def recheck_run(
    session: SessionDep, spec: SpecDep, *, principal: Principal = Depends(require_role(*RECHECK_ROLES)), run: RunDep
) -> RecheckPublic:
    """Check (or re-check) a run against the KB as it is now; return its summary and any new alerts."""
    result = service.check_run(session=session, spec=spec, run_id=stored_id(run.id))
    new = service.raised_alerts(session=session, spec=spec, result=result)
    data = summary_payload(session, result.summary, spec, principal)
    return RecheckPublic(**dict(data), new_alerts=new)


@router.get("/drafts/{draft_id}/checks")
def get_draft_checks(
    draft_id: int, session: SessionDep, spec: SpecDep, principal: Principal = Depends(require_role(*ANY_ROLE))
) -> DraftChecksPublic:
    """Return one draft's check results with reasons (hidden from a blind grader until they grade it)."""
    try:
        results = draft_results(session=session, draft_id=draft_id)
    except DraftNotFound as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from None
    return draft_checks_public(results, flows.signals_view(session=session, spec=spec, principal=principal, draft_ids=[draft_id]))
