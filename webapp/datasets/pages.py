"""Datasets: the list of imported versions, a dataset's cases, and one case."""

from __future__ import annotations

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse

from webapp.auth.service import Principal
from webapp.core.db import SessionDep, stored_id
from webapp.datasets import service
from webapp.datasets.mix import mix_of_dataset
from webapp.web.deps import SpecDep, require_role
from webapp.web.templating import render

router = APIRouter()
DATASET_ROLES = ("lead", "pm", "admin", "labeler")


@router.get("/datasets", response_class=HTMLResponse, name="datasets_list")
def datasets_list(
    request: Request, session: SessionDep, principal: Principal = Depends(require_role(*DATASET_ROLES))
) -> HTMLResponse:
    """List every imported dataset version."""
    return render(request, "datasets/list.html", {"datasets": service.list_datasets(session=session)})


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
    try:
        ds = service.get_dataset(session=session, ref=dataset_id)
    except service.DatasetNotFound as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from None
    filters = service.CaseFilter(category=category, intent=intent, golden=golden, q=q)
    ctx = {
        "dataset": ds,
        "cases": service.list_cases(session=session, dataset_id=stored_id(ds.id), filters=filters),
        "facets": service.case_facets(session=session, dataset_id=stored_id(ds.id)),
        "counts": service.category_counts(session=session, dataset_id=stored_id(ds.id)),
        "mix": mix_of_dataset(session=session, spec=spec, dataset_id=stored_id(ds.id)),
        "filters": filters,
    }
    return render(request, "datasets/detail.html", ctx, block="results")


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
        ds = service.get_dataset(session=session, ref=dataset_id)
        case = service.get_case(session=session, dataset_id=stored_id(ds.id), case_id=case_id)
    except service.DatasetNotFound as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from None
    return render(request, "datasets/case.html", {"dataset": ds, "case": case})
