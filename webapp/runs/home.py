"""Home card: the newest run, for everyone."""

from __future__ import annotations

from urllib.parse import quote

from sqlmodel import Session

from webapp.auth.service import Principal
from webapp.home.cards import HomeCard
from webapp.runs import service
from webapp.spec import EvalSpec


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
    newest = runs[0]
    r = newest.run
    body = (
        f"{r.model or 'unknown model'}, prompt {r.prompt_version or '—'}: {newest.drafts} drafts "
        f"({newest.escalated} escalated, {newest.fallbacks} fallbacks)."
    )
    return [HomeCard(f"Newest run: {r.name}", body, f"/runs/{quote(r.name, safe='')}", action="Open run", count=len(runs))]
