"""One sign-off per person per gate and run: simultaneous posts, two roles, two ways in (issue 33, item 4)."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from tests.factories import make_user
from tests.gates.test_service import build_run
from webapp.gates.models import GateSignoff

BOTH = "pm-and-ml@example.test"


def post_together(clients: list[TestClient], run_name: str) -> list[Any]:
    """Post the same no-go sign-off from every client at the same moment (one thread each)."""
    barrier = threading.Barrier(len(clients))
    answers: list[Any] = [None] * len(clients)

    def worker(i: int, c: TestClient) -> None:
        barrier.wait()
        answers[i] = c.post("/gates/pilot/signoff", data={"run": run_name, "decision": "no_go", "note": f"post {i}"})

    threads = [threading.Thread(target=worker, args=(i, c)) for i, c in enumerate(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert all(a is not None for a in answers), "a post never answered"
    return [a for a in answers if a is not None]


def stored(session: Session) -> list[GateSignoff]:
    session.expire_all()
    return list(session.exec(select(GateSignoff)).all())


def test_eight_simultaneous_posts_by_one_person_in_two_roles_store_one_signoff(
    session: Session, client_as: Callable[..., TestClient], api_as: Callable[..., TestClient]
) -> None:
    run = build_run(session)
    session.commit()
    # One person holding both required roles: four browser sessions (they sign as PM) and four
    # clients with their own ML-lead token (they would sign as ML lead), all at once.
    clients = [client_as("pm", "ml_lead", email=BOTH) for _ in range(4)]
    clients += [api_as(email=BOTH, scopes=["ml_lead"]) for _ in range(4)]
    answers = post_together(clients, run.name)

    codes = Counter(a.status_code for a in answers)
    assert codes == {200: 1, 409: 7}, codes  # the winner follows its redirect to the page; no 500
    for a in answers:
        if a.status_code == 409:
            assert "you already signed the pilot gate for this run as" in a.text
            assert "each person signs a gate once, in one role" in a.text
    [row] = stored(session)
    assert row.role in ("pm", "ml_lead") and row.decision == "no_go"


def test_session_then_own_token_in_the_other_role_is_a_409(
    session: Session, client_as: Callable[..., TestClient], api_as: Callable[..., TestClient]
) -> None:
    run = build_run(session)
    session.commit()
    browser = client_as("pm", "ml_lead", email=BOTH)
    first = browser.post("/gates/pilot/signoff", data={"run": run.name, "decision": "no_go"})
    assert first.status_code == 200 and "Signed: your no-go" in first.text
    again = api_as(email=BOTH, scopes=["ml_lead"]).post("/gates/pilot/signoff", data={"run": run.name, "decision": "no_go"})
    assert again.status_code == 409
    assert "you already signed the pilot gate for this run as PM" in again.text
    assert [(s.role, s.decision) for s in stored(session)] == [("pm", "no_go")]


def test_the_database_refuses_a_second_row_for_the_same_person(session: Session) -> None:
    run = build_run(session)
    user = make_user(session, email=BOTH, roles=["pm", "ml_lead"])
    assert user.id is not None and run.id is not None

    def row(role: str) -> GateSignoff:
        return GateSignoff(gate="pilot", run_id=run.id, user_id=user.id, role=role, verdict="fail",  # type: ignore[arg-type]
                           decision="no_go", report={})

    session.add(row("pm"))
    session.flush()
    session.add(row("ml_lead"))
    with pytest.raises(IntegrityError):
        session.flush()
