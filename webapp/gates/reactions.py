"""The gates' reactions: a run's stored gate criteria (webapp/gates/stored_report.py) are computed again when it is
checked or one of its drafts gets a final grade (issue 42 item 2), so the gate pages, their API and the home card read them.

Gates sit after ppi in the domains' order, so a final grade's PPI figures are stored before; the
gate report reads those as they are when the page opens (only its whole-run criteria are stored).
"""

from __future__ import annotations

from pydantic import JsonValue
from sqlalchemy import select
from sqlmodel import Session

from webapp.core.db import table_of
from webapp.core.reactions import FactPublic, Reaction
from webapp.core.spec import EvalSpec
from webapp.gates import stored_report
from webapp.runs.models import Draft, Run

_DR = table_of(Draft)


def _refresh(session: Session, spec: EvalSpec, run_id: int | None) -> JsonValue:
    run = None if run_id is None else session.get(Run, run_id)
    if run is None or not stored_report.refresh(session=session, spec=spec, run=run):
        return None
    return {"run_id": run_id}


def report_after_check(session: Session, spec: EvalSpec, fact: FactPublic) -> JsonValue:
    """React to "run_checked": store the run's gate criteria with its new check results."""
    return _refresh(session, spec, int(fact.subject["run_id"]))


def report_after_grade(session: Session, spec: EvalSpec, fact: FactPublic) -> JsonValue:
    """React to "draft_finalised": store the gate criteria of the draft's run with its new final grade."""
    run_id = session.execute(select(_DR.c.run_id).where(_DR.c.id == int(fact.subject["draft_id"]))).scalar()
    return _refresh(session, spec, None if run_id is None else int(run_id))


REACTIONS: tuple[Reaction, ...] = (
    Reaction(name="gates.report_after_check", fact="run_checked", handle=report_after_check),
    Reaction(name="gates.report_after_grade", fact="draft_finalised", handle=report_after_grade),
)
