"""The agent feedback survey: one answer per agent per round, the latest counts; net score."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from webapp.survey import service
from webapp.survey.models import SurveyAnswer


class TestService:
    def test_bad_input_names_the_field_and_the_latest_answer_counts(self, session: Session) -> None:
        with pytest.raises(service.SurveyError, match="^round: no survey round is open"):
            service.record_answer(session=session, agent_id="a1", helpful="yes")
        service.open_round(session=session, name="Pilot week 1")
        with pytest.raises(service.SurveyError, match="^helpful: must be one of"):
            service.record_answer(session=session, agent_id="a1", helpful="maybe")
        with pytest.raises(service.SurveyError, match="^agent_id: required"):
            service.record_answer(session=session, agent_id=" ", helpful="yes")
        for agent, helpful in [("a1", "yes"), ("a2", "yes"), ("a3", "no"), ("a4", "neutral"), ("a1", "no")]:
            service.record_answer(session=session, agent_id=agent, helpful=helpful)
        c = service.counts(session=session)
        # a1 changed from yes to no: yes = a2, no = a1 + a3, neutral = a4
        assert (c.yes, c.no, c.neutral, c.net, c.net_positive) == (1, 2, 1, -1, False)
        assert session.exec(select(SurveyAnswer).where(SurveyAnswer.agent_id == "a1")).one().times_answered == 2

    def test_a_new_round_starts_empty_and_earlier_rounds_keep_results(self, session: Session) -> None:
        first = service.open_round(session=session, name="r1")
        for agent, helpful in [("a1", "yes"), ("a2", "no"), ("a3", "yes"), ("a4", "neutral")]:
            service.record_answer(session=session, agent_id=agent, helpful=helpful)
        service.open_round(session=session, name="r2")
        assert first.closed_at is not None
        assert service.counts(session=session).total == 0
        with pytest.raises(service.SurveyError, match="closed"):
            service.record_answer(session=session, agent_id="a1", helpful="yes", round_name="r1")
        service.record_answer(session=session, agent_id="a1", helpful="no")
        results = [(r.name, c.yes, c.no, c.neutral, c.net) for r, c in service.round_results(session=session)]
        assert results == [("r2", 0, 1, 0, -1), ("r1", 2, 1, 1, 1)]

    def test_simultaneous_answers_of_one_agent_leave_one_row(self, engine: Engine, session: Session) -> None:
        service.open_round(session=session, name="r1")
        session.commit()
        barrier = threading.Barrier(4)

        def answer(helpful: str) -> None:
            with Session(engine) as s:
                barrier.wait()
                service.record_answer(session=s, agent_id="same-agent", helpful=helpful)
                s.commit()

        with ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(answer, ("yes", "no", "yes", "neutral")))  # re-raises any thread's error
        session.expire_all()
        assert len(session.exec(select(SurveyAnswer)).all()) == 1


class TestApi:
    def test_agent_token_answers_and_readers_see_counts(self, api_as: Callable[..., TestClient], session: Session) -> None:
        service.open_round(session=session, name="r1")
        session.commit()
        agent = api_as(scopes=["ingest"])
        r = agent.post("/api/v1/survey", json={"agent_id": "agent-7", "helpful": "yes", "comment": "saves me time"})
        assert r.status_code == 200 and r.json()["times_answered"] == 1
        assert agent.post("/api/v1/survey", json={"agent_id": "agent-7", "helpful": "no"}).json()["times_answered"] == 2
        r = agent.post("/api/v1/survey", json={"agent_id": "agent-8", "helpful": "perhaps"})
        assert r.status_code == 422 and r.json()["detail"][0]["field"] == "helpful"
        lead = api_as("support_lead")
        assert lead.get("/api/v1/survey").json() | {} == {
            "round": "r1", "yes": 0, "no": 1, "neutral": 0, "total": 1, "net": -1, "net_positive": False,
        }
        assert agent.get("/api/v1/survey").status_code == 403
        assert api_as("labeler").post("/api/v1/survey", json={"agent_id": "x", "helpful": "yes"}).status_code == 403


class TestPage:
    def test_support_lead_opens_round_records_answer_and_sees_net(self, client_as: Callable[..., TestClient]) -> None:
        c = client_as("support_lead")
        assert "No survey round yet" in c.get("/survey").text
        assert c.post("/survey/rounds", data={"name": "Pilot week 1"}, follow_redirects=False).status_code == 303
        c.post("/survey/answers", data={"agent_id": "agent-<b>1</b>", "helpful": "yes", "comment": "<script>x</script>"})
        page = c.get("/survey").text
        assert "+1" in page and "1 of 8 answers" in page  # one answer is not yet the agents' view
        assert "<script>x</script>" not in page and "&lt;script&gt;" in page
        r = c.post("/survey/answers", data={"agent_id": "a", "helpful": "maybe"})
        assert r.status_code == 422 and "helpful: must be one of" in r.text

    def test_a_new_round_keeps_the_previous_rounds_visible(self, session: Session, client_as: Callable[..., TestClient]) -> None:
        first = service.open_round(session=session, name="Pilot week 1")
        for i, helpful in enumerate(["yes"] * 5 + ["no"] * 3):
            service.record_answer(session=session, agent_id=f"agent-{i}", helpful=helpful, comment=f"said {helpful} in week 1")
        service.open_round(session=session, name="Pilot week 2")
        service.record_answer(session=session, agent_id="agent-0", helpful="yes", comment="week 2 answer")
        session.commit()
        pm = client_as("pm")
        page = pm.get("/survey").text
        # The newest round is shown, and the rounds table still carries week 1's result (5-3, net +2).
        assert "week 2 answer" in page and "said yes in week 1" not in page
        assert f'<a href="/survey?round={first.id}">Pilot week 1</a>' in page
        assert '<td class="num">5</td><td class="num">3</td><td class="num">0</td><td class="num">+2</td>' in page
        assert "1 of 8 answers" in page and "7 more needed" in page
        older = pm.get(f"/survey?round={first.id}").text
        assert "said yes in week 1" in older and "said no in week 1" in older and "week 2 answer" not in older
        assert "an earlier round: the gate reads only the newest" in older
        assert pm.get("/survey?round=99999").status_code == 404
        assert pm.post("/survey/rounds", data={"name": "x"}).status_code == 403  # the pm reads, cannot write
