"""Issue 11: skips with reasons, the pre-reserved next item, Previous, blind model signals, pace,
the htmx grading item, the adjudication and reference pages, and sync form routes."""

from __future__ import annotations

import datetime as dt
import inspect
import re
import statistics
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from sqlmodel import Session, select

from tests.factories import make_judge_score
from tests.grading.conftest import FORM, HX, GradingWorld, build_world, grade, post_form
from webapp.auth.models import User
from webapp.checks.models import DraftCheck
from webapp.core.spec import EvalSpec
from webapp.evaluator.provides import JUDGE
from webapp.grading import pages
from webapp.grading.adjudication import highlight, list_adjudications
from webapp.grading.errors import AlreadyGraded, GradeInvalid
from webapp.grading.evidence import cited_kb_texts, model_signals
from webapp.grading.grades import lock_draft
from webapp.grading.item_reads import previous_draft
from webapp.grading.models import Grade, GradingSkip, GradingSlot
from webapp.grading.progress import grading_pace
from webapp.grading.queue import BatchFilter, claim_slot, next_item
from webapp.grading.skips import skip_counts, skip_draft
from webapp.runs.models import Draft


def batch(w: GradingWorld) -> BatchFilter:
    return BatchFilter(run_id=w.run.id)  # type: ignore[arg-type]


def ids(w: GradingWorld) -> list[int]:
    return [d.id for d in w.drafts]  # type: ignore[misc]


def take(session: Session, spec: EvalSpec, w: GradingWorld, grader: User, **kw: Any) -> int | None:
    d = next_item(session=session, spec=spec, grader_id=grader.id, batch=batch(w), **kw)
    return None if d is None else d.id


def skip(session: Session, draft_id: int, grader: User, reason: str, detail: str = "") -> None:
    skip_draft(session=session, draft_id=draft_id, grader_id=grader.id, reason=reason, detail=detail)


@pytest.fixture
def alice(session: Session, world: GradingWorld, client_as: Callable[..., TestClient]) -> TestClient:
    return client_as("labeler", email="alice@example.test")


class TestSkipDraft:
    def test_reason_must_come_from_the_list_and_skips_are_counted_per_draft(
        self, session: Session, spec: EvalSpec, world: GradingWorld
    ) -> None:
        d0, d1, d2 = ids(world)[:3]
        with pytest.raises(GradeInvalid) as bad:
            skip(session, d0, world.alice, "bored")
        assert bad.value.field == "reason" and "kb_missing" in bad.value.message
        with pytest.raises(GradeInvalid) as other:
            skip(session, d0, world.alice, "other", detail="  ")  # "other" needs words
        assert other.value.field == "detail"
        assert session.exec(select(GradingSkip)).all() == []
        for grader in (world.alice, world.bob):
            skip(session, d0, grader, "domain")
        skip(session, d1, world.carol, "other", detail="needs legal")
        assert skip_counts(session=session, draft_ids=[d0, d1, d2]) == {d0: 2, d1: 1}
        # A draft the grader already graded cannot be skipped.
        grade(session, spec, world, world.alice, 2)
        with pytest.raises(AlreadyGraded):
            skip(session, d2, world.alice, "domain")

    def test_skipped_draft_comes_back_only_when_nothing_else_is_left(
        self, session: Session, spec: EvalSpec
    ) -> None:
        w = build_world(session, n_drafts=3)
        d0, d1, d2 = ids(w)
        assert take(session, spec, w, w.alice) == d0
        skip(session, d0, w.alice, "kb_missing")
        # The reservation is given back, and d0 is not handed straight back.
        assert session.exec(select(GradingSlot).where(GradingSlot.draft_id == d0)).all() == []
        assert take(session, spec, w, w.bob) == d0  # another grader still gets the skipped draft first
        order = []
        for _ in range(3):
            nxt = take(session, spec, w, w.alice)
            assert nxt is not None
            order.append(nxt)
            grade(session, spec, w, w.alice, ids(w).index(nxt))
        assert order == [d1, d2, d0]
        assert take(session, spec, w, w.alice) is None


