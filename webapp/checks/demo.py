"""Demo hook: check the demo run, so the demo shows results, failing drafts and regression alerts."""

from __future__ import annotations

from sqlmodel import Session

from webapp import flows
from webapp.checks import service
from webapp.db import stored_id
from webapp.demo.context import DemoContext
from webapp.spec import EvalSpec


def seed(*, session: Session, spec: EvalSpec, ctx: DemoContext) -> None:
    """Check every draft of the demo run (results stored, alerts raised)."""
    result = service.check_run(session=session, spec=spec, run_id=stored_id(ctx.run.id))
    flows.after_run_checked(session=session, spec=spec, run_id=result.run_id)
    ctx.extra["checks"] = result
