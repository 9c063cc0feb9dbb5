"""The demo's planted judge world (issue 35): five calls of judge A at temperature, a second judge, log-prob expectations.

A world like the issue's benchmark, per draft and criterion:

- the people's grade is the draft's true grade t rounded to 1-5 (t = the draft's quality plus a
  per-criterion part people see, sd 0.6);
- judge A's call k is round(t + bias + L + C_k): a lasting error L (per draft) and an error C_k that
  changes from call to call, each with the same sd TAU (half of A's error variance each; 0.7 on the
  1-5 scales), bias +0.4 on tone and completeness (the demo's judge is kinder than its people);
- the second judge is round(t + bias / 2 + e_B), e_B with the sd of one call of A, a third of its
  variance being A's lasting error L (corr(e_B, L) = sqrt(1/3)) and the rest its own;
- the log-prob expectation of A's first call is the expected score under the distribution its
  calls are drawn from (round(t + bias + L + C), C normal with sd TAU, 1 and 5 taking the tails);
- factual accuracy alike on a latent pass margin: people say pass when t_f > 2.6, a call of A when
  t_f + 0.2 + L + C_k > 2.6 (TAU_FACTUAL each), its expectation P(pass) = Phi((t_f + 0.2 + L - 2.6) / TAU_FACTUAL).

Single-call quadratic kappa with the people is about 0.6-0.65 (0.62, 0.76, 0.62 for citation
relevance, tone and completeness over the demo's 106 graded drafts); the check in
tests/ppi/test_demo_signals.py fits an out-of-fold linear regression with plain numpy over the
demo's graded drafts and finds the signals explain clearly more of the human grades than one call
(docs/ppi.md, "The judge pass", gives the figures).

Cost: each call is planted with a prompt of about 1,500 tokens and an answer of about 60, at
DEMO_PRICES (USD per million tokens, like gpt-4o-mini for A and a larger model for the second judge).
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass

from webapp.evaluator.client import Price
from webapp.ppi.judge_signals import CriterionScores, ExpectedScores, JudgeSignals, RawCall

CALLS = 5
TEMPERATURE = 0.7
MODEL = "demo-judge"
SECOND_MODEL = "demo-second-judge"
TAU = 0.7  # sd of A's lasting error and of its call-to-call error, 1-5 scales
TAU_FACTUAL = 0.45  # the same on the factual pass margin
HUMAN_SD = {"citation_relevance": 0.6, "tone": 0.6, "completeness": 0.6}
SECOND_SHARE = 1 / 3  # of the second judge's error variance, the part that is A's lasting error
DEMO_PRICES = {MODEL: Price(0.15, 0.60), SECOND_MODEL: Price(2.50, 10.00)}
PASS_AT = 2.6


@dataclass(frozen=True)
class PlantedDraft:
    """A draft's planted truth (what people will grade) and what the judges said of it."""

    truth: dict[str, float]  # per criterion: t (1-5 scales) or t_f (the factual pass margin)
    calls: list[CriterionScores]
    second: CriterionScores
    expected: ExpectedScores
    raw_calls: list[RawCall]
    cost_usd: float

    def human(self) -> dict[str, str | int]:
        """Return the people's grade of the draft: its truth rounded (factual: pass above the margin)."""
        return {
            "factual_accuracy": "pass" if self.truth["factual_accuracy"] > PASS_AT else "fail",
            **{name: int(_clip(self.truth[name])) for name in HUMAN_SD},
        }

    def signals(self) -> JudgeSignals:
        return JudgeSignals(calls=self.calls, second=self.second, expected=self.expected)


def _clip(x: float) -> float:
    return float(min(5.0, max(1.0, round(x))))


