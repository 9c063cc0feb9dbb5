"""The audit log (issue 41, item 5): who created which account, role and token, who signed, graded,
adjudicated, approved and decided, with the credential used; the admins' page, CSV and JSON; and the
gate report naming who stands behind each sign-off."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlmodel import Session, col, select

from tests.conftest import DEFAULT_PASSWORD
from tests.factories import make_user
from tests.gates.test_service import build_run
from tests.grading.conftest import build_world, disagree
from tests.metrics.conftest import ev
from webapp.auth import audit
from webapp.auth import service as auth_service
from webapp.auth.models import ApiToken, AuditEvent, User, WebSession
from webapp.core.spec import EvalSpec
from webapp.grading import adjudication as adjudication_service
from webapp.grading import references
from webapp.grading.models import Adjudication
from webapp.grading.scores import validate_scores
from webapp.metrics import reports as metrics_reports

ADMIN = "root@example.test"
SHADOW = "shadow@example.test"
GOOD = {"factual_accuracy": "pass", "citation_relevance": 4, "tone": 4, "completeness": 4, "rationale": "ok"}


def _rows(session: Session, action: str) -> list[AuditEvent]:
    session.expire_all()
    return list(session.exec(select(AuditEvent).where(AuditEvent.action == action).order_by(col(AuditEvent.id))).all())


def _user(session: Session, email: str) -> User:
    user = auth_service.get_user_by_email(session=session, email=email)
    assert user is not None and user.id is not None
    return user


def _session_of(session: Session, email: str) -> str:
    session.expire_all()
    ws = session.exec(select(WebSession).where(WebSession.user_id == _user(session, email).id)).one()
    return f"session {ws.id}"


def _token_client(client: TestClient, plain: str) -> TestClient:
    return TestClient(client.app, headers={"Authorization": f"Bearer {plain}"})


class TestRecord:
    """Every recorded action appears with the right actor and credential."""

    def test_accounts_roles_and_tokens_made_on_the_admin_pages(
        self, session: Session, client_as: Callable[..., TestClient]
    ) -> None:
        admin = client_as("admin", email=ADMIN)
        r = admin.post("/admin/users", data={"email": "agent@example.test", "password": DEFAULT_PASSWORD, "role": ["labeler"]})
        assert r.status_code in (200, 303), r.text
        root, agent = _user(session, ADMIN), _user(session, "agent@example.test")
        cred = _session_of(session, ADMIN)
        created = [e for e in _rows(session, "user.create") if e.subject_id == agent.id]
        granted = [e for e in _rows(session, "role.grant") if e.subject_id == agent.id]
        assert [(e.actor_id, e.credential) for e in created] == [(root.id, cred)]
        assert [(e.actor_id, e.credential, e.target) for e in granted] == [(root.id, cred, "role labeler")]
        r = admin.post("/admin/tokens", data={"email": "agent@example.test", "name": "tool", "scope": ["ingest"]})
        token = session.exec(select(ApiToken).where(ApiToken.name == "tool")).one()
        minted = _rows(session, "token.create")[-1]
        assert (minted.actor_id, minted.subject_id, minted.credential, minted.target) == (root.id, agent.id, cred, f"token {token.id}")
        assert "dd_" not in minted.detail and token.token_hash not in minted.detail  # never the secret
        admin.post(f"/admin/tokens/{token.id}/revoke")
        revoked = _rows(session, "token.revoke")
        assert [(e.actor_id, e.subject_id, e.credential) for e in revoked] == [(root.id, agent.id, cred)]
        admin.post(f"/admin/users/{agent.id}/active", data={"active": "0"})
        off = _rows(session, "user.deactivate")
        assert [(e.actor_id, e.subject_id, e.credential) for e in off] == [(root.id, agent.id, cred)]

    def test_roles_an_admin_sets_on_the_users_page_and_the_providers_claim(
        self, session: Session, client_as: Callable[..., TestClient]
    ) -> None:
        from webapp.auth.oidc_accounts import sync_claim_roles

        admin = client_as("admin", email=ADMIN)
        person = User(email="waiting@example.test", password_hash="")  # as an OIDC first sign-in leaves it: no role
        session.add(person)
        session.commit()
        assert admin.post(f"/admin/users/{person.id}/roles", data={"role": ["pm", "labeler"]}).status_code in (200, 303)
        assert admin.post(f"/admin/users/{person.id}/roles", data={"role": ["pm"]}).status_code in (200, 303)
        root, cred = _user(session, ADMIN), _session_of(session, ADMIN)
        mine = [(e.action, e.actor_id, e.credential, e.target) for e in _rows(session, "role.grant") + _rows(session, "role.remove")
                if e.subject_id == person.id]
        assert sorted(mine) == sorted([
            ("role.grant", root.id, cred, "role labeler"), ("role.grant", root.id, cred, "role pm"),
            ("role.remove", root.id, cred, "role labeler"),
        ])
        sync_claim_roles(session=session, user_id=person.id or 0, roles=frozenset({"ml_lead"}))
        session.commit()
        claim = [e for e in _rows(session, "role.grant") if e.subject_id == person.id and e.target == "role ml_lead"]
        assert [(e.actor_id, e.detail) for e in claim] == [(None, "from the identity provider's claim")]

    def test_the_command_line_is_named_as_such(self, session: Session) -> None:
        user = make_user(session, email="cli@example.test", roles=["pm"])
        auth_service.create_token(session=session, user=user, name="cli", scopes=["pm"])
        rows = _rows(session, "user.create") + _rows(session, "token.create")
        assert {(e.actor_id, e.credential) for e in rows} == {(None, "command line")}

    def test_a_gate_signed_with_a_token_and_one_signed_in_a_session(
        self, session: Session, client_as: Callable[..., TestClient]
    ) -> None:
        run = build_run(session)
        pm = make_user(session, email="pm@example.test", roles=["pm"])
        row, plain = auth_service.create_token(session=session, user=pm, name="mine", scopes=["pm"], created_by=pm.id)
        session.commit()
        ml = client_as("ml_lead", email="ml@example.test")
        assert _token_client(ml, plain).post("/gates/pilot/signoff", data={"run": run.name, "decision": "no_go"}).status_code == 200
        ml.post("/gates/pilot/signoff", data={"run": run.name, "decision": "no_go"})
        signed = _rows(session, "gate.sign")
        ml_user = _user(session, "ml@example.test")
        assert [(e.actor_id, e.credential, e.target, e.detail) for e in signed] == [
            (pm.id, f"token {row.id}", f"pilot gate, run {run.name}", "no_go as pm"),
            (ml_user.id, _session_of(session, "ml@example.test"), f"pilot gate, run {run.name}", "no_go as ml_lead"),
        ]

    def test_grades_adjudications_approvals_and_hallucination_decisions(
        self, session: Session, spec: EvalSpec, api_as: Callable[..., TestClient]
    ) -> None:
        world = build_world(session)
        alice = api_as("labeler", email="alice@example.test")
        assert alice.post("/api/v1/grades", json={**GOOD, "draft_id": world.drafts[3].id}).status_code == 201
        token = session.exec(select(ApiToken).where(ApiToken.user_id == world.alice.id)).one()
        saved = _rows(session, "grade.save")[-1]
        assert (saved.actor_id, saved.credential, saved.target) == (world.alice.id, f"token {token.id}", f"draft {world.drafts[3].id}")
        disagree(session, spec, world)
        adj = session.exec(select(Adjudication)).first()
        assert adj is not None and adj.id is not None
        adjudication_service.resolve_adjudication(
            session=session, spec=spec, adjudication_id=adj.id, lead_id=world.lead.id or 0,
            scores=validate_scores(spec=spec, data=GOOD), note="A is right",
        )
        decided = _rows(session, "grade.adjudicate")
        assert [(e.actor_id, e.target) for e in decided] == [(world.lead.id, f"draft {adj.draft_id}")]
        ref = references.save_reference(session=session, case_pk=world.drafts[0].case_pk, author_id=world.alice.id or 0, text="Use the sign-in page.")
        references.approve_reference(session=session, reference_id=ref.id or 0, lead_id=world.lead.id or 0)
        approved = _rows(session, "reference.approve")
        assert [(e.actor_id, e.subject_id) for e in approved] == [(world.lead.id, world.alice.id)]

    def test_a_hallucination_decision(self, session: Session, api_as: Callable[..., TestClient]) -> None:
        api_as(scopes=["ingest"]).post("/api/v1/events", json=[ev("2026-11-02", event_id="audit-e1")])
        lead = make_user(session, email="lead@example.test", roles=["lead"])
        report = metrics_reports.report_hallucination(session=session, event_id="audit-e1", note="wrong", reported_by=None)
        metrics_reports.decide_report(session=session, report_id=report.id or 0, decision="confirmed", decided_by=lead.id, note="checked")
        rows = _rows(session, "hallucination.decide")
        assert [(e.actor_id, e.target, e.detail) for e in rows] == [(lead.id, f"report {report.id}", "confirmed")]


def test_rows_are_only_ever_added(session: Session) -> None:
    make_user(session, email="x@example.test", roles=["pm"])
    session.commit()
    row = _rows(session, "user.create")[0]
    row.detail = "rewritten"
    session.add(row)
    with pytest.raises((IntegrityError, DBAPIError)):
        session.commit()
    session.rollback()
    with pytest.raises((IntegrityError, DBAPIError)):
        session.delete(session.get(AuditEvent, row.id))
        session.commit()
    session.rollback()


class TestAdminViews:
    """The page, the CSV and the JSON API: admins only, filtered the same way."""

    def test_non_admins_get_403(self, client_as: Callable[..., TestClient], api_as: Callable[..., TestClient]) -> None:
        for role in ("labeler", "lead", "pm", "support_lead", "ml_lead"):
            c = client_as(role)
            assert c.get("/admin/audit").status_code == 403
            assert c.get("/admin/audit.csv").status_code == 403
            assert api_as(role).get("/api/v1/admin/audit").status_code == 403

    def test_page_csv_and_json_filter_and_page(self, session: Session, client_as: Callable[..., TestClient]) -> None:
        admin = client_as("admin", email=ADMIN)
        for i in range(55):
            admin.post("/admin/users", data={"email": f"=cmd{i}@example.test", "password": DEFAULT_PASSWORD, "role": ["labeler"]})
        page = admin.get("/admin/audit", params={"action": "user.create", "actor": "root@"})
        assert page.status_code == 200 and "55 rows" in page.text and "page 1 of 2" in page.text
        assert admin.get("/admin/audit", params={"action": "user.create", "actor": "root@", "page": 2}).text.count("<tr>") == 1 + 5
        data = admin.get("/api/v1/admin/audit", params={"subject": "cmd54", "action": "role.grant"}).json()
        assert data["total"] == 1 and data["events"][0]["actor_email"] == ADMIN
        assert data["events"][0]["credential"] == _session_of(session, ADMIN)
        text = admin.get("/admin/audit.csv", params={"subject": "cmd7@", "action": "user.create"}).text
        rows = list(csv.DictReader(io.StringIO(text)))
        assert [r["target"] for r in rows] == ["user =cmd7@example.test"]
        assert rows[0]["subject"] == "'=cmd7@example.test"  # a formula-looking cell is neutralised
        assert admin.get("/api/v1/admin/audit", params={"action": "bogus"}).status_code == 422


class TestGateProvenance:
    """The gate report names who created each signer's account and granted its role, and flags one person at both ends."""

    def test_a_shadow_ml_lead_made_by_the_signing_pm_is_flagged(
        self, session: Session, client_as: Callable[..., TestClient]
    ) -> None:
        run = build_run(session)
        boss = client_as("admin", "pm", email=ADMIN)
        boss.post("/admin/users", data={"email": SHADOW, "password": DEFAULT_PASSWORD, "role": ["ml_lead"]})
        shadow = client_as("ml_lead", email=SHADOW)
        boss.post("/gates/pilot/signoff", data={"run": run.name, "decision": "no_go"})
        shadow.post("/gates/pilot/signoff", data={"run": run.name, "decision": "no_go"})
        page = boss.get(f"/gates/pilot?run={run.name}").text
        rows = {who: page.split(f"<td>{who}</td>")[1].split("</tr>")[0] for who in (ADMIN, SHADOW)}
        assert f"{ADMIN} · {ADMIN}" in rows[SHADOW] and "one person holds both ends" in rows[SHADOW]
        assert "command line · command line" in rows[ADMIN] and "both ends" not in rows[ADMIN]

    def test_two_signers_set_up_by_one_admin_are_flagged_as_such(
        self, session: Session, client_as: Callable[..., TestClient]
    ) -> None:
        run = build_run(session)
        admin = client_as("admin", email=ADMIN)
        for email, role in (("p@example.test", "pm"), ("m@example.test", "ml_lead")):
            admin.post("/admin/users", data={"email": email, "password": DEFAULT_PASSWORD, "role": [role]})
            client_as(role, email=email).post("/gates/pilot/signoff", data={"run": run.name, "decision": "no_go"})
        page = admin.get(f"/gates/pilot?run={run.name}")
        assert page.status_code in (200, 403)
        viewer = client_as("pm", email="p@example.test").get(f"/gates/pilot?run={run.name}").text
        assert viewer.count(">one person set up both</span>") == 2 and "holds both ends" not in viewer


