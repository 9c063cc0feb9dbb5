"""Runs: the list, a run with its drafts, and one draft beside the KB revisions it cites."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse
from starlette.convertors import Convertor, register_url_convertor

from webapp.auth.service import Principal
from webapp.core.blind import SignalsView
from webapp.core.db import SessionDep, stored_id
from webapp.datasets import service as datasets_service
from webapp.datasets.models import Dataset, EvalCase
from webapp.kb import service as kb_service
from webapp.kb.service import CitedRevision
from webapp.runs import hooks, service
from webapp.runs.deps import RunDep
from webapp.runs.models import Draft, Run
from webapp.web.deps import ANY_ROLE, SpecDep, require_role
from webapp.web.page_view import PageView
from webapp.web.templating import render_view

router = APIRouter()
RUN_ROLES = ANY_ROLE
# Pages of other domains that live under /runs/ with a fixed first segment (e.g. /runs/compare).
RESERVED_RUN_PATHS = ("compare",)


class RunRefConvertor(Convertor[str]):
    """A run name or id in a URL: any path segment except the reserved pages under /runs/."""

    regex = r"(?!(?:" + "|".join(RESERVED_RUN_PATHS) + r")$)[^/]+"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return str(value)


register_url_convertor("runref", RunRefConvertor())


@dataclass(frozen=True)
class RunsListView(PageView):
    """Every run, newest first, with its dataset and draft counts."""

    runs: list[service.RunRow]


@router.get("/runs", response_class=HTMLResponse, name="runs_list")
def runs_list(
    request: Request, session: SessionDep, principal: Principal = Depends(require_role(*RUN_ROLES))
) -> HTMLResponse:
    """List runs, newest first."""
    return render_view(request, "runs/list.html", RunsListView(runs=service.list_runs(session=session)))


@dataclass(frozen=True)
class RunFilters:
    """The run page's filters as the URL gives them ("" when unset; golden: "", "yes" or "no")."""

    category: str = ""
    intent: str = ""  # the case's intent
    draft_intent: str = ""  # the intent the assistant predicted
    golden: str = ""


@dataclass(frozen=True)
class RunDetailView(PageView):
    """A run with its counts, the drafts its filters select, and what the filter menus offer."""

    run: Run
    summary: service.RunRow
    signals: SignalsView
    drafts: list[service.DraftRow]
    facets: dict[str, list[str]]  # categories and intents of the run's dataset
    draft_intents: list[str]
    filters: RunFilters


@router.get("/runs/{run:runref}", response_class=HTMLResponse, name="run_detail")
def run_detail(
    request: Request,
    session: SessionDep,
    spec: SpecDep,
    category: str = "",
    intent: str = "",
    draft_intent: str = "",
    golden: str = "",
    *,
    principal: Principal = Depends(require_role(*RUN_ROLES)),
    run: RunDep,
) -> HTMLResponse:
    """Show a run (by name or id) and its drafts, filterable by the case's category, intent and golden flag and the draft's intent."""
    run_id = stored_id(run.id)
    view = RunDetailView(
        run=run,
        summary=service.run_row(session=session, run=run),
        signals=hooks.signals_view(session=session, spec=spec, principal=principal, run_id=run_id),
        drafts=service.list_drafts(
            session=session, run_id=run_id, category=category, intent=intent, draft_intent=draft_intent, golden=golden
        ),
        facets=datasets_service.case_facets(session=session, dataset_id=run.dataset_id),
        draft_intents=service.draft_intents(session=session, run_id=run_id),
        filters=RunFilters(category=category, intent=intent, draft_intent=draft_intent, golden=golden),
    )
    return render_view(request, "runs/detail.html", view, block="results")


@dataclass(frozen=True)
class DraftDetailView(PageView):
    """A draft with its case, run and dataset, beside the KB revisions it cites (signals blind until graded)."""

    draft: Draft
    case: EvalCase
    run: Run
    cited: list[CitedRevision]
    dataset: Dataset
    signals_hidden: bool


@router.get("/drafts/{draft_id}", response_class=HTMLResponse, name="draft_detail")
def draft_detail(
    request: Request,
    draft_id: int,
    session: SessionDep,
    spec: SpecDep,
    principal: Principal = Depends(require_role(*RUN_ROLES)),
) -> HTMLResponse:
    """Show a draft with its ticket, conversation and account, beside the KB revisions it cites (signals blind until graded)."""
    try:
        draft, case, run = service.get_draft(session=session, draft_id=draft_id)
    except service.DraftNotFound as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from None
    cited = kb_service.cited_revisions(session=session, citations=draft.citations)
    dataset = datasets_service.get_dataset(session=session, ref=case.dataset_id)
    hidden = hooks.signals_view(session=session, spec=spec, principal=principal, draft_ids=[draft_id]).hides(draft_id)
    view = DraftDetailView(draft=draft, case=case, run=run, cited=cited, dataset=dataset, signals_hidden=hidden)
    return render_view(request, "runs/draft.html", view)
