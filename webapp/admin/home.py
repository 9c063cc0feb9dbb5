"""Home cards for admins: what the set-up still lacks."""

from __future__ import annotations

from sqlmodel import Session

from webapp.admin import service
from webapp.auth.service import Principal
from webapp.core.spec import EvalSpec
from webapp.web.cards import HomeCard


def home_cards(*, session: Session, principal: Principal, spec: EvalSpec) -> list[HomeCard]:
    """Tell an admin what to import or set up next."""
    if not principal.has_role("admin"):
        return []
    o = service.overview(session=session)
    cards: list[HomeCard] = []
    if not o.articles:
        cards.append(HomeCard("No KB yet — import one", "Drafts are checked against the current KB revisions; import your KB export first.", "/admin/imports", action="Import KB", tone="todo"))
    if not o.datasets:
        cards.append(HomeCard("No dataset yet", "Import the eval set (the format guide's JSONL or YAML) so runs can be imported over it.", "/admin/imports", action="Import dataset", tone="todo"))
    if o.users <= 1:
        cards.append(HomeCard("Invite your team", "Create users for the labelers, the team lead, the PM and the head of support.", "/admin/users", action="Create users", tone="todo"))
    if not cards:
        cards.append(HomeCard("Admin", f"{o.active_users} active users, {o.tokens} live API tokens, {o.articles} KB articles, {o.datasets} dataset versions.", "/admin", action="Open admin", tone="ok"))
    return cards
