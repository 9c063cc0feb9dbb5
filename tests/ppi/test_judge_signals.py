"""Several judge signals per draft (issue 35): k calls, a second judge, the log-prob expectation, cost, against the fake server."""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlmodel import Session, select
from typer.testing import Result

from tests.evaluator.fake_openai import FakeOpenAI
from tests.ppi.test_judge_pass import MODEL, RUBRIC, build, judge_cli, plan_for, run_pass, stored  # noqa: F401
from webapp.evaluator.cache import ResponseCache, cache_key
from webapp.evaluator.client import ChatClient, Price, TokenLogprob
from webapp.evaluator.rubric import judge_instructions, judge_response_format
from webapp.ppi.judge_calls import score_from_answer
from webapp.ppi.judge_pass import JudgeSetup, judge_version, layout_fingerprint
from webapp.ppi.judge_signals import CriterionScores, expected_scores, score_distributions
from webapp.ppi.service import JudgeScoreIn, PpiError, record_judge_scores
from webapp.runs.models import Draft

SECOND = "judge-model-2"
FIVE = JudgeSetup.of(calls=5)  # the command's default: 5 calls at 0.7, log-probs on the first
CRITERIA = ("citation_relevance", "tone", "completeness")
# The fake's score-token alternatives (tests/evaluator/fake_openai.py): v 0.6, v - 1 0.25, v + 1 0.15, an
# off-scale neighbour's share going to v. Worked by hand: the expected score for each answered score v.
EXPECTED_1_5 = {1: 0.85 * 1 + 0.15 * 2, 2: 0.25 * 1 + 0.6 * 2 + 0.15 * 3, 3: 2.9, 4: 3.9, 5: 0.25 * 4 + 0.75 * 5}
P_PASS = {0: 0.15, 1: 0.75}  # factual accuracy 0: P(1) = 0.15; answered 1: P(1) = 0.6 + 0.15, P(0) = 0.25


@pytest.fixture
def second_fake() -> Iterator[FakeOpenAI]:
    """Another provider for the second judge."""
    server = FakeOpenAI().start()
    yield server
    server.stop()


class Interrupted(Exception):
    """Stands for Ctrl-C (a real KeyboardInterrupt inside asyncio.run may also reach pytest's own handler)."""


def parsed(content: str) -> CriterionScores:
    return score_from_answer(content, RUBRIC)


