"""The gates' reaction: a run's stored gate criteria (webapp/gates/stored_report.py) are computed again when it is
checked (issue 42 item 2), so the gate pages, their API and the home card read them. A final grade's change is
left to the jobs loop's sweep (webapp/gates/background.py, every 5 s, outside the write lock: its docstring says why).

Gates sit after ppi in the domains' order, so a final grade's PPI figures are stored before; the
gate report reads those as they are when the page opens (only its whole-run criteria are stored).
"""

from __future__ import annotations

from pydantic import JsonValue
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


REACTIONS: tuple[Reaction, ...] = (
    Reaction(name="gates.report_after_check", fact="run_checked", handle=report_after_check),
)