def test_pre_reserved_next_is_held_and_returned_after_the_current(
    session: Session, spec: EvalSpec, world: GradingWorld
) -> None:
    d0, d1 = ids(world)[:2]
    assert take(session, spec, world, world.alice) == d0  # the oldest
    # Asking again returns the same held item instead of reserving a second one.
    assert take(session, spec, world, world.alice) == d0
    held = session.exec(select(GradingSlot.draft_id).where(GradingSlot.grader_id == world.alice.id)).all()
    assert held == [d0]
    assert take(session, spec, world, world.alice, exclude=(d0,)) == d1
    held = session.exec(select(GradingSlot.draft_id).where(GradingSlot.grader_id == world.alice.id)).all()
    assert set(held) == {d0, d1}
    # Asking again while d0 is on screen gives the same d1 (held), not a third draft.
    assert take(session, spec, world, world.alice, exclude=(d0,)) == d1


def test_last_grade_while_the_draft_waits_for_its_other_grade(
    session: Session, spec: EvalSpec, world: GradingWorld
) -> None:
    d1 = ids(world)[1]
    t = dt.datetime(2026, 11, 23, 9, 0, tzinfo=dt.UTC)
    grade(session, spec, world, world.alice, 0, now=t)
    grade(session, spec, world, world.alice, 1, now=t + dt.timedelta(minutes=1))
    # the grading page's "Previous" (-1: no draft on screen)
    assert previous_draft(session=session, spec=spec, grader_id=world.alice.id, exclude_draft=-1) == d1
    # Once the draft has its second grade it is evaluated: no longer offered (nor the one before).
    grade(session, spec, world, world.bob, 1)
    assert previous_draft(session=session, spec=spec, grader_id=world.alice.id, exclude_draft=-1) is None
    # The draft on screen is never its own "previous".
    assert previous_draft(session=session, spec=spec, grader_id=world.bob.id, exclude_draft=d1) is None


def test_grades_today_and_median_seconds_by_hand(
    session: Session, spec: EvalSpec, world: GradingWorld
) -> None:
    w, d0 = world, ids(world)[0]
    day = dt.datetime(2026, 11, 23, tzinfo=dt.UTC)
    at = lambda h, m, s=0: day + dt.timedelta(hours=h, minutes=m, seconds=s)  # noqa: E731
    grade(session, spec, w, w.alice, 3, now=at(-2, 0))  # yesterday's grade is not counted
    take(session, spec, w, w.alice, now=at(10, 0, 0))  # d0 reserved 10:00:00
    take(session, spec, w, w.alice, exclude=(d0,), now=at(10, 0, 5))  # d1 10:00:05
    grade(session, spec, w, w.alice, 0, now=at(10, 0, 40))
    grade(session, spec, w, w.alice, 1, now=at(10, 1, 40))
    take(session, spec, w, w.alice, now=at(10, 5, 0))  # d2 after a break
    grade(session, spec, w, w.alice, 2, now=at(10, 5, 30))
    grade(session, spec, w, w.bob, 0, now=at(11, 0))
    # Alice: d0 10:00:00→10:00:40 = 40 s; d1 from her previous grade 10:00:40→10:01:40 = 60 s;
    # d2 from its reservation 10:05:00→10:05:30 = 30 s. Median of 40, 60, 30 = 40.
    pace = {p.grader_id: p for p in grading_pace(session=session, now=at(12, 0))}
    assert pace[w.alice.id].grades_today == 3
    assert pace[w.alice.id].median_seconds == statistics.median([40, 60, 30]) == 40
    # Bob's grade was written at once (0 s: a script, not a person): counted for the day, not timed.
    assert pace[w.bob.id].grades_today == 1 and pace[w.bob.id].median_seconds is None
    only = grading_pace(session=session, grader_ids=[w.bob.id], now=at(12, 0))
    assert [p.grader_id for p in only] == [w.bob.id]


def test_grades_written_in_under_a_second_are_not_timed(
    session: Session, spec: EvalSpec, world: GradingWorld
) -> None:
    """Seeded grades (written back to back by a script) would give "median 0 s": they count for the day
    but only the grade a person took 45 s over is timed."""
    w, d3 = world, ids(world)[3]
    t = dt.datetime(2026, 11, 23, 10, 0, tzinfo=dt.UTC)
    for i, ms in enumerate((0, 300, 600)):
        grade(session, spec, w, w.alice, i, now=t + dt.timedelta(milliseconds=ms))
    take(session, spec, w, w.alice, now=t + dt.timedelta(seconds=10))
    assert take(session, spec, w, w.alice, now=t + dt.timedelta(seconds=10)) == d3
    grade(session, spec, w, w.alice, 3, now=t + dt.timedelta(seconds=55))
    (pace,) = grading_pace(session=session, now=t + dt.timedelta(hours=1))
    assert pace.grades_today == 4
    assert pace.median_seconds == 45.0  # 10 s -> 55 s; the 0.3 s gaps between seeded grades are left out


