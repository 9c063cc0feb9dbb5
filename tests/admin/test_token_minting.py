"""An admin cannot act as someone else through a token they mint for them (issue 33, item 4)."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient
from sqlmodel import Session, select

from tests.factories import make_user
from tests.gates.test_service import build_run
from webapp.auth import service as auth_service
from webapp.auth.models import ApiToken
from webapp.gates.models import GateSignoff

PM = "pm@example.test"
ADMIN = "root@example.test"


def _bearer(client: TestClient, plain: str) -> TestClient:
    return TestClient(client.app, headers={"Authorization": f"Bearer {plain}"})


def _signoffs(session: Session) -> list[GateSignoff]:
    session.expire_all()
    return list(session.exec(select(GateSignoff)).all())


def test_admin_cannot_mint_a_role_token_for_the_pm_and_its_ingest_token_cannot_sign(
    session: Session, client_as: Callable[..., TestClient]
) -> None:
    run = build_run(session)
    make_user(session, email=PM, roles=["pm"])
    session.commit()
    admin = client_as("admin", email=ADMIN)
    # The PM's role (ticked, or by default: the owner's roles) is refused for a token the admin mints.
    for scopes in (["pm"], []):
        r = admin.post("/admin/tokens", data={"email": PM, "name": "as the pm", "scope": scopes})
        assert r.status_code == 400, r.text
        assert "a token you mint for pm@example.test may carry only ingest or metrics or ci, not the role pm" in r.text
    assert session.exec(select(ApiToken)).all() == []
    # An ingest token for the PM is fine; the page shows who minted it.
    r = admin.post("/admin/tokens", data={"email": PM, "name": "pm tool", "scope": ["ingest"]}, follow_redirects=False)
    assert r.status_code == 303
    plain = admin.get(r.headers["location"]).text.split('id="plain-token">')[1].split("<")[0]
    token = session.exec(select(ApiToken).where(ApiToken.name == "pm tool")).one()
    admin_user = auth_service.get_user_by_email(session=session, email=ADMIN)
    assert admin_user is not None and token.created_by == admin_user.id
    listing = admin.get("/admin/tokens").text
    row = listing.split(f"{token.prefix}…")[1].split("</tr>")[0]
    assert f"<td>{PM}</td>" in row and f"<td>{ADMIN}</td>" in row
    # Signing the gate with it as the PM: 403, nothing stored.
    r = _bearer(admin, plain).post("/gates/pilot/signoff", data={"run": run.name, "decision": "no_go"})
    assert r.status_code == 403
    assert _signoffs(session) == []


def test_a_role_token_someone_else_minted_acts_with_no_role(
    session: Session, client_as: Callable[..., TestClient]
) -> None:
    """A row minted for another user with a role scope (as before the check) gives no role: 403, clear, nothing stored."""
    run = build_run(session)
    pm = make_user(session, email=PM, roles=["pm"])
    admin_user = make_user(session, email=ADMIN, roles=["admin"])
    token, plain = auth_service.create_token(session=session, user=pm, name="old", scopes=["pm"])
    token.created_by = admin_user.id
    session.add(token)
    session.commit()
    api = _bearer(client_as("labeler"), plain)
    r = api.post("/gates/pilot/signoff", data={"run": run.name, "decision": "no_go"})
    assert r.status_code == 403
    assert "minted by someone other than its owner" in r.text
    assert _signoffs(session) == []
    assert api.get(f"/api/v1/gates/pilot?run={run.name}").status_code == 403  # the PM's reading too


def test_the_owners_own_role_token_still_signs(session: Session, client_as: Callable[..., TestClient]) -> None:
    run = build_run(session)
    pm = make_user(session, email=PM, roles=["pm"])
    _, plain = auth_service.create_token(session=session, user=pm, name="mine", scopes=["pm"], created_by=pm.id)
    session.commit()
    r = _bearer(client_as("labeler"), plain).post("/gates/pilot/signoff", data={"run": run.name, "decision": "no_go"})
    assert r.status_code == 200 and "Signed: your no-go" in r.text
    assert [(s.role, s.user_id) for s in _signoffs(session)] == [("pm", pm.id)]
