"""Issue 11: skips with reasons, the pre-reserved next item, Previous, blind model signals, pace,
the htmx grading item, the adjudication and reference pages, and sync form routes."""

from __future__ import annotations

import datetime as dt
import inspect
import re
import statistics
from collections.abc import Callable

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from sqlmodel import Session, select

from tests.conftest import csrf_for
from tests.factories import make_judge_score
from tests.grading.conftest import GradingWorld, build_world, scores
from webapp.checks.models import DraftCheck
from webapp.flows import JUDGE
from webapp.grading import pages
from webapp.grading.adjudication import highlight, list_adjudications
from webapp.grading.errors import AlreadyGraded, GradeInvalid
from webapp.grading.evidence import cited_kb_texts, model_signals
from webapp.grading.grades import lock_draft, record_grade
from webapp.grading.item import previous_draft
from webapp.grading.models import Grade, GradingSkip, GradingSlot
from webapp.grading.progress import batch_progress, grading_pace
from webapp.grading.queue import BatchFilter, batch_counts, claim_slot, next_item, skip_counts, skip_draft
from webapp.spec import EvalSpec

FORM = {
    "factual_accuracy": "pass",
    "citation_relevance": "4",
    "tone": "4",
    "completeness": "4",
    "rationale": "ok",
}
HX = {"HX-Request": "true"}


