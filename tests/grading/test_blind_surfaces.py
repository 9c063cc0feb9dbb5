"""Blind means blind (#11): every page and API route a labeler can open hides a draft's model signals until they grade it.

One rule (webapp.core.blind.signals_visible, applied through grading's signals_view): a principal
holding `labeler` and none of lead, pm, admin, support_lead sees a draft's confidence (and the
raw output carrying it), judge scores and check results only once they have graded that draft,
or when the spec's `grading.show_model_signals_before_grading` is true. Each surface is asked
for the exact values the factories stored, so a test fails if one shows.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session, col, select

from tests.factories import make_dataset, make_judge_score, make_run, make_user
from tests.grading.conftest import principal_of
from webapp.auth import service as auth_service
from webapp.auth.models import User
from webapp.auth.service import Principal
from webapp.checks.models import DraftCheck
from webapp.core.blind import SignalsView, is_blind, signals_visible
from webapp.core.spec import EvalSpec
from webapp.datasets.models import EvalCase
from webapp.grading.models import Grade
from webapp.regression import service as regression_service
from webapp.regression.judge_scores import judge_scores
from webapp.runs import hooks as runs_hooks
from webapp.runs.models import Draft, Run

# What the factories store, written as each surface prints it: confidence with `num` (2 digits) on
# pages and in full in JSON; the raw output's marker; each draft's check reason.
CONFIDENCE = {"bl-1": 0.9137, "bl-2": 0.3561}
SHOWN = {"bl-1": "0.91", "bl-2": "0.36"}
RAW = {"bl-1": "RAW-MARKER-ONE", "bl-2": "RAW-MARKER-TWO"}
REASON = {"bl-1": "CHECK-REASON-ONE", "bl-2": "CHECK-REASON-TWO"}
PLACEHOLDER = "hidden until you grade it"


@dataclass
class BlindWorld:
    run: Run
    drafts: dict[str, Draft]
    lead: User

    def did(self, case_id: str) -> int:
        return self.drafts[case_id].id  # type: ignore[return-value]


@pytest.fixture
def bw(session: Session) -> BlindWorld:
    """A checked run of two drafts (bl-1 golden), both failing a check, bl-1 in the regression suite."""
    ds = make_dataset(
        session,
        [
            {"case_id": "bl-1", "category": "routine", "golden": True, "input": "Where is my refund?"},
            {"case_id": "bl-2", "category": "routine", "input": "How do I reset 2FA?"},
        ],
        name="blind-ds",
    )
    run = make_run(
        session,
        ds,
        [
            {"case_id": c, "draft_text": f"Reply to {c}", "confidence": CONFIDENCE[c], "raw_output": {"confidence": CONFIDENCE[c], "note": RAW[c]}}
            for c in CONFIDENCE
        ],
        name="blind-run",
    )
    by_case = {
        case_id: draft
        for draft, case_id in session.exec(
            select(Draft, EvalCase.case_id).join(EvalCase, col(EvalCase.id) == Draft.case_pk).where(Draft.run_id == run.id)
        ).all()
    }
    for case_id, draft in by_case.items():
        session.add(
            DraftCheck(draft_id=draft.id, run_id=run.id, key="citations_current", status="fail", reason=REASON[case_id], kb_version="kb-x")  # type: ignore[arg-type]
        )
    lead = make_user(session, email="lead-blind@example.test", roles=["lead"])
    session.flush()
    regression_service.add_case_from_draft(session=session, draft_id=by_case["bl-1"].id, created_by=lead.id, note="golden")  # type: ignore[arg-type]
    session.commit()
    return BlindWorld(run=run, drafts=by_case, lead=lead)


def grade(session: Session, email: str, draft_id: int) -> None:
    user = auth_service.get_user_by_email(session=session, email=email)
    assert user is not None
    session.add(Grade(draft_id=draft_id, grader_id=user.id, factual_accuracy="pass", citation_relevance=4, tone=4, completeness=4))
    session.commit()


@pytest.fixture
def opened(spec: EvalSpec) -> EvalSpec:
    """The spec with `grading.show_model_signals_before_grading: true`."""
    return spec.model_copy(update={"grading": spec.grading.model_copy(update={"show_model_signals_before_grading": True})})


@pytest.fixture
def opened_spec(app, opened: EvalSpec) -> Iterator[EvalSpec]:  # type: ignore[no-untyped-def]
    """The app with `grading.show_model_signals_before_grading: true`."""
    before = app.state.spec
    app.state.spec = opened
    yield opened
    app.state.spec = before


# --- the rule ----------------------------------------------------------------------------------------------


SIGHTED = [{"labeler", "lead"}, {"labeler", "pm"}, {"labeler", "admin"}, {"labeler", "support_lead"}]


@pytest.mark.parametrize(
    ("roles", "blind"),
    [({"labeler"}, True)] + [(roles, False) for roles in (*SIGHTED, {"lead"}, {"pm"}, set())],
)
def test_who_is_blind(roles: set[str], blind: bool, spec: EvalSpec, opened: EvalSpec) -> None:
    p = Principal(user_id=1, email="x@example.test", name="", roles=frozenset(roles))
    assert is_blind(p) is blind
    assert signals_visible(spec=spec, principal=p, has_graded=False) is (not blind)
    assert signals_visible(spec=spec, principal=p, has_graded=True) is True
    # On the grading screen whoever is about to grade is blind, the lead included.
    assert signals_visible(spec=spec, principal=p, has_graded=False, grading=True) is False
    assert signals_visible(spec=opened, principal=p, has_graded=False, grading=True) is True


def test_signals_view_reads_the_drafts_graded(session: Session, spec: EvalSpec, bw: BlindWorld) -> None:
    p = principal_of(make_user(session, email="view@example.test", roles=["labeler"]), "labeler")
    session.commit()
    view = runs_hooks.signals_view(session=session, spec=spec, principal=p, run_id=bw.run.id)
    assert view == SignalsView(everything=False, graded=frozenset())
    grade(session, "view@example.test", bw.did("bl-2"))
    view = runs_hooks.signals_view(session=session, spec=spec, principal=p, run_id=bw.run.id)
    assert view.hides(bw.did("bl-1")) and view.shows(bw.did("bl-2"))
    assert runs_hooks.signals_view(session=session, spec=spec, principal=p, draft_ids=[bw.did("bl-1")]).graded == frozenset()


# --- the pages and API routes a labeler can open ----------------------------------------------------------


def _assert_hidden(text: str, case_id: str, *, confidence: bool = True, checks: bool = True) -> None:
    if confidence:
        assert SHOWN[case_id] not in text and RAW[case_id] not in text and str(CONFIDENCE[case_id]) not in text
    if checks:
        assert REASON[case_id] not in text


def _assert_shown(text: str, case_id: str, *, confidence: bool = True, checks: bool = True) -> None:
    if confidence:
        assert SHOWN[case_id] in text or str(CONFIDENCE[case_id]) in text
    if checks:
        assert REASON[case_id] in text


class Surface(NamedTuple):
    name: str
    url: Callable[[BlindWorld], str]
    conf: bool  # shows the draft's confidence
    checks: bool  # shows the draft's check results
    lists_drafts: bool = False  # shows every draft of the run


SURFACES = [
    Surface(*s)
    for s in [
        ("run page", lambda w: f"/runs/{w.run.name}", True, False, True),
        ("draft page", lambda w: f"/drafts/{w.did('bl-1')}", True, False),
        ("drafts API", lambda w: f"/api/v1/runs/{w.run.id}/drafts", True, False, True),
        ("run checks page", lambda w: f"/runs/{w.run.id}/checks", False, True, True),
        ("run checks API", lambda w: f"/api/v1/runs/{w.run.id}/checks", False, True, True),
        ("draft checks page", lambda w: f"/drafts/{w.did('bl-1')}/checks", False, True),
        ("draft checks API", lambda w: f"/api/v1/drafts/{w.did('bl-1')}/checks", False, True),
        ("regression suite", lambda w: f"/regression?run={w.run.name}", False, True),
        ("add-to-suite form", lambda w: f"/regression/cases/from-draft/{w.did('bl-1')}", False, True),
    ]
]


@pytest.mark.parametrize("surface", SURFACES, ids=[s.name for s in SURFACES])
def test_a_labeler_sees_signals_only_of_drafts_they_graded(
    surface: Surface,
    session: Session,
    bw: BlindWorld,
    client_as: Callable[..., TestClient],
) -> None:
    c = client_as("labeler", email="blind-labeler@example.test")
    before = c.get(surface.url(bw))
    assert before.status_code == 200, before.text
    _assert_hidden(before.text, "bl-1", confidence=surface.conf, checks=surface.checks)
    if not before.headers["content-type"].startswith("application/json"):
        assert PLACEHOLDER in before.text  # a clear placeholder, not a blank or a 0
    grade(session, "blind-labeler@example.test", bw.did("bl-1"))
    after = c.get(surface.url(bw)).text
    _assert_shown(after, "bl-1", confidence=surface.conf, checks=surface.checks)
    if surface.lists_drafts:
        _assert_hidden(after, "bl-2", confidence=surface.conf, checks=surface.checks)  # the other draft stays hidden


@pytest.mark.parametrize(
    ("roles", "open_spec"),
    [(("lead",), False), (("labeler", "pm"), False), (("labeler",), True)],
    ids=["lead", "labeler+pm", "labeler, spec shows signals before grading"],
)
@pytest.mark.parametrize("surface", SURFACES, ids=[s.name for s in SURFACES])
def test_sighted_roles_and_the_spec_setting_show_them_without_grading(
    surface: Surface,
    roles: tuple[str, ...],
    open_spec: bool,
    bw: BlindWorld,
    client_as: Callable[..., TestClient],
    request: pytest.FixtureRequest,
) -> None:
    if open_spec:
        request.getfixturevalue("opened_spec")
    text = client_as(*roles).get(surface.url(bw)).text
    _assert_shown(text, "bl-1", confidence=surface.conf, checks=surface.checks)
    assert PLACEHOLDER not in text


def test_json_answers_say_what_is_hidden(session: Session, bw: BlindWorld, api_as: Callable[..., TestClient]) -> None:
    c = api_as("labeler", email="api-blind@example.test")
    drafts = {d["case_id"]: d for d in c.get(f"/api/v1/runs/{bw.run.id}/drafts").json()["drafts"]}
    assert drafts["bl-1"]["confidence"] is None and drafts["bl-1"]["raw_output"] is None and drafts["bl-1"]["signals_hidden"] is True
    assert drafts["bl-1"]["draft_text"] == "Reply to bl-1"  # the draft itself is not a signal
    assert drafts["bl-2"]["confidence"] is None and drafts["bl-2"]["signals_hidden"] is True
    run_checks = c.get(f"/api/v1/runs/{bw.run.id}/checks").json()
    assert run_checks["failing_drafts"] == [] and run_checks["drafts_hidden"] == 2
    # Issue 33: no figure counts an ungraded draft (a count of one names it).
    assert run_checks["golden_failures"] == [] and run_checks["overall"] == {"passed": 0, "failed": 0, "total": 0, "pass_rate": None}
    assert run_checks["per_category"]["routine"]["total"] == 0 and run_checks["per_intent"] == {}
    # The CI gate's verdict stands; the golden failure is neither named nor counted.
    assert run_checks["gate"]["passes"] is False
    reasons = " ".join(run_checks["gate"]["reasons"])
    # Issue 41: a count of the golden or safety drafts they have not graded, whether those fail or not.
    assert "1 golden or safety draft you have not graded counts in this verdict: its results show once you have graded it" in reasons
    assert "bl-1" not in reasons and "pass rate 0.0%" not in reasons
    draft = c.get(f"/api/v1/drafts/{bw.did('bl-1')}/checks").json()
    assert (draft["signals_hidden"], draft["passed"], draft["results"]) == (True, None, [])
    grade(session, "api-blind@example.test", bw.did("bl-1"))
    run_checks = c.get(f"/api/v1/runs/{bw.run.id}/checks").json()
    assert [d["case_id"] for d in run_checks["failing_drafts"]] == ["bl-1"] and run_checks["drafts_hidden"] == 1
    assert run_checks["overall"] == {"passed": 0, "failed": 1, "total": 1, "pass_rate": 0.0}
    assert run_checks["golden_failures"] == ["bl-1"]
    assert any(r.startswith("golden example bl-1 fails") for r in run_checks["gate"]["reasons"])
    draft = c.get(f"/api/v1/drafts/{bw.did('bl-1')}/checks").json()
    assert (draft["signals_hidden"], draft["passed"]) == (False, False)
    assert draft["results"] == [{"key": "citations_current", "status": "fail", "reason": REASON["bl-1"]}]


def test_the_comparisons_judge_scores_follow_the_same_rule(session: Session, spec: EvalSpec, bw: BlindWorld) -> None:
    make_judge_score(session, bw.run, bw.did("bl-1"), {"judge_zz": 3})
    blind = principal_of(make_user(session, email="judge-blind@example.test", roles=["labeler"]), "labeler")
    session.commit()
    lead = principal_of(bw.lead, "lead")
    ask = {"run_id": bw.run.id, "draft_id": bw.did("bl-1")}
    assert judge_scores(session=session, spec=spec, principal=blind)(**ask) == (None, True)  # type: ignore[arg-type]
    assert judge_scores(session=session, spec=spec, principal=lead)(**ask) == ({"judge_zz": 3}, False)  # type: ignore[arg-type]
    grade(session, "judge-blind@example.test", bw.did("bl-1"))
    assert judge_scores(session=session, spec=spec, principal=blind)(**ask) == ({"judge_zz": 3}, False)  # type: ignore[arg-type]


def test_predicted_intent_stays_visible_and_run_aggregates_count_graded_drafts(session: Session, bw: BlindWorld, client_as: Callable[..., TestClient]) -> None:
    """Documented decisions: the predicted intent is what the draft answers, not a verdict on it; run-level rates count graded drafts only (issue 33)."""
    draft = bw.drafts["bl-2"]
    draft.intent = "refund_status_zz"
    session.add(draft)
    session.commit()
    c = client_as("labeler")
    assert "refund_status_zz" in c.get(f"/runs/{bw.run.name}").text
    page = c.get(f"/runs/{bw.run.id}/checks").text
    assert "(0/0)" in page and "(0/2)" not in page  # drafts passing every applicable check, over the graded drafts
    assert "count only the 0 checked drafts you have graded; the results of 2 other checked drafts" in page


@pytest.mark.parametrize("where", ["page", "api"])
def test_a_labeler_sees_no_fail_counts_of_drafts_they_have_not_graded(
    where: str, session: Session, bw: BlindWorld, client_as: Callable[..., TestClient], api_as: Callable[..., TestClient]
) -> None:
    """Issue 33: per-category and per-intent (and per-check, overall) counts left ungraded drafts' failures visible."""

    def figures(c: TestClient) -> dict[str, object]:
        if where == "api":
            data = c.get(f"/api/v1/runs/{bw.run.id}/checks").json()
            return {"routine": data["per_category"]["routine"], "intent": data["per_intent"].get("(none)"),
                    "check": next(x for x in data["per_check"] if x["key"] == "citations_current")["failed"]}
        html = c.get(f"/runs/{bw.run.id}/checks").text
        return {"routine": re.search(r"<td>routine</td>(.*?)</tr>", html, re.S).group(1),  # type: ignore[union-attr]
                "intent": re.search(r"<td>\(none\)</td>(.*?)</tr>", html, re.S) is not None,
                "check": "these figures count only the" in html}

    make = api_as if where == "api" else client_as
    labeler, lead = make("labeler", email="counts-blind@example.test"), make("lead")
    seen = figures(labeler)
    if where == "api":
        assert seen == {"routine": {"passed": 0, "failed": 0, "total": 0, "pass_rate": None}, "intent": None, "check": 0}
        assert figures(lead) == {"routine": {"passed": 0, "failed": 2, "total": 2, "pass_rate": 0.0},
                                 "intent": {"passed": 0, "failed": 2, "total": 2, "pass_rate": 0.0}, "check": 2}
    else:
        assert '<td class="num">0/0</td>' in str(seen["routine"])
        assert seen["intent"] is False and seen["check"] is True
        led = figures(lead)
        assert '<td class="num">0/2</td>' in str(led["routine"]) and led["intent"] is True and led["check"] is False
    grade(session, "counts-blind@example.test", bw.did("bl-2"))
    after = figures(labeler)
    if where == "api":
        assert after == {"routine": {"passed": 0, "failed": 1, "total": 1, "pass_rate": 0.0},
                         "intent": {"passed": 0, "failed": 1, "total": 1, "pass_rate": 0.0}, "check": 1}
    else:
        assert '<td class="num">0/1</td>' in str(after["routine"]) and after["intent"] is True


def test_the_regression_suite_counts_no_ungraded_failure(
    session: Session, bw: BlindWorld, client_as: Callable[..., TestClient]
) -> None:
    """Issue 33: the suite's 'fail' count told a labeler that bl-1, which they had not graded, fails."""

    def kpi(html: str, label: str) -> str:
        return re.search(r'<div class="value">(\d+)</div><div class="label">' + label, html).group(1)  # type: ignore[union-attr]

    url = f"/regression?run={bw.run.name}"
    labeler = client_as("labeler", email="suite-blind@example.test")
    html = labeler.get(url).text
    assert kpi(html, "fail") == "0" and kpi(html, "pass in") == "0" and "(drafts you have not graded)" in html
    assert kpi(client_as("lead").get(url).text, "fail") == "1"
    grade(session, "suite-blind@example.test", bw.did("bl-1"))
    html = labeler.get(url).text
    assert kpi(html, "fail") == "1" and "(drafts you have not graded)" not in html
