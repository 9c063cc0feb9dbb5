"""JSON API: the launch-gate reports."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends, HTTPException, Query

from webapp.auth.service import Principal
from webapp.db import SessionDep
from webapp.deps import SpecDep, require_role
from webapp.gates import service
from webapp.gates.schemas import GateReportPublic
from webapp.runs.service import RunNotFound, resolve_run

router = APIRouter(tags=["gates"])
READERS = ("pm", "support_lead", "lead", "admin")


@router.get("/gates/{gate}", response_model=GateReportPublic)
def get_gate(
    gate: Literal["pilot", "production"],
    session: SessionDep,
    spec: SpecDep,
    run: str = Query(..., description="Run name or id"),
    principal: Principal = Depends(require_role(*READERS)),
) -> dict[str, object]:
    """Return the gate report for a run: verdict, what is missing, and each criterion with evidence."""
    try:
        r = resolve_run(session=session, ref=run)
    except RunNotFound as exc:
        raise HTTPException(404, str(exc)) from exc
    return service.report(session=session, spec=spec, gate=gate, run=r).to_dict()
