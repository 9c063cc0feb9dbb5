"""Demo hook: check the demo run, so the demo shows results, failing drafts and regression alerts."""

from __future__ import annotations

from sqlmodel import Session

from webapp.checks import service
from webapp.core.db import stored_id
from webapp.core.spec import EvalSpec
from webapp.runs.demo_context import RunDemoContext


def seed(*, session: Session, spec: EvalSpec, ctx: RunDemoContext) -> None:
    """Check every draft of the demo run (results stored, alerts raised)."""
    result = service.check_run(session=session, spec=spec, run_id=stored_id(ctx.run.id))
    ctx.extra["checks"] = result