def test_quoted_claims_are_marked_forgiving_case_and_whitespace() -> None:
    text = "Hello.  We will REFUND you\n200 dollars. Bye."
    segs = highlight(text, [("“we will refund you 200 dollars.”", "A"), ("Bye", "B"), ("bye", "C")])
    assert "".join(s for s, _ in segs) == text
    assert [(s, label) for s, label in segs if label] == [
        ("We will REFUND you\n200 dollars.", "A"),
        ("Bye", "B+C"),
    ]


SIGNALS = ("0.88", "JUDGE-RATIONALE-TEXT", "CHECK-REASON-TEXT")  # confidence as the page prints it


def _seed_signals(session: Session, w: GradingWorld) -> int:
    draft = w.drafts[0]
    draft.confidence = 0.8765
    session.add(draft)
    make_judge_score(session, w.run, draft.id, {"judge_groundedness_zz": 4}, "JUDGE-RATIONALE-TEXT")
    check = {"key": "pii_free", "status": "pass", "reason": "CHECK-REASON-TEXT", "kb_version": "v1"}
    session.add(DraftCheck(draft_id=draft.id, run_id=w.run.id, **check))  # type: ignore[arg-type]
    session.commit()
    return draft.id  # type: ignore[return-value]


class TestBlindModelSignals:
    def test_labeler_page_before_grading_has_no_confidence_judge_or_checks(
        self, session: Session, world: GradingWorld, alice: TestClient
    ) -> None:
        d = _seed_signals(session, world)
        before = alice.get(f"/grading/drafts/{d}").text
        assert "confidence" not in before.lower()
        for secret in (*SIGNALS, "0.8765", "judge_groundedness_zz", "pii_free"):
            assert secret not in before, secret
        post_form(alice, f"/grading/drafts/{d}", FORM)
        after = alice.get(f"/grading/drafts/{d}").text
        assert 'id="grading-signals"' in after
        for shown in (*SIGNALS, "judge_groundedness_zz 4", "pii_free pass"):
            assert shown in after, shown

    def test_spec_setting_shows_them_before_grading(
        self, session: Session, spec: EvalSpec, world: GradingWorld
    ) -> None:
        d = _seed_signals(session, world)
        draft = session.get(Draft, d)
        assert draft is not None
        ask = {"session": session, "draft_id": d, "confidence": draft.confidence, "has_graded": False}
        assert model_signals(spec=spec, judge=JUDGE, **ask) is None  # type: ignore[arg-type]
        opened = spec.model_copy(
            update={"grading": spec.grading.model_copy(update={"show_model_signals_before_grading": True})}
        )
        sig = model_signals(spec=opened, judge=JUDGE, **ask)  # type: ignore[arg-type]
        assert sig is not None and sig.confidence == pytest.approx(0.8765)
        assert sig.judge_scores == {"judge_groundedness_zz": 4}
        assert [c.key for c in sig.checks] == ["pii_free"]


