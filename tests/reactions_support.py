"""Run the reactions to facts in tests, as `serve`'s jobs loop does after a commit (webapp/core/reactions.py)."""

from __future__ import annotations

from sqlalchemy.engine import Engine
from sqlmodel import Session

from webapp.core import reactions
from webapp.core.config import ASSET_ROOT
from webapp.core.db import stored_id
from webapp.core.facts import FactName, record_fact
from webapp.core.spec import EvalSpec, load_spec
from webapp.regression.models import RegressionAlert

SPEC_PATH = ASSET_ROOT / "data" / "eval_spec.yaml"


def run_pending_reactions(engine: Engine, spec: EvalSpec | None = None) -> reactions.PassReport:
    """Run every due reaction of every committed fact now; return what the pass did."""
    return reactions.run_pending(engine, spec or load_spec(SPEC_PATH))


def react(session: Session, spec: EvalSpec, fact: FactName | None = None, **subject: int) -> list[RegressionAlert]:
    """Record `fact` (if given), commit the session, run the pending reactions; return the regression alerts they raised.

    What the reaction functions (once in webapp.app.flows) returned when they ran in the request.
    """
    if fact is not None:
        record_fact(session, fact, **subject)
    session.commit()
    engine = session.get_bind()
    assert isinstance(engine, Engine)
    report = run_pending_reactions(engine, spec)
    ids: list[int] = []
    for fact_id in dict.fromkeys(f for f, _ in report.done):
        done = reactions.results(session=session, fact_id=fact_id)
        for result in (done[r.name] for r in reactions.registry() if r.name in done):
            if isinstance(result, list):
                ids += [int(a["id"]) for a in result if isinstance(a, dict)]  # type: ignore[arg-type]
    alerts = [session.get(RegressionAlert, i) for i in ids]
    return [a for a in alerts if a is not None and stored_id(a.id) in ids]


def after_run_checked(session: Session, spec: EvalSpec, run_id: int) -> list[RegressionAlert]:
    """Re-check's reactions for `run_id` (its regression alerts, notified); return the new alerts."""
    return react(session, spec, "run_checked", run_id=run_id)


def after_grading(session: Session, spec: EvalSpec, draft_id: int) -> list[RegressionAlert]:
    """A final grade's reactions for `draft_id`; return the new regression alerts."""
    return react(session, spec, "draft_finalised", draft_id=draft_id)
