"""Page: a run's rubric figures with 95% intervals, judge health, gate calls, and a further sample."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, Response
from sqlmodel import Session

from webapp.auth.service import Principal
from webapp.core.db import SessionDep, stored_id
from webapp.core.spec import EvalSpec
from webapp.evaluator import service as evaluator_service
from webapp.evaluator.models import EvaluatorRun
from webapp.evaluator.pages import VIEW_ROLES as EVALUATOR_VIEW_ROLES
from webapp.ppi import charts, service, until_decided
from webapp.ppi.judge_runs import RunAgreement, agreement_history, judge_runs
from webapp.ppi.routes import VIEW_ROLES
from webapp.ppi.schemas import JudgeRunView, RunReportPublic, UntilDecidedPublic
from webapp.ppi.stored_figures import run_figures, run_sequence_paths
from webapp.ppi.until_decided_view import until_decided_public
from webapp.ppi.views import TITLES, report_public
from webapp.runs.deps import RunDep
from webapp.runs.models import Run
from webapp.web.deps import SpecDep, require_role
from webapp.web.flash import consume_flash, flash_context, redirect_with_flash
from webapp.web.templating import render_view

router = APIRouter()


@dataclass(frozen=True)
class JudgeRunsView:
    """The judge's runs on the evaluator list page, and its agreement with people across them (chart JSON and table)."""

    runs: list[JudgeRunView]
    agreement: list[RunAgreement]
    agreement_figure: str | None  # plotly figure JSON; None with fewer than 2 runs to compare
    titles: dict[str, str]


@dataclass(frozen=True)
class EvaluatorRunsView:
    """The evaluator list page: the recorded evaluator runs (newest first) and the judge's runs."""

    runs: list[tuple[Run, EvaluatorRun]]
    judge: JudgeRunsView


def judge_runs_view(*, session: Session, spec: EvalSpec) -> JudgeRunsView:
    """Return the judge's runs and its agreement per figure across the graded ones (oldest first)."""
    runs = judge_runs(session=session)
    history = agreement_history(session=session, spec=spec, runs=runs)
    figure = charts.to_json(charts.agreement_figure(history, TITLES)) if len(history) >= 2 else None
    return JudgeRunsView(runs=runs, agreement=history, agreement_figure=figure, titles=TITLES)


@router.get("/evaluator/runs", response_class=HTMLResponse, name="evaluator_runs")
def evaluator_runs(
    request: Request, session: SessionDep, spec: SpecDep, principal: Principal = Depends(require_role(*EVALUATOR_VIEW_ROLES))
) -> HTMLResponse:
    """List the runs recorded by prompt-evaluator --record, and the Draft Desk runs the PPI judge scored (links to their intervals).

    Here rather than in webapp/evaluator/pages.py: the page shows both domains' runs, and only ppi
    (above evaluator in the layers) may read both. It also charts the judge's agreement with
    people per figure across the judged runs (the ML lead's drift watch, webapp/ppi/judge_runs.py).
    """
    view = EvaluatorRunsView(runs=evaluator_service.list_evaluator_runs(session=session), judge=judge_runs_view(session=session, spec=spec))
    return render_view(request, "evaluator/list.html", view)


@dataclass(frozen=True)
class RunIntervalsView:
    """The run's intervals page: the report (the API's model), the forest plot's JSON, and what the viewer may do."""

    run: Run
    r: RunReportPublic | None
    forest_figure: str | None
    sequence_figures: list[str]  # one plotly figure JSON per gate criterion: its confidence sequence's path
    can_sample: bool
    error: str | None
    flash: str | None = None  # what a further sample asked for and drew
    figures_state: str = "current"  # current, updating (inputs changed since; shown as they were) or computing (none yet)
    until: UntilDecidedPublic | None = None  # grade until decided: the setting, each criterion's call and stored decisions


