"""The navigation bar: an entry is shown to whoever its target route admits (webapp.web.links decides)."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import FastAPI

from webapp.auth.service import Principal
from webapp.web.links import can_open


@dataclass(frozen=True)
class NavItem:
    label: str
    href: str
    also: tuple[str, ...] = ()  # other paths whose pages belong to this entry (marked current there)


NAV: tuple[NavItem, ...] = (
    NavItem("Home", "/", also=("/cadence",)),  # the review cadence is a card of home, its page part of it
    NavItem("Grading", "/grading"),
    NavItem("Adjudication", "/grading/adjudication"),
    NavItem("Agreement", "/grading/agreement"),
    NavItem("Runs", "/runs", also=("/drafts", "/ppi")),  # a draft's page (/drafts/12) and a run's PPI page are part of its run
    NavItem("Regression", "/regression"),
    NavItem("Evaluator & judge", "/evaluator/runs"),  # prompt-evaluator runs and the judge's runs with their intervals (ML lead)
    NavItem("Datasets", "/datasets"),
    NavItem("KB", "/kb"),
    NavItem("Metrics", "/metrics"),
    NavItem("Hallucinations", "/metrics/hallucinations"),
    NavItem("Weekly review", "/reviews"),
    NavItem("Launch gates", "/gates"),
    NavItem("Survey", "/survey"),
    NavItem("Admin", "/admin"),
)


def nav_for(principal: Principal, app: FastAPI) -> list[NavItem]:
    """Return the navigation entries this principal may open (worked out once per set of roles)."""
    cache: dict[frozenset[str], list[NavItem]] | None = getattr(app.state, "nav_by_roles", None)
    if cache is None:
        cache = {}
        app.state.nav_by_roles = cache
    items = cache.get(principal.roles)
    if items is None:
        items = [item for item in NAV if can_open(app, principal, item.href)]
        cache[principal.roles] = items
    return list(items)


def current_href(items: list[NavItem], path: str) -> str | None:
    """Return the one entry a page belongs to: the longest href (or `also` path) that is the path or a folder above it.

    "/grading/adjudication/4" belongs to Adjudication, not also to Grading; "/" matches only itself
    (every path starts with it), and a page under no entry (e.g. /login) marks none.
    """
    best: tuple[int, str] | None = None
    for item in items:
        for prefix in (item.href, *item.also):
            matches = path == prefix or (prefix != "/" and path.startswith(prefix.rstrip("/") + "/"))
            if matches and (best is None or len(prefix) > best[0]):
                best = (len(prefix), item.href)
    return best[1] if best else None
