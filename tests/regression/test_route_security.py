"""Every checks and regression route has a role check, refuses the wrong role, and refuses writes without CSRF.

(The project-wide tests/test_route_security.py walks app.routes; this one walks our own routers
directly, so it holds whatever shape the app's route list takes.)
"""

from __future__ import annotations

import re
from collections.abc import Callable

from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from webapp.auth.models import ROLES
from webapp.checks import pages as checks_pages
from webapp.checks import routes as checks_routes
from webapp.deps import RoleCheck
from webapp.regression import pages as regression_pages
from webapp.regression import routes as regression_routes


def _routes() -> list[tuple[str, str, RoleCheck]]:
    out = []
    for prefix, router in (
        ("", checks_pages.router),
        ("/api/v1", checks_routes.router),
        ("", regression_pages.router),
        ("/api/v1", regression_routes.router),
    ):
        for r in router.routes:
            assert isinstance(r, APIRoute)
            checks = [d.call for d in r.dependant.dependencies if isinstance(d.call, RoleCheck)]
            assert checks, f"{r.path} has no role check"
            for m in sorted(r.methods - {"HEAD"}):
                out.append((m, prefix + r.path, checks[0]))
    return out


def test_every_route_is_checked_and_the_list_is_complete() -> None:
    paths = {(m, p) for m, p, _ in _routes()}
    assert ("POST", "/regression/cases/from-draft/{draft_id}") in paths
    assert ("GET", "/api/v1/runs/compare") in paths
    assert len(paths) >= 20


def test_wrong_role_gets_403_and_anonymous_is_turned_away(client: TestClient, client_as: Callable[..., TestClient]) -> None:
    clients: dict[str, TestClient] = {}
    checked = 0
    for method, path, check in _routes():
        url = re.sub(r"\{[^}]+\}", "1", path)
        anon = client.request(method, url, headers={"X-CSRF-Token": "x"} if method != "GET" else {}, follow_redirects=False)
        assert anon.status_code in ((401, 403) if path.startswith("/api/") else (303, 403)), (method, path, anon.status_code)
        outsiders = [r for r in ROLES if r not in check.roles]
        if not outsiders:
            continue
        role = outsiders[0]
        clients.setdefault(role, client_as(role))
        assert clients[role].request(method, url, follow_redirects=False).status_code == 403, (method, path, role)
        checked += 1
    assert checked >= 10


def test_writes_without_csrf_are_refused(client_as: Callable[..., TestClient]) -> None:
    everyone = client_as(*ROLES)
    everyone.headers.pop("X-CSRF-Token")
    for method, path, _ in _routes():
        if method == "GET":
            continue
        url = re.sub(r"\{[^}]+\}", "1", path)
        r = everyone.request(method, url, follow_redirects=False)
        assert r.status_code == 403 and "CSRF" in r.text, (method, path)