class TestSeveralCalls:
    def test_k_calls_each_with_its_own_cache_key_and_the_columns_from_the_first(
        self, session: Session, fake: FakeOpenAI, tmp_path: Path
    ) -> None:
        run = build(session)
        cache = ResponseCache(tmp_path / "cache")
        plan = plan_for(session, setup=FIVE)
        client = ChatClient(base_url=fake.base_url, api_key="k", concurrency=4, cache=cache, reuse_cache=False)
        outcome = run_pass(session, fake, plan, client=client)
        assert outcome.failures == [] and fake.calls == 4 * 5
        rows = stored(session, run)
        keys: set[str] = set()
        for row in rows.values():
            assert row.calls == 5 and [c["index"] for c in row.raw_calls] == [0, 1, 2, 3, 4]
            assert {c["judge"] for c in row.raw_calls} == {"primary"}
            assert all(c["request"]["temperature"] == 0.7 and c["error"] is None for c in row.raw_calls)
            # each call is its own request: its sample_index makes its own cache key, and the answer is cached
            for c in row.raw_calls:
                req = c["request"]
                key = cache_key(model=MODEL, messages=req["messages"], temperature=0.7, seed=None, sample_index=c["index"],
                                response_format=req["response_format"])  # fmt: skip
                assert key in cache
                keys.add(key)
            answers = [parsed(c["response"]) for c in row.raw_calls]
            assert row.signals is not None and row.signals["calls"] == answers
            assert (row.factual_accuracy, row.citation_relevance, row.tone, row.completeness) == tuple(answers[0].values())
            assert len({c["response"] for c in row.raw_calls}) > 1  # sampled: the calls differ
            assert row.signals["second"] is None
        assert len(keys) == 4 * 5

    def test_a_malformed_third_answer_is_that_calls_error_and_the_scores_come_from_the_others(
        self, session: Session, fake: FakeOpenAI
    ) -> None:
        run = build(session)
        # the seed is 100: call i sends 100 + i, and the fake answers the call with seed 102 (the third) with prose
        draft = session.exec(select(Draft).where(Draft.run_id == run.id, Draft.draft_text == "Draft for c3.")).one()
        draft.draft_text = "Draft for c3. [[judge-notjson-seed=102]]"
        session.add(draft)
        session.commit()
        plan = plan_for(session, setup=FIVE, seed=100)
        outcome = run_pass(session, fake, plan)
        assert outcome.failures == []
        row = stored(session, run)[draft.id]  # type: ignore[index]
        assert [c["request"]["seed"] for c in row.raw_calls] == [100, 101, 102, 103, 104]
        bad = row.raw_calls[2]
        assert bad["response"] == "I think this output is quite good, 4 out of 5."
        assert bad["error"] is not None and "the judge's answer is not JSON" in bad["error"]
        assert "score_probabilities" not in bad
        assert row.calls == 5
        good = [parsed(c["response"]) for i, c in enumerate(row.raw_calls) if i != 2]
        assert row.signals is not None and row.signals["calls"] == good and len(good) == 4
        assert row.tone == good[0]["tone"]

    def test_no_call_parsing_fails_the_draft_and_stores_nothing(self, session: Session, fake: FakeOpenAI) -> None:
        run = build(session, bad_case="c3")
        plan = plan_for(session, setup=FIVE)
        outcome = run_pass(session, fake, plan)
        (failure,) = outcome.failures
        assert failure.case_id == "c3" and failure.error.startswith("none of the 5 judge calls gave a score: call 1: ")
        assert failure.error.count("the judge's answer is not JSON") == 5
        assert failure.draft_id not in stored(session, run) and len(stored(session, run)) == 3

    def test_resume_after_an_interruption_calls_only_for_the_drafts_not_stored(self, session: Session, fake: FakeOpenAI) -> None:
        run = build(session)
        plan = plan_for(session, setup=FIVE)
        stores = {"n": 0}

        def stop_after_first_batch() -> None:
            stores["n"] += 1
            raise Interrupted  # as Ctrl-C does: judge_drafts keeps what was stored and stops the rest

        with pytest.raises(Interrupted):
            run_pass(session, fake, plan, batch=1, after_store=stop_after_first_batch)
        kept = stored(session, run)
        assert 1 <= len(kept) < 4
        again = plan_for(session, setup=FIVE)
        assert sorted(r.draft_id for r in again.requests) == sorted(set(stored_ids := [r.draft_id for r in plan.requests]) - set(kept))
        assert len(stored_ids) == 4
        before = fake.calls
        asked = len(fake.requests)
        run_pass(session, fake, again)
        assert fake.calls - before == 5 * len(again.requests)
        kept_messages = {json.dumps(c["request"]["messages"]) for r in kept.values() for c in r.raw_calls}
        assert all(json.dumps(body["messages"]) not in kept_messages for body in fake.requests[asked:])
        assert len(stored(session, run)) == 4


class TestSecondJudgeAndCost:
    def test_second_judge_on_its_own_endpoint_and_the_cost_per_draft(
        self, session: Session, fake: FakeOpenAI, second_fake: FakeOpenAI
    ) -> None:
        run = build(session)
        setup = JudgeSetup.of(calls=5, second_model=SECOND)
        plan = plan_for(session, setup=setup)
        prices = {MODEL: Price(1.0, 2.0), SECOND: Price(3.0, 5.0)}
        client = ChatClient(base_url=fake.base_url, api_key="k", concurrency=3, prices=prices)
        second = ChatClient(base_url=second_fake.base_url, api_key="k2", concurrency=1, prices=prices)
        run_pass(session, fake, plan, client=client, second_client=second)
        assert fake.calls == 4 * 5 and second_fake.calls == 4  # the second judge's calls went to its own provider
        for row in stored(session, run).values():
            assert row.calls == 6
            *primary, other = row.raw_calls
            assert other["judge"] == "second" and other["model"] == SECOND and other["request"]["temperature"] == 0.0
            assert "logprobs" not in other["request"]
            assert row.signals is not None and row.signals["second"] == parsed(other["response"])
            # by hand: tokens x USD per million, each call at its model's price
            by_hand = sum(c["prompt_tokens"] * 1.0 + c["completion_tokens"] * 2.0 for c in primary) / 1e6
            by_hand += (other["prompt_tokens"] * 3.0 + other["completion_tokens"] * 5.0) / 1e6
            assert row.cost_usd is not None and row.cost_usd == pytest.approx(by_hand, rel=1e-12) and row.cost_usd > 0
            assert all(c["prompt_tokens"] > 0 for c in row.raw_calls)

    def test_cost_is_none_when_a_model_has_no_price_and_a_failed_second_call_leaves_second_empty(
        self, session: Session, fake: FakeOpenAI
    ) -> None:
        run = build(session)
        plan = plan_for(session, setup=JudgeSetup.of(calls=2, second_model=SECOND))
        fake.script = [(400, {})]  # one call of the 12 fails for good (which one depends on the order they are sent)
        client = ChatClient(base_url=fake.base_url, api_key="k", concurrency=1, prices={MODEL: Price(1.0, 2.0)})
        outcome = run_pass(session, fake, plan, client=client)
        assert outcome.failures == []
        rows = stored(session, run)
        assert all(r.cost_usd is None and r.calls == 3 for r in rows.values())
        failed = [(r, c) for r in rows.values() for c in r.raw_calls if c["error"]]
        assert len(failed) == 1
        row, call = failed[0]
        assert call["error"].startswith("the judge call failed: HTTP 400") and call["response"] is None
        assert row.signals is not None
        if call["judge"] == "second":
            assert row.signals["second"] is None
        else:
            assert len(row.signals["calls"]) == 1


