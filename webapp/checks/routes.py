"""JSON API of the automated checks: a run's summary, re-checking, one draft's results."""

from __future__ import annotations

from urllib.parse import quote

from fastapi import APIRouter, Depends, HTTPException, Request
from sqlmodel import Session

from webapp.auth.service import Principal
from webapp.checks import cli as check_cli
from webapp.checks import hooks, service
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
    VerdictLinks,
    VerdictPublic,
)
from webapp.core.blind import SignalsView
from webapp.core.db import SessionDep, stored_id
from webapp.core.spec import EvalSpec
from webapp.runs import hooks as runs_hooks
from webapp.runs import pipeline
from webapp.runs.deps import RunDep
from webapp.runs.models import Run
from webapp.runs.service import DraftNotFound
from webapp.web.api_docs import error_response
from webapp.web.deps import ANY_ROLE, SpecDep, readable_by_ci, require_pipeline, require_role

router = APIRouter(tags=["checks"])

# Who may check a run again: a lead, the PM, the ML lead (who reviews eval results before deploy) and the
# admin; and the team's CI with a `ci` token (readable_by_ci).
RECHECK_ROLES = ("lead", "admin", "pm", "ml_lead")


def rate_public(rate: service.Rate) -> RatePublic:
    """Return passes over drafts as JSON."""
    return RatePublic.of(rate, pass_rate=rate.rate)


def check_rate_public(c: service.CheckRate) -> CheckRatePublic:
    """Return one check's figures across a run as JSON."""
    return CheckRatePublic.of(c, pass_rate=c.rate)


def failing_draft(o: service.DraftOutcome) -> FailingDraft:
    """Return a failing draft and its failed checks as JSON."""
    return FailingDraft.of(o, failures=[CheckFailure.of(r) for r in o.failures])


def run_checks_public(seen: service.RunSummary, gate: CiGate, verdict: VerdictPublic) -> RunChecksPublic:
    """Return a run summary as JSON (pass it through summary_for_viewer first: blind grading)."""
    shown, ex = seen.failing, seen.examples
    return RunChecksPublic(
        **dict(verdict),
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


BLIND_TEXT = "The full report of `draftdesk check` lists drafts you have not graded: it shows once you have graded them."


def verdict_links(*, session: Session, base_url: str, run: Run) -> VerdictLinks:
    """Return the absolute links a CI job's summary gives: the run, its comparison with the baseline, its pilot gate."""
    base = base_url.rstrip("/")
    name = quote(run.name, safe="")
    baseline = hooks.baseline_of(session=session, run_id=stored_id(run.id))
    compare = f"{base}/runs/compare?a={quote(baseline.name, safe='')}&b={name}" if baseline else f"{base}/runs/compare?b={name}"
    return VerdictLinks(run=f"{base}/runs/{name}", compare=compare, gate=f"{base}/gates/pilot?run={name}")


def verdict_payload(
    request: Request, session: Session, spec: EvalSpec, principal: Principal, *, run: Run, report: check_cli.CheckReport
) -> RunChecksPublic:
    """Return a run's checks with the CI verdict of `report`; a blind grader's figures and reasons count only drafts they graded."""
    summary = report.result.summary
    signals = runs_hooks.signals_view(session=session, spec=spec, principal=principal, run_id=summary.run_id)
    # The viewer's reasons (a blind grader's count only drafts they graded); the verdict is the report's, everyone's.
    reasons = hooks.ci_gate_failures(session=session, spec=spec, summary=summary, signals=signals)
    gate = CiGate(passes=not reasons, reasons=reasons, pass_rate_required=spec.gates.pilot.automated_pass_rate)
    blind = any(signals.hides(o.draft_id) for o in summary.outcomes)
    verdict = VerdictPublic(
        verdict="fail" if report.exit_code else "pass",
        reasons=reasons,
        exit_code=1 if report.exit_code else 0,
        text=BLIND_TEXT if blind else check_cli.report_text(report),
        links=verdict_links(session=session, base_url=request.app.state.settings.base_url, run=run),
    )
    return run_checks_public(service.summary_for_viewer(summary, signals), gate, verdict)


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
        results=[] if hidden else [CheckResultPublic.of(r) for r in d.results],
    )


