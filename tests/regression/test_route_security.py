"""Every checks and regression route has a role check, and the project-wide route tests reach each one.

tests/test_route_security.py asks every route of the app for 401/403 without a session, 403 for
the wrong role and 403 without CSRF. This one walks our own routers directly, so a change in the
shape of the app's route list cannot drop our routes from those tests unnoticed.
"""

from __future__ import annotations

from fastapi.routing import APIRoute

from tests.test_route_security import _routes as app_routes
from webapp.app.main import create_app
from webapp.checks import pages as checks_pages
from webapp.checks import routes as checks_routes
from webapp.core.config import Settings
from webapp.regression import pages as regression_pages
from webapp.regression import routes as regression_routes
from webapp.web.deps import RoleCheck


def test_every_route_is_checked_and_walked_by_the_app_wide_tests() -> None:
    ours = set()
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
            ours |= {(m, prefix + r.path) for m in r.methods - {"HEAD"}}
    assert ("POST", "/regression/cases/from-draft/{draft_id}") in ours
    assert ("GET", "/api/v1/runs/compare") in ours and len(ours) >= 20
    app = create_app(Settings(database_url="sqlite://", mode="dev", secret_key="x" * 32))
    walked = {(m, p) for m, p, _ in app_routes(app)}
    assert ours - walked == set()
    # The regression suite is append-only: no route of the app updates or deletes a case.
    assert {m for m, p in walked if "regression/cases" in p} == {"GET", "POST"}
