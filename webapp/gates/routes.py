"""JSON API: the launch-gate reports."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends

from webapp.auth.service import Principal
from webapp.core.db import SessionDep
from webapp.gates import service
from webapp.gates.schemas import GateReportPublic, gate_report_public
from webapp.runs.deps import RunDep
from webapp.web.deps import SpecDep, readable_by_ci

router = APIRouter(tags=["gates"])
READERS = ("pm", "support_lead", "lead", "ml_lead", "admin")


@router.get(
    "/gates/{gate}",
    summary="Read a run's launch-gate report",
    description=(
        "The PM, the ML lead, leads, the support lead (and the team's CI, with a `ci` token) read the "
        "pilot or production gate report for a run (`run=` name or id): the verdict, what is missing, "
        "each criterion with its evidence."
    ),
)
def get_gate(
    gate: Literal["pilot", "production"],
    session: SessionDep,
    spec: SpecDep,
    *,
    principal: Principal = Depends(readable_by_ci(*READERS)),
    run: RunDep,
) -> GateReportPublic:
    """Return the gate report for a run (`?run=` name or id): verdict, what is missing, each criterion with evidence."""
    return gate_report_public(service.report(session=session, spec=spec, gate=gate, run=run))