@router.get(
    "/runs/{run}/checks",
    summary="Read a run's checks and CI verdict",
    description=(
        "Everyone on the team (and the team's CI, with a `ci` token) reads what the last check of a run "
        "found: overall, per check, per category, per intent, the failing drafts, and the verdict of "
        "`draftdesk check` on those stored results, without checking again (404 if never checked)."
    ),
    responses={404: error_response("No run with that name or id, or the run was never checked")},
)
def get_run_checks(
    request: Request,
    session: SessionDep,
    spec: SpecDep,
    *,
    principal: Principal = Depends(readable_by_ci(*ANY_ROLE)),
    run: RunDep,
) -> RunChecksPublic:
    """Return a run's stored check results with the CI verdict on them."""
    report = check_cli.stored_verdict(session=session, spec=spec, run=run)
    if report is None:
        raise HTTPException(
            status_code=404, detail=f"run {run.name!r} was never checked: POST /api/v1/runs/{{run}}/checks checks it"
        )
    return verdict_payload(request, session, spec, principal, run=run, report=report)


RECHECK_PERMISSION = readable_by_ci(*RECHECK_ROLES)


@router.post(
    "/runs/{run}/checks",
    summary="Check a run again (today's KB) and give the CI verdict",
    description=(
        "The team's CI (a `ci` token), a lead, the PM, the ML lead or an admin checks a run against the KB "
        "as it is now, as `draftdesk check RUN` does (the same function): the summary, the verdict and "
        "exit code, and any regression alert the check raised."
    ),
)
def recheck_run(
    request: Request,
    session: SessionDep,
    spec: SpecDep,
    *,
    principal: Principal = Depends(RECHECK_PERMISSION),
    run: RunDep,
) -> RecheckPublic:
    """Check (or re-check) a run against the KB as it is now; return its summary, verdict and new alerts."""
    report = check_cli.check_verdict(session=session, spec=spec, run=run)
    return recheck_public(request, session, spec, principal, run=run, report=report)


def recheck_public(
    request: Request, session: Session, spec: EvalSpec, principal: Principal, *, run: Run, report: check_cli.CheckReport
) -> RecheckPublic:
    """Return a fresh check's answer: the checks, the verdict and the alerts it raised."""
    data = verdict_payload(request, session, spec, principal, run=run, report=report)
    return RecheckPublic(**dict(data), new_alerts=report.alerts)


@router.post(
    "/runs/{run}/complete",
    summary="Complete a run and give its CI verdict (the pipeline)",
    description=(
        "The team's CI calls this once every draft of its run is sent: the run is closed (its drafts no "
        "longer change) and checked, and the answer is the verdict of `draftdesk check RUN`, whose exit "
        "code fails the job. Calling it again checks again. Needs a `ci` token, or an ML lead or admin."
    ),
)
def complete_run(
    request: Request,
    session: SessionDep,
    spec: SpecDep,
    *,
    principal: Principal = Depends(require_pipeline()),
    run: RunDep,
) -> RecheckPublic:
    """Close a run and check it; return the verdict of `draftdesk check`."""
    closed = pipeline.close_run(session=session, run=run)
    report = check_cli.check_verdict(session=session, spec=spec, run=closed)
    return recheck_public(request, session, spec, principal, run=closed, report=report)


@router.get(
    "/drafts/{draft_id}/checks",
    summary="Read one draft's check results",
    description=(
        "Anyone on the team reads why one draft passes or fails each automated check; a blind grader sees "
        "nothing until they have graded the draft."
    ),
)
def get_draft_checks(
    draft_id: int, session: SessionDep, spec: SpecDep, principal: Principal = Depends(require_role(*ANY_ROLE))
) -> DraftChecksPublic:
    """Return one draft's check results with reasons (hidden from a blind grader until they grade it)."""
    try:
        results = draft_results(session=session, draft_id=draft_id)
    except DraftNotFound as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from None
    return draft_checks_public(results, runs_hooks.signals_view(session=session, spec=spec, principal=principal, draft_ids=[draft_id]))