def _phi(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def expected_on_scale(mu: float, tau: float) -> float:
    """Return E[clip(round(mu + C))] for C normal(0, tau): the scores 1..5 with 1 and 5 taking the tails."""
    total = 0.0
    for v in range(1, 6):
        hi = 1.0 if v == 5 else _phi((v + 0.5 - mu) / tau)
        lo = 0.0 if v == 1 else _phi((v - 0.5 - mu) / tau)
        total += v * (hi - lo)
    return total


def plant_draft(rng: random.Random, *, draft_id: int, quality: float, citation_bias: float) -> PlantedDraft:
    """Draw one draft's truth and both judges' answers in the world above."""
    bias = {"citation_relevance": citation_bias, "tone": 0.4, "completeness": 0.4}
    truth = {"factual_accuracy": quality + rng.gauss(0, 0.6)}
    lasting = {"factual_accuracy": rng.gauss(0, TAU_FACTUAL)}
    for name, sd in HUMAN_SD.items():
        truth[name] = quality + rng.gauss(0, sd)
        lasting[name] = rng.gauss(0, TAU)

    def call(mean: dict[str, float], factual_sd: float, sd: float) -> CriterionScores:
        return CriterionScores(
            factual_accuracy="pass" if mean["factual_accuracy"] + rng.gauss(0, factual_sd) > PASS_AT else "fail",
            citation_relevance=_clip(mean["citation_relevance"] + rng.gauss(0, sd)),
            tone=_clip(mean["tone"] + rng.gauss(0, sd)),
            completeness=_clip(mean["completeness"] + rng.gauss(0, sd)),
        )

    a_mean = {"factual_accuracy": truth["factual_accuracy"] + 0.2 + lasting["factual_accuracy"]}
    a_mean.update({n: truth[n] + bias[n] + lasting[n] for n in HUMAN_SD})
    calls = [call(a_mean, TAU_FACTUAL, TAU) for _ in range(CALLS)]
    shared = math.sqrt(SECOND_SHARE)  # e_B = shared * (L / TAU) * sd_B + own
    b_mean = {"factual_accuracy": truth["factual_accuracy"] + 0.1 + shared * lasting["factual_accuracy"] * math.sqrt(2)}
    b_mean.update({n: truth[n] + bias[n] / 2 + shared * lasting[n] * math.sqrt(2) for n in HUMAN_SD})
    own = math.sqrt(1 - SECOND_SHARE) * math.sqrt(2)  # the second judge's error has the sd of one call of A
    second = call(b_mean, own * TAU_FACTUAL, own * TAU)
    expected = ExpectedScores(
        factual_accuracy=_phi((a_mean["factual_accuracy"] - PASS_AT) / TAU_FACTUAL),
        citation_relevance=expected_on_scale(a_mean["citation_relevance"], TAU),
        tone=expected_on_scale(a_mean["tone"], TAU),
        completeness=expected_on_scale(a_mean["completeness"], TAU),
    )
    raw = [_raw("primary", i, MODEL, TEMPERATURE, draft_id, c, rng) for i, c in enumerate(calls)]
    raw.append(_raw("second", 0, SECOND_MODEL, 0.0, draft_id, second, rng))
    cost = sum(r["cost_usd"] or 0.0 for r in raw)
    return PlantedDraft(truth, calls, second, expected, raw, cost)


def _raw(judge: str, index: int, model: str, temperature: float, draft_id: int, scores: CriterionScores, rng: random.Random) -> RawCall:
    """A planted call as the judge pass stores one (the request names the draft instead of the messages)."""
    prompt, completion = 1400 + rng.randrange(200), 50 + rng.randrange(20)
    answer = {**scores, "factual_accuracy": 1 if scores["factual_accuracy"] == "pass" else 0}
    return RawCall(
        judge=judge, index=index, model=model, request={"draft_id": draft_id, "temperature": temperature},
        response=json.dumps(answer), error=None, cached=False, prompt_tokens=prompt, completion_tokens=completion,
        cost_usd=DEMO_PRICES[model].cost(prompt, completion),
    )  # fmt: skip
