"""Which links a viewer may follow, read from the role checks of the app's own GET routes.

Templates call `can_open(href)` (a Jinja global) before drawing a link, and the navigation bar
uses the same answer, so a page never shows a link whose target would answer 403 to its viewer.
The rule lives in one place: the `require_role(...)` dependencies the routes already declare.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from fastapi import FastAPI
from fastapi.routing import APIRoute

from webapp.auth.service import Principal
from webapp.web.deps import RoleCheck


@dataclass(frozen=True)
class LinkRule:
    """A GET route: its path pattern, its template, and the role sets a caller must meet (all of them)."""

    path: str
    regex: re.Pattern[str]
    role_sets: tuple[frozenset[str], ...]


def iter_routes(routes: list[Any]) -> Iterator[Any]:
    """Yield every API route (or FastAPI's effective route context) of an app, nested routers included."""
    for route in routes:
        if hasattr(route, "effective_route_contexts"):
            for ctx in route.effective_route_contexts():
                if isinstance(ctx.original_route, APIRoute):
                    yield ctx
        elif isinstance(route, APIRoute):
            yield route


def role_checks(dependant: Any) -> list[RoleCheck]:
    """Return the RoleCheck dependencies of a route, however deep they sit."""
    found: list[RoleCheck] = []
    for dep in dependant.dependencies:
        if isinstance(dep.call, RoleCheck):
            found.append(dep.call)
        found.extend(role_checks(dep))
    return found


def link_rules(app: FastAPI) -> list[LinkRule]:
    """Return (and cache on the app) the GET routes in matching order with their role sets."""
    cached = getattr(app.state, "link_rules", None)
    if cached is not None:
        return cached
    rules = [
        LinkRule(
            path=route.path,
            regex=route.path_regex,
            role_sets=tuple(check.roles for check in role_checks(route.dependant) if check.roles),
        )
        for route in iter_routes(app.routes)
        if "GET" in route.methods
    ]
    app.state.link_rules = rules
    return rules


# Paths already matched, per app (a page draws the same links again and again); bounded, since
# paths carry ids.
_MATCH_CACHE_SIZE = 4096


def rule_for(app: FastAPI, href: str) -> LinkRule | None:
    """Return the rule of the GET route a link leads to, or None when no route of ours matches."""
    path = urlsplit(href).path
    cache: dict[str, LinkRule | None] | None = getattr(app.state, "link_rule_by_path", None)
    if cache is None:
        cache = {}
        app.state.link_rule_by_path = cache
    if path in cache:
        return cache[path]
    found = next((rule for rule in link_rules(app) if rule.regex.match(path)), None)
    if len(cache) >= _MATCH_CACHE_SIZE:
        cache.clear()
    cache[path] = found
    return found


def can_open(app: FastAPI, principal: Principal | None, href: str) -> bool:
    """Tell whether the viewer may open the link (a link we do not serve is not ours to hide)."""
    rule = rule_for(app, href)
    if rule is None or not rule.role_sets:
        return True
    if principal is None:
        return False
    return all(principal.has_role(*roles) for roles in rule.role_sets)
