"""Datasets: the list of imported versions, a dataset's cases, and one case."""

from __future__ import annotations

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse

from webapp.auth.service import Principal
from webapp.core.db import SessionDep
from webapp.datasets import service, views
from webapp.web.deps import SpecDep, require_role
from webapp.web.templating import render_view

router = APIRouter()
DATASET_ROLES = ("lead", "pm", "admin", "labeler")


@router.get("/datasets", response_class=HTMLResponse, name="datasets_list")
def datasets_list(
    request: Request, session: SessionDep, principal: Principal = Depends(require_role(*DATASET_ROLES))
) -> HTMLResponse:
    """List every imported dataset version."""
    return render_view(request, "datasets/list.html", views.dataset_list_view(session=session))


@router.get("/datasets/{dataset_id}", response_class=HTMLResponse, name="dataset_detail")
def dataset_detail(
    request: Request,
    dataset_id: int,
    session: SessionDep,
    spec: SpecDep,
    category: str = "",
    intent: str = "",
    golden: str = "",
    q: str = "",
    principal: Principal = Depends(require_role(*DATASET_ROLES)),
) -> HTMLResponse:
    """Show a dataset's mix against the plan and its cases, filterable by category, intent and golden."""
    filters = service.CaseFilter(category=category, intent=intent, golden=golden, q=q)
    try:
        view = views.dataset_detail_view(session=session, spec=spec, ref=dataset_id, filters=filters)
    except service.DatasetNotFound as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from None
    return render_view(request, "datasets/detail.html", view, block="results")


@router.get("/datasets/{dataset_id}/cases/{case_id}", response_class=HTMLResponse, name="dataset_case")
def dataset_case(
    request: Request,
    dataset_id: int,
    case_id: str,
    session: SessionDep,
    principal: Principal = Depends(require_role(*DATASET_ROLES)),
) -> HTMLResponse:
    """Show one case: ticket, conversation, account metadata, KB articles, reference."""
    try:
        view = views.dataset_case_view(session=session, ref=dataset_id, case_id=case_id)
    except service.DatasetNotFound as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from None
    return render_view(request, "datasets/case.html", view)
