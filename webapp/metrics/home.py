"""Home cards: alerts firing (support lead, PM), hallucination reports to confirm (lead)."""

from __future__ import annotations

from sqlmodel import Session

from webapp.auth.service import Principal
from webapp.core.spec import EvalSpec
from webapp.metrics import daily
from webapp.metrics import firing as metrics_firing
from webapp.metrics import reports as metrics_reports
from webapp.web.cards import HomeCard


def home_cards(*, session: Session, principal: Principal, spec: EvalSpec) -> list[HomeCard]:
    """Return what is waiting in online metrics for this principal."""
    cards: list[HomeCard] = []
    if principal.has_role("support_lead", "pm"):
        firing = metrics_firing.firing_alerts(session=session, spec=spec)  # the count /metrics shows too
        lag = _lag_note(session)
        if firing.count:
            cards.append(
                HomeCard(
                    title=f"{firing.count} alert{'s' if firing.count != 1 else ''} firing",
                    body=f"Off target beyond the alert threshold: {', '.join(firing.names)}.{lag}",
                    href="/metrics", action="Open metrics", count=firing.count, tone="alert",
                )
            )
        else:
            cards.append(
                HomeCard(title="No alerts firing",
                         body=f"Every online metric is inside its alert threshold, and no week's human-graded quality is below its target.{lag}",
                         href="/metrics", action="Open metrics", count=0, tone="ok")
            )
    if principal.has_role("lead"):
        pending = metrics_reports.pending_report_count(session=session)
        if pending:
            cards.append(
                HomeCard(
                    title=f"{pending} hallucination report{'s' if pending != 1 else ''} to confirm",
                    body="Agents flagged factual errors in drafts; only confirmed ones count.",
                    href="/metrics/hallucinations", action="Review reports", count=pending, tone="todo",
                )
            )
    return cards


def _lag_note(session: Session) -> str:
    """Say which days' figures (and so the alerts on them) lag their events, and since when; empty when none."""
    lagging = daily.lagging_days(session=session)
    if not lagging:
        return ""
    parts = [f"{d.isoformat()} (+{n} events since {t.strftime('%H:%M:%S')} UTC)" for d, (t, n) in sorted(lagging.items())]
    return f" Figures updating: {', '.join(parts)}."
