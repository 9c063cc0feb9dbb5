"""JSON API shapes of the launch-gate reports."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from webapp.core.public import PublicModel
from webapp.gates.report import CriterionResult, GateReport, Verdict
from webapp.web.api_schemas import Timestamp


class GateRun(BaseModel):
    """The run a report is about (null fields when the gate has no run)."""

    id: int | None
    name: str | None


class GateReportPublic(PublicModel):
    """A gate's verdict, what is missing, and each criterion with its measured value and evidence."""

    gate: Literal["pilot", "production"]
    run: GateRun
    status: Verdict
    passed: bool
    missing: list[str]
    generated_at: Timestamp
    criteria: list[CriterionResult]
    figures_state: Literal["current", "updating", "computing"] = Field(
        default="current",
        description="The stored human-grading figures it read: updating or computing while grades or draws changed since (sign-off waits)",
    )


def gate_report_public(rep: GateReport) -> GateReportPublic:
    """Return a gate report as the API answers it (and as a sign-off stores it, with model_dump(mode="json"))."""
    return GateReportPublic.of(rep, run=GateRun(id=rep.run_id, name=rep.run_name), generated_at=rep.generated_at.isoformat())
