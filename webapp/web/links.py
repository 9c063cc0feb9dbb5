"""Which links a viewer may follow, read from the role checks of the app's own GET routes.

Templates call `can_open(href)` (a Jinja global) before drawing a link, and the navigation bar
uses the same answer, so a page never shows a link whose target would answer 403 to its viewer.
The rule lives in one place: the `require_role(...)` dependencies the routes already declare.

The routes are read through FastAPI's public walk, `fastapi.routing.iter_route_contexts`
(FastAPI 0.137.2+: an included router is a lazy node of `app.routes`, and this is the flat view
FastAPI gives integrations): each context's `path` (the prefix applied) and `methods`, and its
`original_route`, the `APIRoute` as the domain declared it, whose `dependant` holds the role
checks. Decision: role checks are read from the route's own dependencies (its parameters and
its router's `dependencies=`), not from `include_router(dependencies=...)`, which FastAPI keeps
in a private include context; no router of ours is included with dependencies (main.py), and
tests/test_route_security.py fails on a route whose own dependencies hold no role check.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute, iter_route_contexts
from starlette.routing import compile_path

from webapp.auth.service import Principal
from webapp.web.deps import RoleCheck


@dataclass(frozen=True)
class LinkRule:
    """A GET route: its path pattern, its template, and the role sets a caller must meet (all of them)."""

    path: str
    regex: re.Pattern[str]
    role_sets: tuple[frozenset[str], ...]


def api_routes(app: FastAPI) -> list[tuple[str, APIRoute]]:
    """Return every API route of the app with its full path (nested routers included), in matching order.

    Walking the routes builds each included router's route contexts: what FastAPI otherwise does
    on the first request that reaches the router (webapp/app/warmup.py calls this before serving).
    """
    found: list[tuple[str, APIRoute]] = []
    for context in iter_route_contexts(app.routes):
        route = context.original_route
        if isinstance(route, APIRoute) and context.path is not None:
            found.append((context.path, route))
    return found


def role_checks(dependant: Dependant) -> list[RoleCheck]:
    """Return the RoleCheck dependencies of a route, however deep they sit."""
    found: list[RoleCheck] = []
    for dep in dependant.dependencies:
        if isinstance(dep.call, RoleCheck):
            found.append(dep.call)
        found.extend(role_checks(dep))
    return found


def link_rules(app: FastAPI) -> list[LinkRule]:
    """Return (and cache on the app) the GET routes in matching order with their role sets."""
    cached: list[LinkRule] | None = getattr(app.state, "link_rules", None)
    if cached is not None:
        return cached
    rules = [
        LinkRule(
            path=path,
            regex=compile_path(path)[0],
            role_sets=tuple(check.roles for check in role_checks(route.dependant) if check.roles),
        )
        for path, route in api_routes(app)
        if "GET" in (route.methods or ())
    ]
    app.state.link_rules = rules
    return rules


def rule_for(app: FastAPI, href: str) -> LinkRule | None:
    """Return the rule of the GET route a link leads to, or None when no route of ours matches."""
    path = urlsplit(href).path
    return next((rule for rule in link_rules(app) if rule.regex.match(path)), None)


def can_open(app: FastAPI, principal: Principal | None, href: str) -> bool:
    """Tell whether the viewer may open the link (a link we do not serve is not ours to hide)."""
    rule = rule_for(app, href)
    if rule is None or not rule.role_sets:
        return True
    if principal is None:
        return False
    return all(principal.has_role(*roles) for roles in rule.role_sets)