def post(c: TestClient, url: str, data: dict[str, str], headers: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    return c.post(
        url, data={**data, "csrf_token": csrf_for(c)}, headers=headers or {}, follow_redirects=False
    )


def batch(w: GradingWorld) -> BatchFilter:
    return BatchFilter(run_id=w.run.id)  # type: ignore[arg-type]


def ids(w: GradingWorld) -> list[int]:
    return [d.id for d in w.drafts]  # type: ignore[misc]


class TestSkipDraft:
    def test_reason_must_come_from_the_list_and_other_needs_words(
        self, session: Session, spec: EvalSpec
    ) -> None:
        w = build_world(session)
        d = ids(w)[0]
        with pytest.raises(GradeInvalid) as bad:
            skip_draft(session=session, draft_id=d, grader_id=w.alice.id, reason="bored")  # type: ignore[arg-type]
        assert bad.value.field == "reason" and "kb_missing" in bad.value.message
        with pytest.raises(GradeInvalid) as other:
            skip_draft(session=session, draft_id=d, grader_id=w.alice.id, reason="other", detail="  ")  # type: ignore[arg-type]
        assert other.value.field == "detail"
        assert session.exec(select(GradingSkip)).all() == []

    def test_skipped_draft_comes_back_only_when_nothing_else_is_left(
        self, session: Session, spec: EvalSpec
    ) -> None:
        w = build_world(session, n_drafts=3)
        d0, d1, d2 = ids(w)
        assert next_item(session=session, spec=spec, grader_id=w.alice.id, batch=batch(w)).id == d0  # type: ignore[union-attr]
        skip_draft(session=session, draft_id=d0, grader_id=w.alice.id, reason="kb_missing")  # type: ignore[arg-type]
        # The reservation is given back, and d0 is not handed straight back.
        assert session.exec(select(GradingSlot).where(GradingSlot.draft_id == d0)).all() == []
        order = []
        for _ in range(3):
            nxt = next_item(session=session, spec=spec, grader_id=w.alice.id, batch=batch(w))
            assert nxt is not None
            order.append(nxt.id)
            record_grade(
                session=session, spec=spec, draft_id=nxt.id, grader_id=w.alice.id, scores=scores(spec)
            )  # type: ignore[arg-type]
        assert order == [d1, d2, d0]
        assert next_item(session=session, spec=spec, grader_id=w.alice.id, batch=batch(w)) is None

    def test_another_grader_still_gets_the_skipped_draft_first(
        self, session: Session, spec: EvalSpec
    ) -> None:
        w = build_world(session, n_drafts=2)
        d0, _ = ids(w)
        next_item(session=session, spec=spec, grader_id=w.alice.id, batch=batch(w))
        skip_draft(session=session, draft_id=d0, grader_id=w.alice.id, reason="unclear_ticket")  # type: ignore[arg-type]
        assert next_item(session=session, spec=spec, grader_id=w.bob.id, batch=batch(w)).id == d0  # type: ignore[union-attr]

    def test_skip_counts_per_draft(self, session: Session, spec: EvalSpec) -> None:
        w = build_world(session, n_drafts=3)
        d0, d1, d2 = ids(w)
        for grader in (w.alice, w.bob):
            skip_draft(session=session, draft_id=d0, grader_id=grader.id, reason="domain")  # type: ignore[arg-type]
        skip_draft(session=session, draft_id=d1, grader_id=w.carol.id, reason="other", detail="needs legal")  # type: ignore[arg-type]
        assert skip_counts(session=session, draft_ids=[d0, d1, d2]) == {d0: 2, d1: 1}

    def test_cannot_skip_a_draft_already_graded(self, session: Session, spec: EvalSpec) -> None:
        w = build_world(session)
        d = ids(w)[0]
        record_grade(session=session, spec=spec, draft_id=d, grader_id=w.alice.id, scores=scores(spec))  # type: ignore[arg-type]
        with pytest.raises(AlreadyGraded):
            skip_draft(session=session, draft_id=d, grader_id=w.alice.id, reason="domain")  # type: ignore[arg-type]


class TestNextItemExclude:
    def test_pre_reserved_next_is_held_and_returned_after_the_current(
        self, session: Session, spec: EvalSpec
    ) -> None:
        w = build_world(session)
        d0, d1 = ids(w)[:2]
        assert next_item(session=session, spec=spec, grader_id=w.alice.id, batch=batch(w)).id == d0  # type: ignore[union-attr]
        upcoming = next_item(session=session, spec=spec, grader_id=w.alice.id, batch=batch(w), exclude=(d0,))
        assert upcoming is not None and upcoming.id == d1
        held = {
            s.draft_id for s in session.exec(select(GradingSlot).where(GradingSlot.grader_id == w.alice.id))
        }
        assert held == {d0, d1}
        # Asking again while d0 is on screen gives the same d1 (held), not a third draft.
        again = next_item(session=session, spec=spec, grader_id=w.alice.id, batch=batch(w), exclude=(d0,))
        assert again is not None and again.id == d1


class TestPreviousGrade:
    def test_last_grade_while_the_draft_waits_for_its_other_grade(
        self, session: Session, spec: EvalSpec
    ) -> None:
        w = build_world(session)
        d0, d1 = ids(w)[:2]
        t = dt.datetime(2026, 11, 23, 9, 0, tzinfo=dt.UTC)
        record_grade(
            session=session, spec=spec, draft_id=d0, grader_id=w.alice.id, scores=scores(spec), now=t
        )  # type: ignore[arg-type]
        record_grade(
            session=session,
            spec=spec,
            draft_id=d1,
            grader_id=w.alice.id,
            scores=scores(spec),
            now=t + dt.timedelta(minutes=1),
        )  # type: ignore[arg-type]
        # the grading page's "Previous" (-1: no draft on screen)
        assert previous_draft(session=session, spec=spec, grader_id=w.alice.id, exclude_draft=-1) == d1
        # Once the draft has its second grade it is evaluated: no longer offered (and not the one before either).
        record_grade(session=session, spec=spec, draft_id=d1, grader_id=w.bob.id, scores=scores(spec))  # type: ignore[arg-type]
        assert previous_draft(session=session, spec=spec, grader_id=w.alice.id, exclude_draft=-1) is None
        # The draft on screen is never its own "previous".
        assert previous_draft(session=session, spec=spec, grader_id=w.bob.id, exclude_draft=d1) is None


class TestGradingPace:
    def test_grades_today_and_median_seconds_by_hand(self, session: Session, spec: EvalSpec) -> None:
        w = build_world(session)
        d0, d1, d2, d3 = ids(w)[:4]
        day = dt.datetime(2026, 11, 23, tzinfo=dt.UTC)
        at = lambda h, m, s=0: day + dt.timedelta(hours=h, minutes=m, seconds=s)  # noqa: E731
        b = batch(w)
        # Yesterday's grade is not counted.
        record_grade(
            session=session, spec=spec, draft_id=d3, grader_id=w.alice.id, scores=scores(spec), now=at(-2, 0)
        )  # type: ignore[arg-type]
        next_item(
            session=session, spec=spec, grader_id=w.alice.id, batch=b, now=at(10, 0, 0)
        )  # d0 reserved 10:00:00
        next_item(
            session=session, spec=spec, grader_id=w.alice.id, batch=b, exclude=(d0,), now=at(10, 0, 5)
        )  # d1 10:00:05
        record_grade(
            session=session,
            spec=spec,
            draft_id=d0,
            grader_id=w.alice.id,
            scores=scores(spec),
            now=at(10, 0, 40),
        )  # type: ignore[arg-type]
        record_grade(
            session=session,
            spec=spec,
            draft_id=d1,
            grader_id=w.alice.id,
            scores=scores(spec),
            now=at(10, 1, 40),
        )  # type: ignore[arg-type]
        next_item(
            session=session, spec=spec, grader_id=w.alice.id, batch=b, now=at(10, 5, 0)
        )  # d2 after a break
        record_grade(
            session=session,
            spec=spec,
            draft_id=d2,
            grader_id=w.alice.id,
            scores=scores(spec),
            now=at(10, 5, 30),
        )  # type: ignore[arg-type]
        record_grade(
            session=session, spec=spec, draft_id=d0, grader_id=w.bob.id, scores=scores(spec), now=at(11, 0)
        )  # type: ignore[arg-type]
        # Alice: d0 10:00:00→10:00:40 = 40 s; d1 from her previous grade 10:00:40→10:01:40 = 60 s;
        # d2 from its reservation 10:05:00→10:05:30 = 30 s. Median of 40, 60, 30 = 40.
        pace = {p.grader_id: p for p in grading_pace(session=session, now=at(12, 0))}
        assert pace[w.alice.id].grades_today == 3
        assert pace[w.alice.id].median_seconds == statistics.median([40, 60, 30]) == 40
        assert (
            pace[w.bob.id].grades_today == 1 and pace[w.bob.id].median_seconds == 0.0
        )  # reserved and graded at once
        only = grading_pace(session=session, grader_ids=[w.bob.id], now=at(12, 0))
        assert [p.grader_id for p in only] == [w.bob.id]


class TestBatchCounts:
    def test_counts_match_the_full_progress(self, session: Session, spec: EvalSpec) -> None:
        w = build_world(session)
        d = ids(w)
        for draft_id, graders in ((d[0], (w.alice, w.bob)), (d[1], (w.alice,)), (d[2], (w.carol,))):
            for g in graders:
                record_grade(
                    session=session, spec=spec, draft_id=draft_id, grader_id=g.id, scores=scores(spec)
                )  # type: ignore[arg-type]
        counts = batch_counts(session=session, spec=spec, batch=batch(w), grader_id=w.alice.id)  # type: ignore[arg-type]
        full = batch_progress(session=session, spec=spec, batch=batch(w))
        assert (counts.drafts, counts.grades_done, counts.grades_needed) == (6, 4, 12)
        assert (full.drafts, full.grades_done, full.grades_needed) == (6, 4, 12)
        assert counts.mine == 2 and counts.mine_share == pytest.approx(2 / 6)


class TestHighlight:
    def test_quoted_claims_are_marked_forgiving_case_and_whitespace(self) -> None:
        text = "Hello.  We will REFUND you\n200 dollars. Bye."
        segs = highlight(text, [("“we will refund you 200 dollars.”", "A"), ("Bye", "B"), ("bye", "C")])
        assert "".join(s for s, _ in segs) == text
        assert [(s, label) for s, label in segs if label] == [
            ("We will REFUND you\n200 dollars.", "A"),
            ("Bye", "B+C"),
        ]


def _seed_signals(session: Session, w: GradingWorld) -> int:
    draft = w.drafts[0]
    draft.confidence = 0.8765
    session.add(draft)
    make_judge_score(session, w.run, draft.id, {"judge_groundedness_zz": 4}, "JUDGE-RATIONALE-TEXT")  # type: ignore[arg-type]
    session.add(
        DraftCheck(
            draft_id=draft.id,  # type: ignore[arg-type]
            run_id=w.run.id,  # type: ignore[arg-type]
            key="pii_free",
            status="pass",
            reason="CHECK-REASON-TEXT",
            kb_version="v1",
        )
    )
    session.commit()
    return draft.id  # type: ignore[return-value]


class TestBlindModelSignals:
    def test_labeler_page_before_grading_has_no_confidence_judge_or_checks(
        self, session: Session, client_as: Callable[..., TestClient]
    ) -> None:
        w = build_world(session)
        d = _seed_signals(session, w)
        c = client_as("labeler", email="alice@example.test")
        before = c.get(f"/grading/drafts/{d}").text
        for secret in (
            "0.88",
            "0.8765",
            "confidence",
            "judge_groundedness_zz",
            "JUDGE-RATIONALE-TEXT",
            "pii_free",
            "CHECK-REASON-TEXT",
        ):
            assert secret not in before.lower() if secret == "confidence" else secret not in before, secret
        post(c, f"/grading/drafts/{d}", FORM)
        after = c.get(f"/grading/drafts/{d}").text
        assert 'id="grading-signals"' in after
        for shown in (
            "0.88",
            "judge_groundedness_zz 4",
            "JUDGE-RATIONALE-TEXT",
            "pii_free pass",
            "CHECK-REASON-TEXT",
        ):
            assert shown in after, shown

    def test_spec_setting_shows_them_before_grading(self, session: Session, spec: EvalSpec) -> None:
        w = build_world(session)
        d = _seed_signals(session, w)
        draft = session.get(type(w.drafts[0]), d)
        assert draft is not None and draft.id is not None
        assert (
            model_signals(
                session=session,
                spec=spec,
                draft_id=draft.id,
                confidence=draft.confidence,
                has_graded=False,
                judge=JUDGE,
            )
            is None
        )
        opened = spec.model_copy(
            update={"grading": spec.grading.model_copy(update={"show_model_signals_before_grading": True})}
        )
        sig = model_signals(
            session=session,
            spec=opened,
            draft_id=draft.id,
            confidence=draft.confidence,
            has_graded=False,
            judge=JUDGE,
        )
        assert sig is not None and sig.confidence == pytest.approx(0.8765)
        assert sig.judge_scores == {"judge_groundedness_zz": 4} and [c.key for c in sig.checks] == [
            "pii_free"
        ]

    def test_spec_default_is_blind(self, spec: EvalSpec) -> None:
        assert spec.grading.show_model_signals_before_grading is False


class TestHtmxGradingItem:
    def test_save_and_next_swaps_the_pre_reserved_item_and_pushes_its_url(
        self, session: Session, client_as: Callable[..., TestClient]
    ) -> None:
        w = build_world(session)
        d0, d1 = ids(w)[:2]
        c = client_as("labeler", email="alice@example.test")
        post(c, f"/grading/runs/{w.run.id}/next", {})
        page = c.get(f"/grading/drafts/{d0}")
        assert f"next: draft {d1} (reserved)" in page.text  # reserved while the grader reads d0
        r = post(c, f"/grading/drafts/{d0}", {**FORM, "next": "1"}, headers=HX)
        assert r.status_code == 200 and r.headers["HX-Push-Url"] == f"/grading/drafts/{d1}"
        assert (
            "<html" not in r.text
            and f'<div id="grading-item" class="grading-item" data-draft="{d1}"' in r.text
        )
        assert f"Grade saved (draft {d0})" in r.text and "Model on draft" in r.text
        assert "Vary" in r.headers and "HX-Request" in r.headers["Vary"]

    def test_saved_signals_count_passes_over_applicable_checks(
        self, session: Session, client_as: Callable[..., TestClient]
    ) -> None:
        w = build_world(session)
        d0 = ids(w)[0]
        statuses = ["pass"] * 5 + ["fail"] + ["not_applicable"] * 2
        for i, status in enumerate(statuses):
            session.add(DraftCheck(draft_id=d0, run_id=w.run.id, key=f"check_{i}", status=status, reason="r", kb_version="x"))  # type: ignore[arg-type]
        session.commit()
        c = client_as("labeler", email="alice@example.test")
        post(c, f"/grading/runs/{w.run.id}/next", {})
        r = post(c, f"/grading/drafts/{d0}", {**FORM, "next": "1"}, headers=HX)
        # 5 pass, 1 fails, 2 do not apply: 5 of the 6 that apply (not "5/8", which counts n/a as failing).
        assert "checks 5/6 applicable pass" in r.text
        assert "5/8" not in r.text

    def test_invalid_htmx_save_stays_on_the_draft_with_the_error(
        self, session: Session, client_as: Callable[..., TestClient]
    ) -> None:
        w = build_world(session)
        d0 = ids(w)[0]
        c = client_as("labeler", email="alice@example.test")
        r = post(c, f"/grading/drafts/{d0}", {**FORM, "tone": "9", "next": "1"}, headers=HX)
        assert r.status_code == 200 and "HX-Push-Url" not in r.headers
        assert (
            'id="grading-error"' in r.text
            and "tone: score must be" in r.text
            and f'data-draft="{d0}"' in r.text
        )
        assert session.exec(select(Grade)).all() == []

    def test_history_restore_gets_the_full_page_and_htmx_the_item(
        self, session: Session, client_as: Callable[..., TestClient]
    ) -> None:
        w = build_world(session)
        d0 = ids(w)[0]
        c = client_as("labeler", email="alice@example.test")
        fragment = c.get(f"/grading/drafts/{d0}", headers=HX).text
        assert "<html" not in fragment and 'id="grading-item"' in fragment
        restore = c.get(f"/grading/drafts/{d0}", headers={**HX, "HX-History-Restore-Request": "true"}).text
        assert restore.lstrip().lower().startswith("<!doctype html>") and 'id="grading-item"' in restore

    def test_skip_via_htmx_opens_the_next_item(
        self, session: Session, client_as: Callable[..., TestClient]
    ) -> None:
        w = build_world(session)
        d0, d1 = ids(w)[:2]
        c = client_as("labeler", email="alice@example.test")
        post(c, f"/grading/runs/{w.run.id}/next", {})
        r = post(c, f"/grading/drafts/{d0}/skip", {"reason": "other", "detail": ""}, headers=HX)
        assert (
            r.status_code == 200 and "detail: say in a few words" in r.text and "HX-Push-Url" not in r.headers
        )
        r = post(c, f"/grading/drafts/{d0}/skip", {"reason": "kb_missing"}, headers=HX)
        assert (
            r.headers["HX-Push-Url"] == f"/grading/drafts/{d1}"
            and f"Skipped draft {d0} (KB missing)" in r.text
        )
        skip = session.exec(select(GradingSkip)).one()
        assert (skip.draft_id, skip.grader_id, skip.reason) == (d0, w.alice.id, "kb_missing")

    def test_skip_without_javascript_redirects_to_the_next_item(
        self, session: Session, client_as: Callable[..., TestClient]
    ) -> None:
        w = build_world(session)
        d0, d1 = ids(w)[:2]
        c = client_as("labeler", email="alice@example.test")
        r = post(c, f"/grading/drafts/{d0}/skip", {"reason": "domain"})
        assert r.status_code == 303 and r.headers["location"].startswith(f"/grading/drafts/{d1}?")

    def test_previous_link_reopens_the_last_grade_for_revision(
        self, session: Session, client_as: Callable[..., TestClient]
    ) -> None:
        w = build_world(session)
        d0, d1 = ids(w)[:2]
        c = client_as("labeler", email="alice@example.test")
        post(c, f"/grading/runs/{w.run.id}/next", {})
        r = post(c, f"/grading/drafts/{d0}", {**FORM, "next": "1", "rationale": "FIRST-TRY"}, headers=HX)
        assert f'id="grading-previous" href="/grading/drafts/{d0}"' in r.text
        back = c.get(f"/grading/drafts/{d0}", headers=HX).text
        assert "FIRST-TRY" in back and "Your grade" in back and f"next: draft {d1} (reserved)" in back
        post(c, f"/grading/drafts/{d0}", {**FORM, "tone": "2", "next": "1"}, headers=HX)
        session.expire_all()
        assert session.exec(select(Grade).where(Grade.draft_id == d0)).one().tone == 2


class TestLeadViews:
    def test_batch_page_shows_skip_counts_to_the_lead_only(
        self, session: Session, client_as: Callable[..., TestClient]
    ) -> None:
        w = build_world(session)
        d0 = ids(w)[0]
        for g in (w.alice, w.bob, w.carol):
            skip_draft(session=session, draft_id=d0, grader_id=g.id, reason="domain")  # type: ignore[arg-type]
        session.commit()
        lead = client_as("lead", email="lead@example.test").get(f"/grading/runs/{w.run.id}").text
        assert '<th class="num">Skips</th>' in lead and re.search(r'<td class="num">3</td>', lead)
        labeler = client_as("labeler", email="alice@example.test").get(f"/grading/runs/{w.run.id}").text
        assert "Skips" not in labeler

    def test_queue_shows_my_pace_and_the_lead_sees_each_grader(
        self, session: Session, spec: EvalSpec, client_as: Callable[..., TestClient]
    ) -> None:
        w = build_world(session)
        for draft_id in ids(w)[:2]:
            record_grade(
                session=session, spec=spec, draft_id=draft_id, grader_id=w.alice.id, scores=scores(spec)
            )  # type: ignore[arg-type]
        record_grade(session=session, spec=spec, draft_id=ids(w)[0], grader_id=w.bob.id, scores=scores(spec))  # type: ignore[arg-type]
        session.commit()
        alice = client_as("labeler", email="alice@example.test").get("/grading").text
        assert re.search(r"Today:</strong> 2 grades · median \d+ s per grade", alice)
        assert "grading-team-pace" not in alice
        lead = client_as("lead", email="lead@example.test").get("/grading").text
        table = lead[lead.index('id="grading-team-pace"') :]
        assert re.search(r"Alice</td><td class=\"num\">2</td>", table) and re.search(
            r"Bob</td><td class=\"num\">1</td>", table
        )

    def test_adjudication_shows_context_highlights_claims_and_prefills_from_a_grade(
        self, session: Session, spec: EvalSpec, client_as: Callable[..., TestClient]
    ) -> None:
        w = build_world(session)
        d0 = ids(w)[0]
        record_grade(
            session=session, spec=spec, draft_id=d0, grader_id=w.alice.id, scores=scores(spec, tone=5)
        )  # type: ignore[arg-type]
        record_grade(
            session=session, spec=spec, draft_id=d0, grader_id=w.bob.id, scores=scores(spec, "fail", tone=2)
        )  # type: ignore[arg-type]
        session.commit()
        adj = list_adjudications(session=session)[0]
        bob_grade = session.exec(select(Grade).where(Grade.grader_id == w.bob.id)).one()
        c = client_as("lead", email="lead@example.test")
        html = c.get("/grading/adjudication").text
        assert (
            "case-0" in html and "Reset your password from the sign-in page." in html
        )  # ticket id and KB text
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
        self, session: Session, client_as: Callable[..., TestClient]
    ) -> None:
        w = build_world(session)
        draft = w.drafts[0]
        c = client_as("labeler", email="alice@example.test")
        html = c.get(f"/grading/references/{draft.case_pk}?draft={draft.id}").text
        assert f'href="/grading/drafts/{draft.id}" id="reference-back"' in html
        assert 'id="reference-ticket"' in html and "KB-1 revision 1" in html and "current is 2" in html
        r = post(c, f"/grading/references/{draft.case_pk}", {"text": "New ref", "draft": str(draft.id)})
        assert r.headers["location"].startswith(
            f"/grading/references/{draft.case_pk}?draft={draft.id}&flash="
        )


