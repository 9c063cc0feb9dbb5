"""Home card: the newest run, for everyone."""

from __future__ import annotations

from urllib.parse import quote

from sqlmodel import Session

from webapp.auth.service import Principal
from webapp.core.spec import EvalSpec
from webapp.core.timeutil import as_utc
from webapp.runs import service
from webapp.web.cards import HomeCard


def home_cards(*, session: Session, principal: Principal, spec: EvalSpec) -> list[HomeCard]:
    """Point at the newest run, or say how to get one."""
    runs = service.list_runs(session=session)
    if not runs:
        if principal.has_role("admin"):
            return [
                HomeCard(
                    "No runs yet",
                    "Import a run's drafts (or run prompt-evaluator) to start evaluating the assistant.",
                    "/admin/imports",
                    action="Import drafts",
                    tone="todo",
                )
            ]
        return [HomeCard("No runs yet", "When a run of the drafting assistant is imported, it shows up here.", "/runs", action="See runs")]
    # list_runs is newest first (created_at, then id): every source counts, a production week's run too.
    # No count badge: on a card a badge means things waiting, and the number of runs is not that.
    newest = runs[0]
    r = newest.run
    others = f" One of {len(runs)} runs (all on /runs)." if len(runs) > 1 else ""
    body = (
        f"{r.model or 'unknown model'}, prompt {r.prompt_version or '—'}: {newest.drafts} drafts "
        f"({newest.escalated} escalated, {newest.fallbacks} fallbacks), created {as_utc(r.created_at):%Y-%m-%d %H:%M} UTC.{others}"
    )
    return [HomeCard(f"Newest run: {r.name}", body, f"/runs/{quote(r.name, safe='')}", action="Open run")]