class TestLogprobs:
    def test_expected_scores_from_the_fakes_log_probs_worked_by_hand(self, session: Session, fake: FakeOpenAI) -> None:
        run = build(session)
        run_pass(session, fake, plan_for(session, setup=FIVE))
        for row in stored(session, run).values():
            first = row.raw_calls[0]
            assert first["request"]["logprobs"] is True and first["request"]["top_logprobs"] == 5
            assert all("logprobs" not in c["request"] for c in row.raw_calls[1:])  # asked on the first call only
            answer = json.loads(first["response"])
            assert row.signals is not None and row.signals["expected"] is not None
            expected = row.signals["expected"]
            assert expected["factual_accuracy"] == pytest.approx(P_PASS[answer["factual_accuracy"]], abs=1e-12)
            for c in CRITERIA:
                assert expected[c] == pytest.approx(EXPECTED_1_5[answer[c]], abs=1e-12)

    def test_no_log_probs_from_the_endpoint_leaves_expected_empty(self, session: Session, fake: FakeOpenAI) -> None:
        run = build(session)
        fake.logprobs_enabled = False
        run_pass(session, fake, plan_for(session, setup=FIVE))
        assert all(r.signals is not None and r.signals["expected"] is None for r in stored(session, run).values())

    def test_score_tokens_found_in_a_json_answer(self) -> None:
        content = '{"factual_accuracy": 0, "citation_relevance": 3, "tone": 5, "completeness": 2}'
        tokens: list[TokenLogprob] = []
        alternatives = {
            "0": (("0", 0.7), ("1", 0.2), ('"', 0.1)),
            "3": (("3", 0.4), (" 4", 0.2), ("4", 0.2), ("x", 0.2)),  # " 4" and "4" both count for 4
            "5": (("5", 0.5), ("4", 0.3), ("6", 0.1)),  # 6 is off the 1-5 scale
            "2": (("2", 0.9),),
        }
        for piece in ['{"', "factual_accuracy", '":', " ", "0", ', "', "citation_relevance", '":', " ", "3", ', "', "tone",
                      '":', " ", "5", ', "', "completeness", '":', " ", "2", "}"]:  # fmt: skip
            top = alternatives.get(piece, ((piece, 1.0),))
            tokens.append(TokenLogprob(piece, math.log(top[0][1]), tuple((t, math.log(p)) for t, p in top)))
        found = score_distributions(tokens, content)
        assert found is not None
        assert found["factual_accuracy"] == pytest.approx({0: 0.7 / 0.9, 1: 0.2 / 0.9})
        assert found["citation_relevance"] == pytest.approx({3: 0.4 / 0.8, 4: 0.4 / 0.8})
        assert found["tone"] == pytest.approx({4: 0.3 / 0.8, 5: 0.5 / 0.8})
        assert found["completeness"] == pytest.approx({2: 1.0})
        exp = expected_scores(found)
        assert exp == pytest.approx({"factual_accuracy": 0.2 / 0.9, "citation_relevance": 3.5, "tone": 4.625, "completeness": 2.0})
        # tokens that are not this answer's, or a score token holding more than the number: no expectation
        assert score_distributions(tokens[:-1], content) is None
        merged = [*tokens[:13], TokenLogprob('": 5', -0.1, ()), *tokens[15:]]
        assert score_distributions(merged, content) is None
        # a token carrying the space before the digit (" 5") is the score token too
        spaced = [*tokens[:13], TokenLogprob(" 5", math.log(0.5), ((" 5", math.log(0.5)), (" 4", math.log(0.5)))), *tokens[15:]]
        found = score_distributions(spaced, content)
        assert found is not None and found["tone"] == pytest.approx({4: 0.5, 5: 0.5})

    def test_a_cached_answer_without_log_probs_is_asked_again_when_they_are_wanted(
        self, session: Session, fake: FakeOpenAI, tmp_path: Path
    ) -> None:
        run = build(session)
        cache = ResponseCache(tmp_path / "cache")
        run_pass(session, fake, plan_for(session), client=ChatClient(base_url=fake.base_url, api_key="k", cache=cache))
        assert fake.calls == 4  # one call per draft, no log-probs: 4 answers cached
        with_logprobs = JudgeSetup.of(calls=1, logprobs=True)  # the same requests (same cache keys), log-probs asked
        client = ChatClient(base_url=fake.base_url, api_key="k", cache=cache)
        plan = plan_for(session, setup=with_logprobs)
        run_pass(session, fake, plan, client=client)
        assert fake.calls == 8 and client.stats.cache_hits == 0  # cached without log-probs: asked again
        rows = [r for r in stored(session, run).values() if r.judge_version == plan.version]
        assert len(rows) == 4 and all(r.signals is not None and r.signals["expected"] is not None for r in rows)

    def test_the_cache_gives_log_probs_back_and_remembers_an_endpoint_without_them(self, fake: FakeOpenAI, tmp_path: Path) -> None:
        cache = ResponseCache(tmp_path / "cache")
        fmt = judge_response_format(RUBRIC)
        messages = [{"role": "user", "content": "judge this"}]

        async def ask(model: str) -> tuple[bool, bool]:
            client = ChatClient(base_url=fake.base_url, api_key="k", cache=cache)
            try:
                answer = await client.complete(model=model, messages=messages, temperature=0.0, seed=None, sample_index=0,
                                               response_format=fmt, top_logprobs=5)  # fmt: skip
            finally:
                await client.close()
            return answer.cached, answer.logprobs is not None

        assert asyncio.run(ask("m1")) == (False, True)
        assert asyncio.run(ask("m1")) == (True, True)  # read back with its log-probs
        fake.logprobs_enabled = False
        assert asyncio.run(ask("m2")) == (False, False)
        calls = fake.calls
        assert asyncio.run(ask("m2")) == (True, False)  # the endpoint gave none: the cached answer is used
        assert fake.calls == calls


