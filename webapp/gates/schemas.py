"""JSON API shapes of the launch-gate reports."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from webapp.gates.report import CriterionResult, Verdict
from webapp.web.api_schemas import Timestamp


class GateRun(BaseModel):
    """The run a report is about (null fields when the gate has no run)."""

    id: int | None
    name: str | None


class GateReportPublic(BaseModel):
    """A gate's verdict, what is missing, and each criterion with its measured value and evidence."""

    gate: Literal["pilot", "production"]
    run: GateRun
    status: Verdict
    passed: bool
    missing: list[str]
    generated_at: Timestamp
    criteria: list[CriterionResult]
