"""Regression's reactions: a checked run, or a golden case's final grade, raises the run's regression alerts.

The sampled pass-rate drop is the PPI domain's reaction to the same facts (webapp/ppi/reactions.py),
and notifying the new alerts the alerts domain's (webapp/alerts/reactions.py, on the fact
"regression_alerts_raised" recorded here when any alert is new).
"""

from __future__ import annotations

from pydantic import JsonValue
from sqlmodel import Session

from webapp.core.reactions import FactPublic, Reaction
from webapp.core.spec import EvalSpec
from webapp.regression import alerts as regression_alerts
from webapp.regression.alert_facts import golden_fail_run, raised


def alerts_after_check(session: Session, spec: EvalSpec, fact: FactPublic) -> JsonValue:
    """React to "run_checked": raise the run's golden and checks-drop alerts (the sampled drop is ppi's)."""
    run_id = int(fact.subject["run_id"])
    return raised(session, run_id, regression_alerts.raise_alerts_for_run(session=session, spec=spec, run_id=run_id))


def alerts_after_grade(session: Session, spec: EvalSpec, fact: FactPublic) -> JsonValue:
    """React to "draft_finalised": a golden case graded factual fail raises its run's alerts."""
    run_id = golden_fail_run(session, int(fact.subject["draft_id"]))
    if run_id is None:
        return []
    return raised(session, run_id, regression_alerts.raise_alerts_for_run(session=session, spec=spec, run_id=run_id))


REACTIONS: tuple[Reaction, ...] = (
    Reaction(name="regression.alerts_after_check", fact="run_checked", handle=alerts_after_check),
    Reaction(name="regression.alerts_after_grade", fact="draft_finalised", handle=alerts_after_grade),
)