class TestFormRoutesAreSync:
    def test_no_grading_form_route_runs_on_the_event_loop(self) -> None:
        posts = [r for r in pages.router.routes if isinstance(r, APIRoute) and "POST" in r.methods]
        assert len(posts) >= 8
        for route in posts:
            assert not inspect.iscoroutinefunction(route.endpoint), route.path


class TestCitedRevisions:
    def test_stale_revision_names_the_current_one(self, session: Session) -> None:
        w = build_world(session)
        cited = cited_kb_texts(session=session, citations=w.drafts[0].citations)
        assert [(c.article_id, c.revision, c.status, c.current_revision, c.flagged) for c in cited] == [
            ("KB-1", 1, "deprecated", 2, True)
        ]


class TestDraftLockLetsReservationsThrough:
    def test_reserving_a_place_on_a_draft_being_graded_does_not_wait(
        self, session: Session, spec: EvalSpec, db_url: str
    ) -> None:
        """Save-and-next grades X (row lock) and reserves the next draft in one transaction; another
        grader doing the same on Y may reserve X meanwhile. FOR UPDATE made those two wait on each
        other (deadlock on PostgreSQL); FOR NO KEY UPDATE does not block the foreign-key check."""
        from sqlalchemy import text

        from webapp.db import make_engine

        w = build_world(session)
        x = ids(w)[0]
        engine_a, engine_b = make_engine(db_url), make_engine(db_url)
        try:
            with Session(engine_a) as a, Session(engine_b) as b:
                assert lock_draft(a, x) is not None  # grader A is saving a grade of X
                if b.get_bind().dialect.name == "postgresql":
                    b.exec(text("SET LOCAL lock_timeout = '3s'"))  # type: ignore[call-overload]
                slot = claim_slot(session=b, spec=spec, draft_id=x, grader_id=w.bob.id)  # Bob reserves X
                assert slot is not None and slot.draft_id == x
                b.commit()
                a.commit()
        finally:
            engine_a.dispose()
            engine_b.dispose()
