"""The home page's cards: what is waiting for the signed-in user, gathered from each domain.

A domain contributes cards by defining `home_cards(*, session, principal, spec) -> list[HomeCard]`
in its own `home.py`; this module calls them in a fixed order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlmodel import Session

from webapp.auth.service import Principal
from webapp.core.domains import domain_modules
from webapp.core.spec import EvalSpec

CARD_DOMAINS = ("grading", "checks", "regression", "metrics", "reviews", "gates", "runs", "admin")


@dataclass
class HomeCard:
    """One thing waiting for the user: a title, a sentence, a link, and an optional count."""

    title: str
    body: str
    href: str
    action: str = "Open"
    count: int | None = None
    tone: str = "info"  # info | todo | alert | ok
    roles: frozenset[str] = field(default_factory=frozenset)


def home_cards(*, session: Session, principal: Principal, spec: EvalSpec) -> list[HomeCard]:
    """Collect the cards of every domain for this principal."""
    cards: list[HomeCard] = []
    for module in domain_modules("home", CARD_DOMAINS):
        cards.extend(module.home_cards(session=session, principal=principal, spec=spec))
    return cards