def test_a_report_filed_with_a_token_an_admin_minted_names_that_admin(
    session: Session, client_as: Callable[..., TestClient], api_as: Callable[..., TestClient]
) -> None:
    api_as(scopes=["ingest"]).post("/api/v1/events", json=[ev("2026-11-02", event_id="minted-e1")])
    agent = make_user(session, email="agent@example.test", roles=["labeler"])
    session.commit()
    admin = client_as("admin", email=ADMIN)
    r = admin.post("/admin/tokens", data={"email": agent.email, "name": "tool", "scope": ["ingest"]}, follow_redirects=False)
    plain = admin.get(r.headers["location"]).text.split('id="plain-token">')[1].split("<")[0]
    filed = _token_client(admin, plain).post("/api/v1/events/minted-e1/hallucination-reports", json={"note": "wrong"})
    assert filed.status_code == 201 and filed.json()["minted_by"] == _user(session, ADMIN).id
    assert filed.json()["reported_by"] == agent.id
    page = client_as("lead").get("/metrics/hallucinations").text
    assert f"Filed by {agent.email}" in page and f"with a token minted by {ADMIN}" in page


def test_record_names_the_command_line_without_a_request(session: Session) -> None:
    row = audit.record(session=session, action="token.revoke", target="token 1")
    assert (row.actor_id, row.credential) == (None, "command line")
