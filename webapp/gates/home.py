"""Home card: the newest run's pilot-gate verdict, for the people who decide on launch."""

from __future__ import annotations

from urllib.parse import quote

from sqlmodel import Session

from webapp.auth.service import Principal
from webapp.core.spec import EvalSpec
from webapp.gates import service
from webapp.web.cards import HomeCard

DECIDERS = ("pm", "support_lead", "lead", "ml_lead", "admin")


def home_cards(*, session: Session, principal: Principal, spec: EvalSpec) -> list[HomeCard]:
    """Say whether the newest run passes the pilot gate, and what is missing."""
    if not principal.has_role(*DECIDERS):
        return []
    runs = service.runs_for_gates(session=session)
    if not runs:
        return []
    run = runs[0]
    rep = service.pilot_report(session=session, spec=spec, run=run)
    if rep.passed:
        body = f"{run.name} passes every pilot criterion. The PM and the ML lead sign the go decision."
        tone = "ok"
    else:
        # The report's own list of what is missing (failing criteria first), as the API gives it.
        body = f"{run.name}: {rep.status}. " + "; ".join(rep.missing[:2]) + "."
        tone = "alert" if rep.status == "fail" else "todo"
    return [HomeCard("Pilot launch gate", body, f"/gates/pilot?run={quote(run.name)}", "Open the report", None, tone)]
