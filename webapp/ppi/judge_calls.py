"""One draft's judge calls (issue 35): the primary judge's k calls, the second judge's one, the log-prob expectation.

Decisions (docs/ppi.md, "The judge pass"):

- **Calls.** The primary judge is called `calls` times per draft, each a separate request through
  the evaluator's `ChatClient` (its concurrency limit, retries and cache) with its own
  `sample_index` (0..k-1, so each call has its own cache key) and, when a seed is given, the seed
  `seed + index` (one seed for all would make k copies of one answer at any temperature). With
  one call (the judge before issue 35) the request is exactly the one it always was.
- **Second judge.** Another model with the same rubric and message, called once at temperature 0
  (one call has no spread to show: its most likely answer is the useful one), seed as given.
- **Log-probs.** Asked (`logprobs`, `top_logprobs` = 5) on the primary judge's first call only:
  one expectation per draft is the signal; asking on every call adds nothing the calls' mean
  does not. Absent from the answer: `expected` is None (webapp/ppi/judge_signals.py says how the
  score tokens are found).
- **What is stored.** Every call, failed ones included, in `raw_calls` (judge, index, model,
  request, answer or None, error or None, cached, tokens, cost). An answer that does not parse is
  that call's error, never a score. A draft is scored when at least one primary call parsed: the
  four columns are the first parsed call; otherwise the draft is a failure, as before, and nothing
  is stored for it (a rerun asks again). A second judge whose call fails leaves `second` None.
- **Cost.** `calls` = calls made (failed ones too); `cost_usd` = the sum of each call's cost at
  the client's prices for its model, cached answers included (the judge's cost per draft, what a
  fresh pass pays; the command's summary says what this invocation spent). A failed request is
  billed nothing (0). None when a model of the setup has no price.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from webapp.evaluator.client import Answer, ChatClient, LlmCallError, LlmConfigError
from webapp.evaluator.judge_validation import parse_judge
from webapp.evaluator.preparation import JUDGE_TEMPERATURE
from webapp.evaluator.rubric import Rubric, judge_response_format
from webapp.ppi.judge_signals import (
    CriterionScores,
    JudgeSignals,
    RawCall,
    expected_scores,
    score_distributions,
)
from webapp.ppi.service import JudgeScoreIn, PpiError

MAX_MODEL_LENGTH = 150  # the version column holds 200 characters
MAX_CALLS = 20  # primary judge calls per draft at most
SAMPLING_TEMPERATURE = 0.7  # the primary judge's temperature when it is called several times per draft
SECOND_JUDGE_TEMPERATURE = JUDGE_TEMPERATURE  # one call: its most likely answer
TOP_LOGPROBS = 5  # alternatives asked per token: every score of a 1-5 scale fits


@dataclass(frozen=True)
class JudgeSetup:
    """How each draft is judged: the primary judge's calls and temperature, the second judge, log-probs.

    `JudgeSetup()` is the single-call judge made before issue 35 (one call at temperature 0, no
    second judge, no log-probs): its judge version is the one it always had.
    """

    calls: int = 1
    temperature: float = JUDGE_TEMPERATURE
    second_model: str | None = None
    logprobs: bool = False

    @classmethod
    def of(
        cls,
        *,
        calls: int = 1,
        temperature: float | None = None,
        second_model: str | None = None,
        logprobs: bool | None = None,
    ) -> JudgeSetup:
        """Return a setup with the defaults filled in: temperature 0.7 and log-probs on when calls > 1, else 0 and off."""
        if not 1 <= calls <= MAX_CALLS:
            raise PpiError(f"judge_calls: between 1 and {MAX_CALLS}, got {calls}")
        several = calls > 1
        temperature = (
            (SAMPLING_TEMPERATURE if several else JUDGE_TEMPERATURE) if temperature is None else temperature
        )
        if not 0.0 <= temperature <= 2.0:
            raise PpiError(f"judge_temperature: between 0 and 2, got {temperature:g}")
        if several and temperature == 0.0:
            raise PpiError(
                f"judge_temperature: {calls} calls at temperature 0 would repeat one answer; give a temperature above 0"
            )
        second = (second_model or "").strip() or None
        if second is not None and len(second) > MAX_MODEL_LENGTH:
            raise PpiError(f"second_judge_model: at most {MAX_MODEL_LENGTH} characters")
        return cls(
            calls=calls,
            temperature=temperature,
            second_model=second,
            logprobs=several if logprobs is None else logprobs,
        )

    def calls_per_draft(self) -> int:
        """Return the calls each draft costs: the primary judge's calls and the second judge's one."""
        return self.calls + (1 if self.second_model else 0)

    def frozen(self) -> dict[str, object]:
        """Return what of the setup goes into the judge version's hash (nothing new for the single-call judge)."""
        out: dict[str, object] = {"temperature": self.temperature}
        if self.calls != 1:
            out["calls"] = self.calls
        if self.second_model:
            out["second_judge"] = {"model": self.second_model, "temperature": SECOND_JUDGE_TEMPERATURE}
        if self.logprobs:
            out["top_logprobs"] = TOP_LOGPROBS
        return out


@dataclass(frozen=True)
class JudgeFailure:
    """A draft the judge pass could not score, and why (its raw answer when there was one)."""

    draft_id: int
    case_id: str
    error: str
    raw: str | None = None


