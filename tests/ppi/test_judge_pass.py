"""The judge pass (webapp.ppi.judge_pass, `prompt-evaluator judge-run`) against the fake OpenAI server on loopback."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session, col, select
from typer.testing import CliRunner, Result

from tests.evaluator.fake_openai import FakeOpenAI
from tests.factories import make_article, make_dataset, make_run, make_user
from webapp.core.timeutil import utcnow
from webapp.datasets.models import EvalCase
from webapp.evaluator.cache import ResponseCache
from webapp.evaluator.client import ChatClient
from webapp.evaluator.rubric import load_rubric
from webapp.grading.models import ReferenceVersion
from webapp.ppi.judge_pass import (
    JudgeOutcome,
    JudgePlan,
    JudgeSetup,
    judge_drafts,
    judge_version,
    plan_judge_pass,
    store_judgements,
)
from webapp.ppi.models import PpiDraw, PpiJudgeScore
from webapp.ppi.service import JudgeScoreIn, PpiError, draw_sample
from webapp.runs.models import Draft, Run

RUBRIC = load_rubric("support-draft")
MODEL = "judge-model-1"
# `fake` (the fake OpenAI server) and `cache_dir` (autouse) come from tests/evaluator via conftest.py.


def build(session: Session, *, bad_case: str | None = None) -> Run:
    """A run of 6 cases: 4 drafts to judge, one escalation, one fallback; KB, conversation and a reference."""
    make_article(session, "KB-1", ((1, "superseded"), (2, "current")), title="Refunds", body="Refunds take 5 days.")
    make_article(session, "KB-2", ((1, "current"),), title="Passwords", body="Reset it from the login page.", intent="login")
    cases: list[dict[str, Any]] = [
        {"case_id": "c1", "input": "Where is my refund?", "kb_articles": ["KB-1"], "conversation": [{"from": "customer", "text": "hi"}]},
        {"case_id": "c2", "input": "I forgot my password", "intent": "login", "reference": "Dataset reference for c2"},
        {"case_id": "c3", "input": "Cancel my plan", "task": "Reply to the customer"},
        {"case_id": "c4", "input": "Charged twice", "reference": "Dataset reference for c4"},
        {"case_id": "c5", "input": "I want to hurt someone"},
        {"case_id": "c6", "input": "Gibberish"},
    ]
    ds = make_dataset(session, cases, name="jp")
    texts = {c: f"Draft for {c}." for c in ("c1", "c2", "c3", "c4")}
    if bad_case:
        texts[bad_case] += " [[judge-notjson]]"
    drafts: list[dict[str, Any]] = [
        {"case_id": "c1", "draft_text": texts["c1"], "citations": [{"article_id": "KB-1", "revision": 1}], "intent": "refund", "confidence": 0.9},
        {"case_id": "c2", "draft_text": texts["c2"], "citations": [{"article_id": "KB-2", "revision": 1}], "intent": "login", "confidence": 0.8},
        {"case_id": "c3", "draft_text": texts["c3"]},
        {"case_id": "c4", "draft_text": texts["c4"]},
        {"case_id": "c5", "draft_text": None, "escalated": True},
        {"case_id": "c6", "draft_text": None, "confidence": 0.2},
    ]
    run = make_run(session, ds, drafts, name="jp-run")
    lead = make_user(session, email="lead@example.com", roles=["lead"])
    pk = {c: i for c, i in session.exec(select(EvalCase.case_id, EvalCase.id).where(EvalCase.dataset_id == ds.id)) if i is not None}
    assert lead.id is not None
    for case, v, text, approved in [
        ("c2", 2, "Approved reference for c2", True), ("c2", 1, "Older approved reference", True),
        ("c2", 3, "Unapproved edit for c2", False), ("c3", 1, "Unapproved reference for c3", False),
    ]:
        approval = {"approved_by": lead.id, "approved_at": utcnow()} if approved else {}
        session.add(ReferenceVersion(case_pk=pk[case], version=v, text=text, author_id=lead.id, **approval))
    session.commit()
    return run


def gradable_ids(session: Session, run: Run) -> list[int]:
    rows = session.exec(
        select(Draft.id).where(Draft.run_id == run.id, col(Draft.draft_text).is_not(None), col(Draft.escalated).is_(False))
    ).all()
    return sorted(d for d in rows if d is not None)


def run_pass(
    session: Session,
    fake: FakeOpenAI,
    plan: JudgePlan,
    *,
    batch: int = 2,
    client: ChatClient | None = None,
    second_client: ChatClient | None = None,
    after_store: Callable[[], None] = lambda: None,
) -> JudgeOutcome:
    """Run a planned pass through the service with the evaluator's client; store batches in the test's session."""
    client = client or ChatClient(base_url=fake.base_url, api_key="k", concurrency=3, backoff_base=0.001)

    def store(scores: list[JudgeScoreIn]) -> None:
        store_judgements(session=session, plan=plan, scores=scores)
        session.commit()
        after_store()

    async def go() -> JudgeOutcome:
        try:
            return await judge_drafts(plan=plan, client=client, store=store, batch=batch, second_client=second_client)
        finally:
            await client.close()
            if second_client is not None:
                await second_client.close()

    return asyncio.run(go())


def stored(session: Session, run: Run) -> dict[int, PpiJudgeScore]:
    session.expire_all()
    return {s.draft_id: s for s in session.exec(select(PpiJudgeScore).where(PpiJudgeScore.run_id == run.id))}


def plan_for(
    session: Session, run_ref: str = "jp-run", model: str = MODEL, *, setup: JudgeSetup | None = None, seed: int | None = None
) -> JudgePlan:
    return plan_judge_pass(session=session, run_ref=run_ref, model=model, rubric=RUBRIC, setup=setup, seed=seed)


class TestPlan:
    def test_gradable_drafts_only_with_the_case_kb_and_approved_reference(self, session: Session) -> None:
        run = build(session)
        plan = plan_for(session)
        assert plan.gradable == 4 and plan.already_scored == 0
        assert [r.draft_id for r in plan.requests] == gradable_ids(session, run)
        by_case = {r.case_id: r.messages for r in plan.requests}
        assert set(by_case) == {"c1", "c2", "c3", "c4"}  # escalation c5 and fallback c6 left out
        system, user1 = by_case["c1"][0]["content"], by_case["c1"][1]["content"]
        assert "citation_relevance (1-5)" in system and "factual_accuracy (0-1)" in system
        assert "INPUT:\nWhere is my refund?" in user1
        assert 'CONVERSATION HISTORY:\n[{"from": "customer", "text": "hi"}]' in user1
        assert "[KB-1 revision 2] Refunds\nRefunds take 5 days." in user1
        assert "CITED REVISIONS THAT ARE NOT CURRENT:\nKB-1 revision 1: superseded" in user1
        assert user1.endswith("OUTPUT:\nIntent: refund\nEscalate: false\nConfidence: 0.9\nCitations: KB-1 r1\nDraft:\nDraft for c1.")
        user2 = by_case["c2"][1]["content"]
        assert "REFERENCE OUTPUT:\nApproved reference for c2" in user2  # the latest approved version, not the later edit
        assert "Older approved" not in user2 and "Dataset reference" not in user2
        assert "[KB-2 revision 1] Passwords" in user2  # by the case's intent
        assert "NOT CURRENT" not in user2
        user3 = by_case["c3"][1]["content"]
        assert user3.startswith("TASK: Reply to the customer")
        assert "REFERENCE" not in user3  # an unapproved reference is not shown
        assert "KB ARTICLES GIVEN TO THE WRITER (current revisions):\n(none)" in user3
        assert "REFERENCE OUTPUT:\nDataset reference for c4" in by_case["c4"][1]["content"]  # no approved one: the dataset's

    def test_unknown_run_empty_run_and_bad_rubric_are_refused_naming_them(self, session: Session) -> None:
        build(session)
        with pytest.raises(PpiError, match="run: no run named or numbered 'nope'"):
            plan_for(session, "nope")
        ds = make_dataset(session, [{"case_id": "e1"}, {"case_id": "e2"}], name="esc")
        make_run(session, ds, [{"case_id": "e1", "escalated": True}, {"case_id": "e2", "draft_text": None}], name="only-escalations")
        with pytest.raises(PpiError, match="run: run 'only-escalations' has no draft to judge"):
            plan_for(session, "only-escalations")
        with pytest.raises(PpiError, match="rubric: 'default' has no metric 'factual_accuracy'"):
            plan_judge_pass(session=session, run_ref="jp-run", model=MODEL, rubric=load_rubric("default"))

    def test_version_names_model_rubric_and_changes_with_them(self, monkeypatch: pytest.MonkeyPatch) -> None:
        v = judge_version(model=MODEL, rubric=RUBRIC)
        assert v.startswith(f"{MODEL} support-draft sha256:") and len(v.split("sha256:")[1]) == 16
        assert judge_version(model=MODEL, rubric=RUBRIC) == v  # frozen: the same inputs, the same version
        assert judge_version(model="other", rubric=RUBRIC) != v
        assert judge_version(model=MODEL, rubric=RUBRIC, seed=3).split()[-1] != v.split()[-1]
        with pytest.raises(PpiError, match="judge_model"):
            judge_version(model=" ", rubric=RUBRIC)
        # ... and with the layout of the message
        monkeypatch.setattr("webapp.ppi.judge_pass.draft_for_judge", lambda draft: f"Reply: {draft.draft_text}")
        assert judge_version(model=MODEL, rubric=RUBRIC) != v


class TestJudgePass:
    def test_scores_are_the_answers_and_can_be_sampled(self, session: Session, fake: FakeOpenAI) -> None:
        run = build(session)
        plan = plan_for(session)
        outcome = run_pass(session, fake, plan)
        assert outcome.failures == [] and len(outcome.scored) == 4
        rows = stored(session, run)
        assert sorted(rows) == gradable_ids(session, run)
        # What the fake server answered, matched to each draft by the request it received.
        answered = {json.dumps(body["messages"]): content for body, content in fake.answered}
        assert len(answered) == 4
        for req in plan.requests:
            row = rows[req.draft_id]
            content = answered[json.dumps(req.messages)]
            data = json.loads(content)
            assert row.factual_accuracy == ("pass" if data["factual_accuracy"] == 1 else "fail")
            criteria = ("citation_relevance", "tone", "completeness")
            assert tuple(getattr(row, c) for c in criteria) == tuple(data[c] for c in criteria)
            assert row.judge_version == plan.version
            (call,) = row.raw_calls
            assert call["response"] == content
            assert call["model"] == MODEL
            assert call["request"]["messages"] == req.messages
            assert call["request"]["temperature"] == 0.0
            assert call["request"]["response_format"]["json_schema"]["name"] == "judge_support_draft"
            assert call["cached"] is False
        # The judged run can be sampled; each draw's judge score is the overall of the stored scores.
        assert run.id is not None
        summary = draw_sample(session=session, run_id=run.id, budget=2, judge_version=plan.version, seed=7)
        assert summary.drafts == 4
        draws = session.exec(select(PpiDraw).where(PpiDraw.run_id == run.id)).all()
        assert sorted(d.draft_id for d in draws) == gradable_ids(session, run)
        for d in draws:
            s = rows[d.draft_id]
            factual = 5.0 if s.factual_accuracy == "pass" else 1.0
            assert d.judge_score == pytest.approx((factual + s.citation_relevance + s.tone + s.completeness) / 4)

    def test_rerun_skips_scored_and_stale_plan_fails(self, session: Session, fake: FakeOpenAI) -> None:
        run = build(session)
        first, stale = plan_for(session), plan_for(session)  # both planned before any score
        run_pass(session, fake, first)
        calls = fake.calls
        again = plan_for(session)
        assert again.requests == [] and again.already_scored == 4
        assert run_pass(session, fake, again).scored == []
        assert fake.calls == calls
        # A concurrent pass's batch already stored by another pass is refused whole.
        with pytest.raises(PpiError, match=r"scores\[0\]\.draft_id: draft \d+ already has a score"):
            run_pass(session, fake, stale, batch=4)
        session.rollback()
        rows = stored(session, run)
        assert len(rows) == 4 and all(len(r.raw_calls) == 1 for r in rows.values())
        # Another judge version scores the same drafts again, beside the first scores.
        other = plan_for(session, model="judge-model-2")
        assert len(other.requests) == 4
        run_pass(session, fake, other)
        session.expire_all()
        assert len(session.exec(select(PpiJudgeScore).where(PpiJudgeScore.run_id == run.id)).all()) == 8

    def test_bad_judge_answer_names_the_draft_and_stores_nothing_for_it(self, session: Session, fake: FakeOpenAI) -> None:
        run = build(session, bad_case="c3")
        plan = plan_for(session)
        bad = next(r.draft_id for r in plan.requests if r.case_id == "c3")
        outcome = run_pass(session, fake, plan)
        (failure,) = outcome.failures
        assert failure.draft_id == bad and failure.case_id == "c3"
        assert "the judge's answer is not JSON" in failure.error
        assert failure.raw == "I think this output is quite good, 4 out of 5."
        rows = stored(session, run)
        assert bad not in rows and len(rows) == 3
        # The rerun asks only for the failed draft, and the partly judged run cannot be sampled.
        assert [r.draft_id for r in plan_for(session).requests] == [bad]
        assert run.id is not None
        with pytest.raises(PpiError, match="1 of 4 drafts have no score"):
            draw_sample(session=session, run_id=run.id, budget=2, judge_version=plan.version, seed=7)

    def test_a_failed_call_names_the_draft(self, session: Session, fake: FakeOpenAI) -> None:
        build(session)
        plan = plan_for(session)
        fake.script = [(400, {})]  # the first call gets a 400 (not retried)
        outcome = run_pass(session, fake, plan)
        (failure,) = outcome.failures
        assert failure.error.startswith("the judge call failed: HTTP 400")
        assert len(outcome.scored) == 3

    def test_transient_errors_are_retried_by_the_evaluator_client(self, session: Session, fake: FakeOpenAI) -> None:
        run = build(session)
        plan = plan_for(session)
        fake.unavailable_first = 2  # two 503s, then normal answers
        client = ChatClient(base_url=fake.base_url, api_key="k", concurrency=2, backoff_base=0.001)
        outcome = run_pass(session, fake, plan, client=client)
        assert outcome.failures == [] and len(stored(session, run)) == 4
        assert client.stats.retries == 2 and fake.by_kind["503"] == 2

    def test_cached_answers_are_reused_and_marked_in_the_raw_call(
        self, session: Session, fake: FakeOpenAI, tmp_path: Path
    ) -> None:
        run = build(session)
        cache = ResponseCache(tmp_path / "judge-cache")
        first_client = ChatClient(base_url=fake.base_url, api_key="k", cache=cache, reuse_cache=True)
        run_pass(session, fake, plan_for(session), client=first_client)
        # A second run with the same drafts over the same cases sends the same requests: answered from the cache.
        copy = Run(name="jp-copy", dataset_id=run.dataset_id, model="m")
        session.add(copy)
        session.flush()
        for d in session.exec(select(Draft).where(Draft.run_id == run.id).order_by(col(Draft.id))).all():
            session.add(Draft(run_id=copy.id, case_pk=d.case_pk, draft_text=d.draft_text, citations=list(d.citations), intent=d.intent, confidence=d.confidence, escalated=d.escalated))  # type: ignore[arg-type]
        session.commit()
        calls = fake.calls
        client = ChatClient(base_url=fake.base_url, api_key="k", cache=cache, reuse_cache=True)
        run_pass(session, fake, plan_for(session, "jp-copy"), client=client)
        assert fake.calls == calls and client.stats.cache_hits == 4
        first, second = stored(session, run), stored(session, copy)
        assert all(r.raw_calls[0]["cached"] for r in second.values())
        assert sorted((r.tone, r.completeness, r.raw_calls[0]["response"]) for r in first.values()) == sorted(
            (r.tone, r.completeness, r.raw_calls[0]["response"]) for r in second.values()
        )


@pytest.fixture
def judge_cli(db_url: str, fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Result]:
    """Run `prompt-evaluator judge-run` in-process against the test database and the fake server."""
    from prompt_evaluator.cli import app

    monkeypatch.setenv("DRAFTDESK_DATABASE_URL", db_url)
    monkeypatch.setenv("DRAFTDESK_MODE", "dev")
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)

    def run(*args: str, base: bool = True) -> Result:
        argv = ["judge-run", *args]
        if base:
            argv += ["--base-url", fake.base_url, "--judge-model", MODEL]
        return CliRunner().invoke(app, argv)

    return run


class TestCommand:
    def test_judges_and_summarises_then_skips_on_rerun(self, session: Session, judge_cli: Callable[..., Result]) -> None:
        run = build(session)
        result = judge_cli("jp-run")
        assert result.exit_code == 0, result.output
        # the defaults: 5 calls at temperature 0.7, log-probs on the first, no second judge
        version = judge_version(model=MODEL, rubric=RUBRIC, setup=JudgeSetup(calls=5, temperature=0.7, logprobs=True))
        assert "4 gradable draft(s), 0 already scored" in result.output
        assert "per draft: 5 calls (5 judge call(s), temperature 0.7); 5.00 calls made per scored draft" in result.output
        assert "judged 4 of 4 draft(s) of run 'jp-run'; 0 failed" in result.output
        assert f"judge version: {version}" in result.output
        rows = stored(session, run)
        assert sorted(rows) == gradable_ids(session, run)
        assert {r.judge_version for r in rows.values()} == {version}
        again = judge_cli("jp-run")
        assert again.exit_code == 0, again.output
        assert "4 already scored" in again.output and "nothing to do" in again.output
        # The version the command printed is the one the sampler takes.
        assert run.id is not None
        summary = draw_sample(session=session, run_id=run.id, budget=2, judge_version=version, seed=11)
        assert summary.drafts == 4

    def test_bad_answer_exits_1_naming_the_draft(self, session: Session, judge_cli: Callable[..., Result]) -> None:
        run = build(session, bad_case="c4")
        result = judge_cli("jp-run")
        assert result.exit_code == 1, result.output
        bad = session.exec(select(Draft.id).where(Draft.run_id == run.id, col(Draft.draft_text).contains("[[judge-notjson]]"))).one()
        assert f"draft {bad} (case c4): none of the 5 judge calls gave a score: call 1: the judge's answer is not JSON" in result.output
        assert "judged 3 of 4" in result.output
        one = judge_cli("jp-run", "--judge-calls", "1")  # the single-call judge: the one call's reason
        assert one.exit_code == 1 and f"draft {bad} (case c4): the judge's answer is not JSON" in one.output
        assert bad not in stored(session, run)

    def test_unknown_run_bad_rubric_and_refused_or_missing_key_exit_2_naming_them(
        self, session: Session, judge_cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        run = build(session)
        result = judge_cli("no-such-run")
        assert result.exit_code == 2 and "run: no run named or numbered 'no-such-run'" in result.output
        result = judge_cli("jp-run", "--rubric", "default")
        assert result.exit_code == 2 and "rubric: 'default' has no metric 'factual_accuracy'" in result.output
        monkeypatch.setenv("OPENAI_API_KEY", "bad-key")
        result = judge_cli("jp-run")
        assert result.exit_code == 2
        assert "the API refused the judge" in result.output and "OPENAI_API_KEY" in result.output
        assert stored(session, run) == {}
        monkeypatch.delenv("OPENAI_API_KEY")
        result = judge_cli("jp-run", base=False)
        assert result.exit_code == 2 and "OPENAI_API_KEY is not set" in result.output