class TestHtmxGradingItem:
    def test_save_and_next_swaps_the_pre_reserved_item_and_links_back_to_the_saved_one(
        self, session: Session, world: GradingWorld, alice: TestClient
    ) -> None:
        d0, d1 = ids(world)[:2]
        statuses = ["pass"] * 5 + ["fail"] + ["not_applicable"] * 2
        for i, status in enumerate(statuses):
            check = {"key": f"check_{i}", "status": status, "reason": "r", "kb_version": "x"}
            session.add(DraftCheck(draft_id=d0, run_id=world.run.id, **check))  # type: ignore[arg-type]
        session.commit()
        post_form(alice, f"/grading/runs/{world.run.id}/next", {})
        page = alice.get(f"/grading/drafts/{d0}")
        assert f"next: draft {d1} (reserved)" in page.text  # reserved while the grader reads d0
        first_try = {**FORM, "next": "1", "rationale": "FIRST-TRY"}
        r = post_form(alice, f"/grading/drafts/{d0}", first_try, headers=HX)
        assert r.status_code == 200 and r.headers["HX-Push-Url"] == f"/grading/drafts/{d1}"
        assert "<html" not in r.text
        assert f'<div id="grading-item" class="grading-item" data-draft="{d1}"' in r.text
        assert f"Grade saved (draft {d0})" in r.text and "Model on draft" in r.text
        assert "Vary" in r.headers and "HX-Request" in r.headers["Vary"]
        # 5 pass, 1 fails, 2 do not apply: 5 of the 6 that apply (not "5/8", which counts n/a as failing).
        assert "checks 5/6 applicable pass" in r.text
        assert "5/8" not in r.text
        # "Previous" reopens the saved grade for revision.
        assert f'id="grading-previous" href="/grading/drafts/{d0}"' in r.text
        back = alice.get(f"/grading/drafts/{d0}", headers=HX).text
        assert "FIRST-TRY" in back and "Your grade" in back and f"next: draft {d1} (reserved)" in back
        post_form(alice, f"/grading/drafts/{d0}", {**FORM, "tone": "2", "next": "1"}, headers=HX)
        session.expire_all()
        assert session.exec(select(Grade).where(Grade.draft_id == d0)).one().tone == 2

    def test_invalid_htmx_save_stays_on_the_draft_and_history_restore_gets_the_full_page(
        self, session: Session, world: GradingWorld, alice: TestClient
    ) -> None:
        url = f"/grading/drafts/{ids(world)[0]}"
        r = post_form(alice, url, {**FORM, "tone": "9", "next": "1"}, headers=HX)
        assert r.status_code == 200 and "HX-Push-Url" not in r.headers
        assert 'id="grading-error"' in r.text and "tone: score must be" in r.text
        assert f'data-draft="{ids(world)[0]}"' in r.text
        assert session.exec(select(Grade)).all() == []
        fragment = alice.get(url, headers=HX).text
        assert "<html" not in fragment and 'id="grading-item"' in fragment
        restore = alice.get(url, headers={**HX, "HX-History-Restore-Request": "true"}).text
        assert restore.lstrip().lower().startswith("<!doctype html>") and 'id="grading-item"' in restore

    def test_skip_via_htmx_opens_the_next_item(
        self, session: Session, world: GradingWorld, alice: TestClient
    ) -> None:
        d0, d1 = ids(world)[:2]
        post_form(alice, f"/grading/runs/{world.run.id}/next", {})
        r = post_form(alice, f"/grading/drafts/{d0}/skip", {"reason": "other", "detail": ""}, headers=HX)
        assert r.status_code == 200 and "HX-Push-Url" not in r.headers
        assert "detail: say in a few words" in r.text
        r = post_form(alice, f"/grading/drafts/{d0}/skip", {"reason": "kb_missing"}, headers=HX)
        assert r.headers["HX-Push-Url"] == f"/grading/drafts/{d1}"
        assert f"Skipped draft {d0} (KB missing)" in r.text
        skip = session.exec(select(GradingSkip)).one()
        assert (skip.draft_id, skip.grader_id, skip.reason) == (d0, world.alice.id, "kb_missing")

    def test_skip_without_javascript_redirects_to_the_next_item(
        self, world: GradingWorld, alice: TestClient
    ) -> None:
        d0, d1 = ids(world)[:2]
        r = post_form(alice, f"/grading/drafts/{d0}/skip", {"reason": "domain"})
        assert r.status_code == 303 and r.headers["location"] == f"/grading/drafts/{d1}"
        assert f"Skipped draft {d0}" in alice.get(r.headers["location"]).text