def score_from_answer(content: str, rubric: Rubric) -> CriterionScores:
    """Parse the judge's answer into the four stored criteria; raise ValueError saying what does not fit."""
    data = parse_judge(content, rubric)
    return CriterionScores(
        factual_accuracy="pass" if data["factual_accuracy"] == 1 else "fail",
        citation_relevance=float(data["citation_relevance"]),
        tone=float(data["tone"]),
        completeness=float(data["completeness"]),
    )


@dataclass(frozen=True)
class JudgeTarget:
    """What one draft's calls need: the draft, its messages, the judge models, rubric, seed and setup."""

    draft_id: int
    case_id: str
    messages: list[dict[str, str]]
    model: str
    rubric: Rubric
    seed: int | None
    setup: JudgeSetup


@dataclass(frozen=True)
class _Call:
    """One call's outcome: its stored record, and its parsed scores when the answer fit the rubric."""

    record: RawCall
    scores: CriterionScores | None
    cost: float | None


async def judge_one_draft(
    target: JudgeTarget, *, client: ChatClient, second_client: ChatClient
) -> JudgeScoreIn | JudgeFailure:
    """Make one draft's calls concurrently and return what is stored for it, or why it could not be scored."""
    setup = target.setup
    seeds = [None if target.seed is None else target.seed + i for i in range(setup.calls)]
    primary = [
        _call(target, client, judge="primary", index=i, model=target.model, temperature=setup.temperature, seed=seeds[i],
              top_logprobs=TOP_LOGPROBS if setup.logprobs and i == 0 else None)
        for i in range(setup.calls)
    ]  # fmt: skip
    second = (
        [_call(target, second_client, judge="second", index=0, model=setup.second_model, temperature=SECOND_JUDGE_TEMPERATURE,
               seed=target.seed, top_logprobs=None)]
        if setup.second_model else []
    )  # fmt: skip
    done = await asyncio.gather(*primary, *second)
    calls, extra = list(done[: setup.calls]), list(done[setup.calls :])
    parsed = [c.scores for c in calls if c.scores is not None]
    if not parsed:
        return _failure(target, calls)
    first = calls[0]
    expected = None
    if first.scores is not None and "score_probabilities" in first.record:
        expected = expected_scores(first.record["score_probabilities"])
    signals = JudgeSignals(calls=parsed, second=extra[0].scores if extra else None, expected=expected)
    costs = [c.cost for c in done]
    return JudgeScoreIn(
        draft_id=target.draft_id,
        raw_calls=[dict(c.record) for c in done],
        signals=signals,
        calls=len(done),
        cost_usd=None if any(c is None for c in costs) else sum(c for c in costs if c is not None),
        **parsed[0],
    )


def _failure(target: JudgeTarget, calls: list[_Call]) -> JudgeFailure:
    """Say why no primary call gave a score: the one call's error, or each call's."""
    raw = next((c.record["response"] for c in calls if c.record["response"] is not None), None)
    errors = [c.record["error"] or "" for c in calls]
    if len(calls) == 1:
        return JudgeFailure(target.draft_id, target.case_id, errors[0], raw=raw)
    listed = "; ".join(f"call {i + 1}: {e}" for i, e in enumerate(errors))
    return JudgeFailure(
        target.draft_id,
        target.case_id,
        f"none of the {len(calls)} judge calls gave a score: {listed}",
        raw=raw,
    )


async def _call(
    target: JudgeTarget,
    client: ChatClient,
    *,
    judge: str,
    index: int,
    model: str | None,
    temperature: float,
    seed: int | None,
    top_logprobs: int | None,
) -> _Call:
    """Make one call and record it; a failed call or an answer that does not parse is recorded as its error."""
    assert model is not None
    response_format = judge_response_format(target.rubric)
    request: dict[str, object] = {
        "model": model,
        "messages": target.messages,
        "temperature": temperature,
        "seed": seed,
        "response_format": response_format,
    }
    if top_logprobs is not None:
        request["logprobs"] = True
        request["top_logprobs"] = top_logprobs
    record = RawCall(judge=judge, index=index, model=model, request=request, response=None, error=None, cached=False,
                     prompt_tokens=0, completion_tokens=0, cost_usd=None)  # fmt: skip
    try:
        answer = await client.complete(
            model=model, messages=list(target.messages), temperature=temperature, seed=seed, sample_index=index,
            response_format=response_format, priority=0, top_logprobs=top_logprobs,
        )  # fmt: skip
    except LlmConfigError:
        raise
    except LlmCallError as exc:
        free = 0.0 if client.cost(model, 0, 0) is not None else None  # a failed request is billed nothing
        record["error"], record["cost_usd"] = f"the judge call failed: {exc}", free
        return _Call(record, None, free)
    cost = client.cost(model, answer.prompt_tokens, answer.completion_tokens)
    record.update(response=answer.content, cached=answer.cached, prompt_tokens=answer.prompt_tokens,
                  completion_tokens=answer.completion_tokens, cost_usd=cost)  # fmt: skip
    try:
        scores = score_from_answer(answer.content, target.rubric)
    except ValueError as exc:
        record["error"] = str(exc)
        return _Call(record, None, cost)
    _add_logprobs(record, answer)
    return _Call(record, scores, cost)


def _add_logprobs(record: RawCall, answer: Answer) -> None:
    """Record the score tokens' distributions of an answer that carries log-probs (nothing when it has none)."""
    if answer.logprobs is None:
        return
    found = score_distributions(answer.logprobs, answer.content)
    if found is not None:
        record["score_probabilities"] = found
