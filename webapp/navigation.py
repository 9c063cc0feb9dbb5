"""The navigation bar: each entry names the roles that see it (the routes check them again)."""

from __future__ import annotations

from dataclasses import dataclass

from webapp.auth.service import Principal


@dataclass(frozen=True)
class NavItem:
    label: str
    href: str
    roles: frozenset[str]


_ALL = frozenset({"labeler", "lead", "pm", "support_lead", "admin"})

NAV: tuple[NavItem, ...] = (
    NavItem("Home", "/", _ALL),
    NavItem("Grading", "/grading", frozenset({"labeler", "lead"})),
    NavItem("Adjudication", "/grading/adjudication", frozenset({"lead"})),
    NavItem("Agreement", "/grading/agreement", frozenset({"lead", "pm"})),
    NavItem("Runs", "/runs", frozenset({"lead", "pm", "admin", "labeler", "support_lead"})),
    NavItem("Regression", "/regression", frozenset({"lead", "pm", "admin"})),
    NavItem("Evaluator", "/evaluator/runs", frozenset({"lead", "pm", "admin"})),
    NavItem("Datasets", "/datasets", frozenset({"lead", "pm", "admin", "labeler"})),
    NavItem("KB", "/kb", _ALL),
    NavItem("Metrics", "/metrics", frozenset({"support_lead", "pm", "lead", "admin"})),
    NavItem("Hallucinations", "/metrics/hallucinations", frozenset({"lead", "support_lead"})),
    NavItem("Weekly review", "/reviews", frozenset({"pm", "support_lead"})),
    NavItem("Launch gates", "/gates", frozenset({"pm", "support_lead", "lead", "admin"})),
    NavItem("Survey", "/survey", frozenset({"support_lead", "pm", "lead", "admin"})),
    NavItem("Admin", "/admin", frozenset({"admin"})),
)


def nav_for(principal: Principal) -> list[NavItem]:
    """Return the navigation entries this principal may open."""
    return [item for item in NAV if principal.has_role(*item.roles)]