class TestVersionAndSingleCall:
    def test_the_version_changes_with_the_calls_temperature_second_judge_and_log_probs(self) -> None:
        one = judge_version(model=MODEL, rubric=RUBRIC)
        # the single-call judge's version is the one made before issue 35: the same hash of the same inputs
        frozen = {"layout": layout_fingerprint(), "instructions": judge_instructions(RUBRIC),
                  "response_format": judge_response_format(RUBRIC), "temperature": 0.0, "seed": None}  # fmt: skip
        assert one == f"{MODEL} support-draft sha256:{hashlib.sha256(json.dumps(frozen, sort_keys=True).encode()).hexdigest()[:16]}"
        assert judge_version(model=MODEL, rubric=RUBRIC, setup=JudgeSetup.of(calls=1)) == one
        versions = {
            one,
            judge_version(model=MODEL, rubric=RUBRIC, setup=FIVE),
            judge_version(model=MODEL, rubric=RUBRIC, setup=JudgeSetup.of(calls=4)),
            judge_version(model=MODEL, rubric=RUBRIC, setup=JudgeSetup.of(calls=5, temperature=1.0)),
            judge_version(model=MODEL, rubric=RUBRIC, setup=JudgeSetup.of(calls=5, logprobs=False)),
            judge_version(model=MODEL, rubric=RUBRIC, setup=JudgeSetup.of(calls=5, second_model=SECOND)),
            judge_version(model=MODEL, rubric=RUBRIC, setup=JudgeSetup.of(calls=5, second_model="judge-model-3")),
            judge_version(model=MODEL, rubric=RUBRIC, setup=JudgeSetup.of(calls=1, logprobs=True)),
        }
        assert len(versions) == 8

    def test_setup_defaults_and_bad_setups_name_the_field(self) -> None:
        assert JudgeSetup(calls=5, temperature=0.7, second_model=None, logprobs=True) == FIVE
        assert JudgeSetup.of(calls=1) == JudgeSetup() and JudgeSetup().temperature == 0.0 and not JudgeSetup().logprobs
        assert JudgeSetup.of(calls=5, second_model=SECOND).calls_per_draft() == 6
        with pytest.raises(PpiError, match="judge_calls: between 1 and 20, got 0"):
            JudgeSetup.of(calls=0)
        with pytest.raises(PpiError, match="judge_temperature: 5 calls at temperature 0 would repeat one answer"):
            JudgeSetup.of(calls=5, temperature=0)
        with pytest.raises(PpiError, match="judge_temperature: between 0 and 2"):
            JudgeSetup.of(calls=5, temperature=2.5)
        with pytest.raises(PpiError, match="second_judge_model: give another model than the judge model"):
            judge_version(model=MODEL, rubric=RUBRIC, setup=JudgeSetup.of(calls=5, second_model=MODEL))

    def test_one_call_stores_todays_row(self, session: Session, fake: FakeOpenAI) -> None:
        run = build(session)
        plan = plan_for(session, setup=JudgeSetup.of(calls=1))
        assert plan.version == judge_version(model=MODEL, rubric=RUBRIC)
        run_pass(session, fake, plan)
        answered = {json.dumps(body["messages"]): (body, content) for body, content in fake.answered}
        for req in plan.requests:
            row = stored(session, run)[req.draft_id]
            body, content = answered[json.dumps(req.messages)]
            assert set(body) == {"model", "messages", "temperature", "response_format"}  # as sent before: no seed, no log-probs
            (call,) = row.raw_calls
            today = {"model": MODEL, "request": {"model": MODEL, "messages": req.messages, "temperature": 0.0, "seed": None,
                                                 "response_format": judge_response_format(RUBRIC)},
                     "response": content, "cached": False}  # fmt: skip
            assert {k: call[k] for k in today} == today
            scores = parsed(content)
            assert (row.factual_accuracy, row.citation_relevance, row.tone, row.completeness) == tuple(scores.values())
            assert row.signals == {"calls": [scores], "second": None, "expected": None}
            assert row.calls == 1 and row.cost_usd is None  # the test client has no prices