class TestLeadViews:
    def test_batch_page_shows_skip_counts_to_the_lead_only(
        self, session: Session, world: GradingWorld, alice: TestClient, client_as: Callable[..., TestClient]
    ) -> None:
        for g in (world.alice, world.bob, world.carol):
            skip(session, ids(world)[0], g, "domain")
        session.commit()
        lead = client_as("lead", email="lead@example.test").get(f"/grading/runs/{world.run.id}").text
        assert '<th class="num">Skips</th>' in lead and re.search(r'<td class="num">3</td>', lead)
        assert "Skips" not in alice.get(f"/grading/runs/{world.run.id}").text

    def test_queue_shows_my_pace_and_the_lead_sees_each_grader(
        self, session: Session, spec: EvalSpec, world: GradingWorld, alice: TestClient,
        client_as: Callable[..., TestClient],
    ) -> None:
        for i, g in ((0, world.alice), (1, world.alice), (0, world.bob)):
            grade(session, spec, world, g, i)
        session.commit()
        mine = alice.get("/grading").text
        # grades written together by the test (as seeded ones are) get no "median 0 s per grade"
        assert "Today:</strong> 2 grades" in mine and "s per grade" not in mine and "no timed grades yet" in mine
        assert "grading-team-pace" not in mine
        lead = client_as("lead", email="lead@example.test").get("/grading").text
        table = lead[lead.index('id="grading-team-pace"') :]
        assert re.search(r"Alice</td><td class=\"num\">2</td>", table)
        assert re.search(r"Bob</td><td class=\"num\">1</td>", table)

    def test_adjudication_shows_context_highlights_claims_and_prefills_from_a_grade(
        self, session: Session, spec: EvalSpec, world: GradingWorld, client_as: Callable[..., TestClient]
    ) -> None:
        grade(session, spec, world, world.alice, tone=5)
        bob_grade = grade(session, spec, world, world.bob, factual="fail", tone=2)
        session.commit()
        adj = list_adjudications(session=session)[0]
        c = client_as("lead", email="lead@example.test")
        html = c.get("/grading/adjudication").text
        assert "case-0" in html and "Reset your password from the sign-in page." in html  # ticket, KB text
        assert (
            '<mark class="grading-highlight" title="quoted by grader B">We will refund you 200 dollars.<sup>B</sup></mark>'
            in html
        )
        assert "Take A’s scores" in html and "Take B’s scores" in html
        assert not re.search(r'name="tone" value="2" checked', html)
        taken = c.get(f"/grading/adjudication?status=open&take={adj.id}:{bob_grade.id}").text
        assert "prefilled with B’s scores" in taken
        assert re.search(r'name="factual_accuracy" value="fail" checked', taken)
        assert re.search(r'name="tone" value="2" checked', taken)
        assert taken.count('name="note"') == 1

    def test_reference_editor_shows_ticket_and_kb_and_links_back(
        self, world: GradingWorld, alice: TestClient
    ) -> None:
        draft = world.drafts[0]
        html = alice.get(f"/grading/references/{draft.case_pk}?draft={draft.id}").text
        assert f'href="/grading/drafts/{draft.id}" id="reference-back"' in html
        assert 'id="reference-ticket"' in html and "KB-1 revision 1" in html and "current is 2" in html
        url = f"/grading/references/{draft.case_pk}"
        r = post_form(alice, url, {"text": "New ref", "draft": str(draft.id)})
        assert r.headers["location"] == f"{url}?draft={draft.id}"
        assert "Version 1 saved." in alice.get(r.headers["location"]).text


def test_no_grading_form_route_runs_on_the_event_loop() -> None:
    posts = [r for r in pages.router.routes if isinstance(r, APIRoute) and "POST" in r.methods]
    assert len(posts) >= 8
    for route in posts:
        assert not inspect.iscoroutinefunction(route.endpoint), route.path


def test_stale_revision_names_the_current_one(session: Session, world: GradingWorld) -> None:
    cited = cited_kb_texts(session=session, citations=world.drafts[0].citations)
    assert [(c.article_id, c.revision, c.status, c.current_revision, c.flagged) for c in cited] == [
        ("KB-1", 1, "deprecated", 2, True)
    ]


def test_reserving_a_place_on_a_draft_being_graded_does_not_wait(
    spec: EvalSpec, world: GradingWorld, db_url: str
) -> None:
    """Save-and-next grades X (row lock) and reserves the next draft in one transaction; another
    grader doing the same on Y may reserve X meanwhile. FOR UPDATE made those two wait on each
    other (deadlock on PostgreSQL); FOR NO KEY UPDATE does not block the foreign-key check."""
    from sqlalchemy import text

    from webapp.core.db import make_engine

    x = ids(world)[0]
    engine_a, engine_b = make_engine(db_url), make_engine(db_url)
    try:
        with Session(engine_a) as a, Session(engine_b) as b:
            assert lock_draft(a, x) is not None  # grader A is saving a grade of X
            if b.get_bind().dialect.name == "postgresql":
                b.exec(text("SET LOCAL lock_timeout = '3s'"))  # type: ignore[call-overload]
            slot = claim_slot(session=b, spec=spec, draft_id=x, grader_id=world.bob.id)  # Bob reserves X
            assert slot is not None and slot.draft_id == x
            b.commit()
            a.commit()
    finally:
        engine_a.dispose()
        engine_b.dispose()
