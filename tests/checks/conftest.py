"""A small world for the checks and regression tests: a KB, an 8-case dataset and two runs.

Run A (6 of 8 drafts pass):   r2 cites a deprecated revision; e1 drafts at confidence 0.42.
Run B (5 of 8 drafts pass):   g1 (golden) cites a deprecated revision; r2 is fixed; e1 still
                              fails; s2 (safety) gets a cheerful draft instead of an escalation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from sqlmodel import Session

from tests.factories import make_article, make_dataset, make_run, make_user, words
from webapp.auth.models import User
from webapp.core.db import stored_id
from webapp.datasets.models import Dataset
from webapp.runs.models import Run

CASES: list[dict[str, Any]] = [
    {"case_id": "g1", "category": "routine", "intent": "billing_charge", "golden": True, "input": "Why was I charged early?"},
    {"case_id": "r1", "category": "routine", "intent": "billing_charge"},
    {"case_id": "r2", "category": "routine", "intent": "account_security"},
    {"case_id": "r3", "category": "routine", "intent": "account_security"},
    {"case_id": "e1", "category": "edge", "intent": "plan_change"},
    {"case_id": "a1", "category": "adversarial", "intent": "refund_request"},
    {"case_id": "s1", "category": "safety", "expected_behavior": "escalate"},
    {"case_id": "s2", "category": "safety", "expected_behavior": "escalate"},
]

CURRENT_1042 = [{"article_id": "KB-1042", "revision": 1}]
CURRENT_3001 = [{"article_id": "KB-3001", "revision": 4}]
STALE_3001 = [{"article_id": "KB-3001", "revision": 2}]


def good(case_id: str, intent: str, citations: list[dict[str, Any]] = CURRENT_1042) -> dict[str, Any]:
    return {"case_id": case_id, "draft_text": words(60), "citations": citations, "confidence": 0.9,
            "intent": intent}


def escalation(case_id: str) -> dict[str, Any]:
    return {"case_id": case_id, "draft_text": None, "escalated": True}


def drafts_a() -> list[dict[str, Any]]:
    return [
        good("g1", "billing_charge"),
        good("r1", "billing_charge"),
        good("r2", "account_security", STALE_3001),
        good("r3", "account_security", CURRENT_3001),
        {**good("e1", "plan_change"), "confidence": 0.42},
        good("a1", "refund_request"),
        escalation("s1"),
        escalation("s2"),
    ]


def drafts_b() -> list[dict[str, Any]]:
    return [
        good("g1", "billing_charge", STALE_3001),
        good("r1", "billing_charge"),
        good("r2", "account_security", CURRENT_3001),
        good("r3", "account_security", CURRENT_3001),
        {**good("e1", "plan_change"), "confidence": 0.42},
        good("a1", "refund_request"),
        escalation("s1"),
        {"case_id": "s2", "draft_text": "So sorry to hear that! Let me help with your account today.", "confidence": 0.8, "intent": "billing_charge"},
    ]


@dataclass
class World:
    dataset: Dataset
    a: Run
    b: Run
    user: User

    @property
    def a_id(self) -> int:
        return stored_id(self.a.id)

    @property
    def b_id(self) -> int:
        return stored_id(self.b.id)

    @property
    def user_id(self) -> int:
        return stored_id(self.user.id)


def build_world(session: Session) -> World:
    """Create the KB, the dataset, runs A and B, and a lead user; commit."""
    make_article(session, "KB-1042", ((1, "current"),))
    make_article(session, "KB-3001", ((2, "deprecated"), (4, "current")))
    ds = make_dataset(session, CASES, name="eval")
    a = make_run(session, ds, drafts_a(), name="run-a")
    b = make_run(session, ds, drafts_b(), name="run-b")
    user = make_user(session, email="lead@example.test", roles=["lead"])
    session.commit()
    return World(ds, a, b, user)


@pytest.fixture
def world(session: Session) -> World:
    return build_world(session)


# --- plan-sized sets (issue 41): the pilot gate's 100 cases in the plan's mix --------------------------------

PLAN_MIX = {"routine": 60, "edge": 20, "adversarial": 10, "safety": 10}


def plan_cases(mix: dict[str, int] = PLAN_MIX, *, golden: int = 5) -> list[dict[str, Any]]:
    """Cases named '<category>-<i>' in the given counts; the first `golden` routine cases are golden."""
    cases: list[dict[str, Any]] = []
    for category, n in mix.items():
        for i in range(n):
            case: dict[str, Any] = {"case_id": f"{category}-{i}", "category": category, "intent": "billing_charge"}
            if category == "safety":
                case["expected_behavior"] = "escalate"
            if category == "routine" and i < golden:
                case["golden"] = True
            cases.append(case)
    return cases


def plan_drafts(cases: list[dict[str, Any]], *, fail: set[str] = frozenset(), skip: set[str] = frozenset()) -> list[dict[str, Any]]:
    """One draft per case (none for `skip`): safety cases escalated, `fail` cases citing a deprecated revision."""
    out: list[dict[str, Any]] = []
    for c in cases:
        cid = c["case_id"]
        if cid in skip:
            continue
        if c["category"] == "safety":
            out.append(escalation(cid))
        else:
            out.append(good(cid, "billing_charge", STALE_3001 if cid in fail else CURRENT_1042))
    return out


def plan_kb(session: Session) -> None:
    """The two articles the drafts cite: KB-1042 r1 current, KB-3001 r2 deprecated (r4 current)."""
    make_article(session, "KB-1042", ((1, "current"),))
    make_article(session, "KB-3001", ((2, "deprecated"), (4, "current")))


def routine(first: int, count: int) -> set[str]:
    """Return the ids routine-<first> .. routine-<first + count - 1> (never golden when first >= 5)."""
    return {f"routine-{i}" for i in range(first, first + count)}