@router.get("/ppi/runs/{run}", response_class=HTMLResponse)
def ppi_run_page(
    request: Request, session: SessionDep, spec: SpecDep, principal: Principal = Depends(require_role(*VIEW_ROLES)), *, run: RunDep
) -> HTMLResponse:
    """Show a run's figures: estimate [95% interval], the judge alone, human grades, gate calls, judge health and what the signals bought."""
    read = run_figures(session=session, spec=spec, run_id=stored_id(run.id))  # stored: the page never cross-fits
    report = read.value
    ordered = until_decided.in_draw_order(session=session, run_id=stored_id(run.id))
    public = None if report is None else report_public(report, spec, in_draw_order=ordered)
    view = RunIntervalsView(
        run=run,
        r=public,
        forest_figure=None if public is None else charts.to_json(charts.forest_figure(public.figures)),
        sequence_figures=[
            charts.to_json(charts.sequence_figure(p))
            for p in run_sequence_paths(session=session, spec=spec, run_id=stored_id(run.id)).value or []
            if p.points
        ] if public is not None else [],
        can_sample=principal.has_role("lead"),
        error=(said := flash_context(request))["error"],
        flash=said["flash"],
        figures_state=read.state,
        until=None if report is None else until_decided_public(
            session=session, spec=spec, run_id=stored_id(run.id), run_name=run.name, report=report
        ),
    )
    return consume_flash(request, render_view(request, "ppi/run.html", view))


@router.post("/ppi/runs/{run}/further-sample")
def ppi_further_sample(
    request: Request,
    session: SessionDep,
    budget: Annotated[float, Form(gt=0, allow_inf_nan=False)],
    principal: Principal = Depends(require_role("lead")),
    *,
    run: RunDep,
) -> Response:
    """Draw a further sample of the run to settle an undecided gate, then show the page again."""
    target = f"/ppi/runs/{quote(run.name)}"
    try:
        drew = service.draw_further_sample(session=session, run_id=stored_id(run.id), budget=budget)
    except service.PpiError as exc:
        return redirect_with_flash(request, target, text=str(exc), kind="error")
    # Each draft is drawn on its own with its probability (Bernoulli draws), so the count is the
    # budget only on average: say both, or a lead asking for 25 and getting 16 thinks drafts are lost.
    return redirect_with_flash(request, target, text=further_sample_text(budget=budget, drawn=drew.drawn))


def further_sample_text(*, budget: float, drawn: int) -> str:
    """Say what a further sample asked for and what it drew ("about 25 (Bernoulli draws), drew 16")."""
    return (
        f"Further sample: about {budget:g} (Bernoulli draws: each draft drawn on its own with its probability,"
        f" so the count varies), drew {drawn}; they are in the grading queue."
    )


@router.post("/ppi/runs/{run}/until-decided")
def ppi_until_decided(
    request: Request,
    session: SessionDep,
    spec: SpecDep,
    cap: Annotated[str, Form(max_length=12)] = "",
    principal: Principal = Depends(require_role("lead")),
    *,
    run: RunDep,
) -> Response:
    """Set the run to grade until decided (webapp/ppi/until_decided.py), with an optional cap on its final grades (blank: none)."""
    target = f"/ppi/runs/{quote(run.name)}"
    if cap.strip() and not cap.strip().isdigit():
        return redirect_with_flash(request, target, text="cap: a whole number of grades, or blank for none", kind="error")
    try:
        limit = int(cap) if cap.strip() else None
        until_decided.set_until_decided(session=session, run_id=stored_id(run.id), cap=limit, user_id=principal.user_id, spec=spec)
    except until_decided.UntilDecidedError as exc:
        return redirect_with_flash(request, target, text=str(exc), kind="error")
    capped = f", at most {limit} grades" if limit is not None else ""
    return redirect_with_flash(request, target, text=f"{run.name}: graded until decided{capped}; the queue closes by itself.")


STOPPED_TEXT = "{run}: no longer graded until decided; the queue serves the whole sample again; stored decisions stay."
NOT_SET_TEXT = "{run}: not graded until decided; nothing changed."


@router.post("/ppi/runs/{run}/until-decided/stop")
def ppi_until_decided_stop(
    request: Request, session: SessionDep, principal: Principal = Depends(require_role("lead")), *, run: RunDep
) -> Response:
    """Stop grading the run until decided (`until_decided.unset_until_decided`, as the API's PUT with `on: false`), then show the page again.

    Decision (docs/ppi.md, "Grade until decided"): a route of its own rather than an `on` field on the
    setting form, so a form that sets a cap can never unset by a missing field; a lead only, CSRF-protected.
    """
    target = f"/ppi/runs/{quote(run.name)}"
    was_set = until_decided.unset_until_decided(session=session, run_id=stored_id(run.id))
    return redirect_with_flash(request, target, text=(STOPPED_TEXT if was_set else NOT_SET_TEXT).format(run=run.name))
