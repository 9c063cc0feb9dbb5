"""Every route has a role check; the wrong role gets 403; no state change without a CSRF token."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from webapp.app.main import create_app
from webapp.auth.models import ROLES
from webapp.web.deps import RoleCheck

# Public by nature: signing in (with a password, or through the identity provider: its start, a CSRF-checked
# POST, and the callback the provider sends the browser back to, checked by its state), signing out, health.
PUBLIC = {
    ("GET", "/favicon.ico"), ("GET", "/login"), ("POST", "/login"), ("POST", "/logout"), ("GET", "/healthz"), ("GET", "/livez"),
    ("GET", "/static/vendor/{name}"), ("POST", "/login/oidc"), ("GET", "/login/oidc/callback"),
}  # fmt: skip


def _role_checks(dependant) -> list[RoleCheck]:  # type: ignore[no-untyped-def]
    found = []
    for dep in dependant.dependencies:
        if isinstance(dep.call, RoleCheck):
            found.append(dep.call)
        found.extend(_role_checks(dep))
    return found


def _routes(app) -> list[tuple[str, str, APIRoute]]:  # type: ignore[no-untyped-def]
    """Return (method, full path, route) of every API route; FastAPI 0.165 keeps included routers nested."""
    out = []
    for route in app.routes:
        nested = route.effective_route_contexts() if hasattr(route, "effective_route_contexts") else [route]
        for r in nested:
            if isinstance(getattr(r, "original_route", r), APIRoute):
                out += [(method, r.path, r) for method in sorted(r.methods - {"HEAD"})]
    assert len(out) > 50, "the route walk found too few routes; has FastAPI's routing changed?"
    return out


def _concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "1", path)


@pytest.fixture(scope="module")
def all_routes(spec):  # type: ignore[no-untyped-def]
    from webapp.core.config import Settings

    app = create_app(Settings(database_url="sqlite://", mode="dev", secret_key="x" * 32))
    return _routes(app)


def test_every_non_public_route_has_a_role_check(all_routes) -> None:  # type: ignore[no-untyped-def]
    missing = [f"{m} {p}" for m, p, r in all_routes if (m, p) not in PUBLIC and not _role_checks(r.dependant)]
    assert missing == []


def test_anonymous_caller_is_turned_away_everywhere(client: TestClient, all_routes) -> None:  # type: ignore[no-untyped-def]
    for method, path, _ in all_routes:
        if (method, path) in PUBLIC:
            continue
        headers = {"X-CSRF-Token": "irrelevant"} if method != "GET" else {}
        r = client.request(method, _concrete(path), headers=headers, follow_redirects=False)
        if path.startswith("/api/"):
            assert r.status_code in (401, 403), f"{method} {path} -> {r.status_code}"
        else:
            assert r.status_code in (303, 403), f"{method} {path} -> {r.status_code}"


def test_wrong_role_gets_403_everywhere(client_as: Callable[..., TestClient], all_routes) -> None:  # type: ignore[no-untyped-def]
    clients: dict[str, TestClient] = {}
    checked = 0
    for method, path, route in all_routes:
        if (method, path) in PUBLIC:
            continue
        check = _role_checks(route.dependant)[0]
        outsiders = [r for r in ROLES if r not in check.roles]
        if not outsiders:
            continue  # open to every role
        role = outsiders[0]
        if role not in clients:
            clients[role] = client_as(role)
        r = clients[role].request(method, _concrete(path), follow_redirects=False)
        assert r.status_code == 403, f"{method} {path} as {role} -> {r.status_code}"
        checked += 1
    assert checked > 0


def test_state_change_without_csrf_token_is_refused(client_as: Callable[..., TestClient], all_routes) -> None:  # type: ignore[no-untyped-def]
    admin = client_as(*ROLES)
    del admin.headers["X-CSRF-Token"]
    for method, path, _ in all_routes:
        if method != "GET":
            r = admin.request(method, _concrete(path), follow_redirects=False)
            assert r.status_code == 403 and "CSRF" in r.text, f"{method} {path} no CSRF -> {r.status_code}"


# The `ci` scope (issue 40): the team's pipeline pushes runs, drafts and datasets and reads runs,
# checks and gates, syncs the KB, and nothing else.
CI_ROUTES = {
    ("POST", "/api/v1/runs"),
    ("POST", "/api/v1/runs/{run}/drafts"),
    ("POST", "/api/v1/runs/{run}/complete"),
    ("GET", "/api/v1/runs/{run}/checks"),
    ("POST", "/api/v1/runs/{run}/checks"),
    ("POST", "/api/v1/datasets"),
    ("GET", "/api/v1/runs"),
    ("GET", "/api/v1/runs/{run}/drafts"),
    ("GET", "/api/v1/gates/{gate}"),
    ("GET", "/api/v1/ppi/runs/{run}/until-decided"),  # issue 43: the pipeline may wait for the human-grading calls
    ("PUT", "/api/v1/kb/articles/{article_id}"),
    ("DELETE", "/api/v1/kb/articles/{article_id}"),
    ("POST", "/api/v1/kb/sync"),
}
# The KB sync's writes: a ci token or an admin, nobody else (webapp/kb/routes.py).
KB_WRITES = {("PUT", "/api/v1/kb/articles/{article_id}"), ("DELETE", "/api/v1/kb/articles/{article_id}"), ("POST", "/api/v1/kb/sync")}
PIPELINE_WRITES = {("POST", "/api/v1/runs/{run}/drafts"), ("POST", "/api/v1/runs/{run}/complete")}


def _takes_ci(route: APIRoute) -> bool:
    return any(check.scope == "ci" for check in _role_checks(route.dependant))


def test_the_ci_scope_reaches_exactly_the_pipeline(all_routes) -> None:  # type: ignore[no-untyped-def]
    taking = {(m, p) for m, p, r in all_routes if _takes_ci(r)}
    assert taking == CI_ROUTES


def test_a_ci_token_gets_403_everywhere_else(api_as: Callable[..., TestClient], all_routes) -> None:  # type: ignore[no-untyped-def]
    ci = api_as(scopes=["ci"])
    for method, path, route in all_routes:
        if (method, path) in PUBLIC or _takes_ci(route) or not path.startswith("/api/"):
            continue
        r = ci.request(method, _concrete(path), follow_redirects=False)
        assert r.status_code == 403, f"{method} {path} as a ci token -> {r.status_code}"
    for method, path in CI_ROUTES:
        r = ci.request(method, _concrete(path), follow_redirects=False)
        assert r.status_code not in (401, 403), f"{method} {path} as a ci token -> {r.status_code}"


@pytest.mark.parametrize("scopes", [["ingest"], ["metrics"], ["labeler"], ["pm"]])
def test_without_the_scope_403_comes_before_any_lookup(scopes: list[str], api_as: Callable[..., TestClient]) -> None:
    # "nope" names no run: a caller without the scope must not learn that (403, never 404).
    other = api_as("labeler", "pm", scopes=scopes)
    for method, path in sorted(PIPELINE_WRITES):
        r = other.request(method, path.replace("{run}", "nope"), json=[{"case_id": "x"}])
        assert r.status_code == 403, f"{method} {path} with {scopes} -> {r.status_code}"
        assert "nope" not in r.text
    assert other.post("/api/v1/runs", json={"name": "n", "dataset": "nope"}).status_code == 403
    assert other.post("/api/v1/datasets", json={"name": "n", "format": "jsonl", "content": ""}).status_code == 403


def test_the_kb_sync_is_for_a_ci_token_or_an_admin(all_routes, client_as: Callable[..., TestClient], api_as: Callable[..., TestClient]) -> None:  # type: ignore[no-untyped-def]
    checks = {(m, p): _role_checks(r.dependant)[0] for m, p, r in all_routes if (m, p) in KB_WRITES}
    assert {k: (sorted(c.roles), c.scope) for k, c in checks.items()} == {k: (["admin"], "ci") for k in KB_WRITES}
    body = {"title": "T", "body": "B"}
    for role in [r for r in ROLES if r != "admin"]:
        c = client_as(role)
        assert c.put("/api/v1/kb/articles/KB-1", json=body).status_code == 403, role
        assert c.delete("/api/v1/kb/articles/KB-1").status_code == 403, role
        assert c.post("/api/v1/kb/sync", json={"articles": [{"article_id": "KB-1", **body}]}).status_code == 403, role
    for scopes in (["ingest"], ["metrics"], ["ml_lead"]):
        t = api_as("ml_lead", scopes=scopes)
        assert t.put("/api/v1/kb/articles/KB-1", json=body).status_code == 403, scopes
    assert api_as(scopes=["ci"]).put("/api/v1/kb/articles/KB-1", json=body).status_code == 201
    assert client_as("admin").delete("/api/v1/kb/articles/KB-1").status_code == 200
