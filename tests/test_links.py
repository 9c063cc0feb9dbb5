"""can_open answers from the routes' own role checks."""

from __future__ import annotations

from fastapi import FastAPI

from webapp.auth.service import Principal
from webapp.links import can_open, rule_for


def _principal(*roles: str) -> Principal:
    return Principal(user_id=1, email="x@example.test", name="X", roles=frozenset(roles))


def test_can_open_follows_the_route_role_check(app: FastAPI) -> None:
    assert can_open(app, _principal("lead"), "/runs/compare?a=demo-run-1")
    assert not can_open(app, _principal("labeler"), "/runs/compare?a=demo-run-1")
    assert can_open(app, _principal("admin"), "/admin")
    assert not can_open(app, _principal("pm"), "/admin")
    assert not can_open(app, None, "/runs")


def test_unknown_paths_and_public_routes_are_not_hidden(app: FastAPI) -> None:
    assert rule_for(app, "/no/such/page") is None
    assert can_open(app, _principal("pm"), "/no/such/page")
    assert can_open(app, None, "/login")
