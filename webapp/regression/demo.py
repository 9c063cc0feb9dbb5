"""Demo hook: seed the regression suite with the demo dataset's five golden examples."""

from __future__ import annotations

from sqlmodel import Session

from webapp.core.db import stored_id
from webapp.core.spec import EvalSpec
from webapp.regression import service
from webapp.runs.demo_context import RunDemoContext


def seed(*, session: Session, spec: EvalSpec, ctx: RunDemoContext) -> None:
    """Append the demo dataset's golden cases to the suite, recorded as added by the team lead."""
    lead = ctx.users["lead"]
    added = service.seed_golden(session=session, created_by=stored_id(lead.id), dataset_id=stored_id(ctx.dataset.id))
    ctx.extra["regression_cases"] = [c.case_id for c in added]