class TestStorage:
    def test_signals_off_their_scales_are_refused_naming_the_field(self, session: Session) -> None:
        run = build(session)
        plan = plan_for(session)
        draft_id = plan.requests[0].draft_id
        good = CriterionScores(factual_accuracy="pass", citation_relevance=4.0, tone=4.0, completeness=4.0)
        cases = [
            ({"calls": [good, {**good, "tone": 6.0}], "second": None, "expected": None}, 1, None, r"signals\.calls\[1\]\.tone: 6\.0"),
            ({"calls": [good], "second": {**good, "factual_accuracy": "ok"}, "expected": None}, 1, None, r"signals\.second\.factual_accuracy"),
            ({"calls": [good], "second": None, "expected": {**good, "factual_accuracy": 1.2}}, 1, None, r"signals\.expected\.factual_accuracy"),
            ({"calls": [], "second": None, "expected": None}, 1, None, r"signals\.calls: at least one"),
            (None, 0, None, r"scores\[0\]\.calls: at least 1"),
            (None, 1, -0.5, r"scores\[0\]\.cost_usd"),
        ]
        assert run.id is not None
        for signals, calls, cost, message in cases:
            score = JudgeScoreIn(draft_id, "pass", 4.0, 4.0, 4.0, signals=signals, calls=calls, cost_usd=cost)
            with pytest.raises(PpiError, match=message):
                record_judge_scores(session=session, run_id=run.id, judge_version="v", scores=[score])


class TestCommand:
    def test_second_judge_flags_and_bad_flags_name_them(self, session: Session, judge_cli: Callable[..., Result]) -> None:  # noqa: F811
        run = build(session)
        result = judge_cli("jp-run", "--judge-calls", "3", "--second-judge-model", SECOND)
        assert result.exit_code == 0, result.output
        assert f"per draft: 4 calls (3 judge call(s) + 1 second judge ({SECOND}), temperature 0.7); 4.00 calls made per scored draft" in result.output
        assert "cost per draft unknown" in result.output
        assert all(r.calls == 4 for r in stored(session, run).values())
        for args, message in [
            (("--judge-calls", "0"), "--judge-calls: between 1 and 20, got 0"),
            (("--judge-temperature", "0"), "--judge-temperature: 5 calls at temperature 0 would repeat one answer"),
            (("--second-judge-model", MODEL), "--second-judge-model: give another model than the judge model"),
            (("--second-judge-base-url", "http://127.0.0.1:9/v1"), "--second-judge-base-url: give --second-judge-model too"),
        ]:
            bad = judge_cli("jp-run", *args)
            assert bad.exit_code == 2 and message in bad.output, bad.output
