"""Home-page cards: open regression alerts for the PM and the lead, and the suite's progress."""

from __future__ import annotations

from sqlmodel import Session

from webapp.auth.service import Principal
from webapp.checks.rules import PROBLEM_LABELS
from webapp.core.spec import EvalSpec
from webapp.regression import alerts, service
from webapp.regression.models import RegressionAlert
from webapp.web.cards import HomeCard

ALERT_ROLES = frozenset({"pm", "lead"})


def _short(alert: RegressionAlert, run_name: str) -> str:
    case_id = alert.evidence.get("case_id")
    if alert.kind in ("golden_check", "golden_factual"):
        # Name what failed: the checks (older alerts carry one "check"), or the human factual grade.
        keys = alert.evidence.get("checks") or ([alert.evidence["check"]] if alert.evidence.get("check") else [])
        what = ", ".join(PROBLEM_LABELS.get(str(k), str(k)) for k in keys) if keys else "factual accuracy (final human grade)"
        return f"golden example {case_id} fails {what} in {run_name}"
    drop = float(alert.evidence.get("drop", 0.0))
    return f"pass rate of {run_name} down {drop * 100:.1f} points from the baseline"


def home_cards(*, session: Session, principal: Principal, spec: EvalSpec) -> list[HomeCard]:
    """Return the open-alerts card (PM, lead) and the suite-progress card (PM, lead)."""
    if not principal.has_role(*ALERT_ROLES):
        return []
    cards: list[HomeCard] = []
    open_alerts = alerts.list_alerts(session=session, open_only=True, limit=3)
    n_open = alerts.count_open_alerts(session=session)
    if n_open:
        shown = "; ".join(_short(a, run.name) for a, run in open_alerts[:2])
        more = f"; and {n_open - 2} more" if n_open > 2 else ""
        cards.append(
            HomeCard(
                title="Regression alerts",
                body=f"{n_open} open: {shown}{more}.",
                href="/regression/alerts",
                action="Review alerts",
                count=n_open,
                tone="alert",
                roles=ALERT_ROLES,
            )
        )
    n_cases = service.count_cases(session=session)
    target = spec.regression.target_cases
    cards.append(
        HomeCard(
            title="Regression suite",
            body=f"{n_cases} of {target} cases; add failing drafts from a run's checks page.",
            href="/regression",
            action="Open the suite",
            count=n_cases,
            tone="ok" if n_cases >= target else "info",
            roles=ALERT_ROLES,
        )
    )
    return cards
