"""Grading services: validation, disagreement rules, final grades, blind visibility, history, rework, queue."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json

import pytest
from sqlmodel import Session, select

from tests.factories import make_user
from tests.grading.conftest import GradingWorld, grade, grade_pair, principal_of, revise, scores
from webapp.core.spec import EvalSpec
from webapp.core.timeutil import as_utc
from webapp.grading.adjudication import list_adjudications, resolve_adjudication, return_grade
from webapp.grading.agreement import agreement_report
from webapp.grading.errors import (
    AlreadyApproved,
    AlreadyGraded,
    GradeInvalid,
    GradeLocked,
    GradesHidden,
    NoPlaceLeft,
    NotAllowed,
)
from webapp.grading.export import export_csv, export_jsonl
from webapp.grading.grades import (
    grade_history,
    grade_lock,
    grades_visible_to,
    returned_grades,
)
from webapp.grading.models import Adjudication, GradeChange, GradingSlot
from webapp.grading.progress import batch_progress, waiting_for_grader
from webapp.grading.queue import BatchFilter, batch_counts, next_item
from webapp.grading.references import (
    approve_reference,
    current_reference,
    grade_reference,
    reference_versions,
    references_to_approve,
    save_reference,
)
from webapp.grading.scores import disagreement_reasons
from webapp.grading.status import final_grades, grading_status

T0 = dt.datetime(2026, 11, 16, 9, 0, tzinfo=dt.UTC)


def returned_pair(session: Session, spec: EvalSpec, world: GradingWorld):  # type: ignore[no-untyped-def]
    """Alice (tone 2) and Bob (tone 4) disagree; the lead returns Bob's grade. Return (alice's, bob's, adjudication)."""
    ga = grade(session, spec, world, world.alice, tone=2)
    gb = grade(session, spec, world, world.bob, tone=4)
    (adj,) = list_adjudications(session=session)
    return_grade(
        session=session, adjudication_id=adj.id, grade_id=gb.id, lead_id=world.lead.id, comment="re-read tone"
    )
    return ga, gb, adj


class TestValidateScores:
    @pytest.mark.parametrize(
        ("kw", "field"),
        [
            ({"tone": 6}, "tone"),
            ({"completeness": "3.5"}, "completeness"),  # not an integer
            ({"factual": "maybe"}, "factual_accuracy"),  # pass or fail only
            ({"factual": "fail", "unsupported_claim": "  "}, "unsupported_claim"),  # a fail quotes the claim
        ],
    )
    def test_bad_score_names_the_field(self, spec: EvalSpec, kw: dict[str, object], field: str) -> None:
        with pytest.raises(GradeInvalid) as err:
            scores(spec, **kw)
        assert err.value.field == field
        if field == "tone":
            assert "1 to 5" in err.value.message

    def test_claim_dropped_on_pass(self, spec: EvalSpec) -> None:
        assert scores(spec, unsupported_claim="x").unsupported_claim is None


class TestDisagreementRules:
    @pytest.mark.parametrize(
        ("a", "b", "disagree"),
        [
            ((4, 4, 4), (4, 4, 4), False),
            ((4, 4, 4), (5, 4, 4), False),  # differ by 1, same side
            ((3, 4, 4), (5, 4, 4), True),  # differ by exactly scale_difference (2)
            ((2, 4, 4), (3, 4, 4), True),  # 2 vs 3: opposite sides of threshold 3
            ((3, 4, 4), (4, 4, 4), False),  # 3 and 4 both pass
            ((1, 4, 4), (2, 4, 4), False),  # both below threshold, differ by 1
            ((4, 4, 2), (4, 4, 3), True),  # threshold edge on completeness
        ],
    )
    def test_scale_edges(
        self, spec: EvalSpec, a: tuple[int, int, int], b: tuple[int, int, int], disagree: bool
    ) -> None:
        sa = scores(spec, cr=a[0], tone=a[1], comp=a[2]).as_dict()
        sb = scores(spec, cr=b[0], tone=b[1], comp=b[2]).as_dict()
        assert bool(disagreement_reasons(spec=spec, a=sa, b=sb)) is disagree

    def test_factual_difference_disagrees(self, spec: EvalSpec) -> None:
        a, b = scores(spec).as_dict(), scores(spec, factual="fail").as_dict()
        assert disagreement_reasons(spec=spec, a=a, b=b) == ["factual_accuracy: pass vs fail"]


class TestFinalGrade:
    def test_agreeing_pair_gets_mean_at_once_and_is_exported(
        self, session: Session, spec: EvalSpec, world: GradingWorld
    ) -> None:
        grade(session, spec, world, world.alice, cr=4, tone=5, comp=3)
        assert final_grades(session=session, run_id=world.run.id) == {}
        grade(session, spec, world, world.bob, cr=5, tone=4, comp=4)
        final = final_grades(session=session, run_id=world.run.id)[world.drafts[0].id]
        assert (final.citation_relevance, final.tone, final.completeness) == (4.5, 4.5, 3.5)
        assert final.factual_accuracy == "pass" and final.source == "agreement"
        # The exports hold the final grade and both graders' scores.
        (row,) = csv.DictReader(io.StringIO(export_csv(session=session, run_id=world.run.id)))
        assert (row["final_tone"], row["grader_1_tone"], row["grader_2"]) == ("4.5", "5", "bob@example.test")
        (line,) = export_jsonl(session=session, run_id=world.run.id).splitlines()
        assert json.loads(line)["final_source"] == "agreement"
        # Two fails agree on factual accuracy: the final is fail (it passes only if both pass).
        for user in (world.alice, world.bob):
            grade(session, spec, world, user, 1, factual="fail")
        final = final_grades(session=session, run_id=world.run.id)[world.drafts[1].id]
        assert final.factual_accuracy == "fail"

    def test_disagreeing_pair_goes_to_the_lead_who_resolves_with_a_note_and_grades_lock(
        self, session: Session, spec: EvalSpec, world: GradingWorld
    ) -> None:
        g = grade(session, spec, world, world.alice, cr=2)
        grade(session, spec, world, world.bob, cr=3)
        assert final_grades(session=session, run_id=world.run.id) == {}
        (adj,) = list_adjudications(session=session, status="open")
        assert adj.draft_id == world.drafts[0].id and "threshold" in adj.reasons[0]
        status = grading_status(session=session, run_id=world.run.id)
        assert status.states[world.drafts[0].id] == "in_adjudication"
        assert status.counts == {"needs_grades": 5, "in_adjudication": 1, "final": 0, "total": 6}
        ask = {"session": session, "spec": spec, "adjudication_id": adj.id, "lead_id": world.lead.id}
        with pytest.raises(GradeInvalid) as err:
            resolve_adjudication(**ask, scores=scores(spec), note=" ")
        assert err.value.field == "note"
        final = resolve_adjudication(**ask, scores=scores(spec, factual="fail", cr=3), note="invented refund")
        assert final.source == "adjudication" and final.citation_relevance == 3.0
        view = final_grades(session=session, run_id=world.run.id)[world.drafts[0].id]
        assert view.source == "adjudication" and view.factual_accuracy == "fail"
        with pytest.raises(GradeLocked):
            revise(session, spec, g, world.alice)


class TestRevisionAndRework:
    def test_only_the_grader_revises_and_history_keeps_it(
        self, session: Session, spec: EvalSpec, world: GradingWorld
    ) -> None:
        g = grade(session, spec, world, world.alice, tone=4)
        with pytest.raises(NotAllowed):
            revise(session, spec, g, world.bob)
        revise(session, spec, g, world.alice, tone=2)
        alice = principal_of(world.alice, "labeler")
        history = grade_history(session=session, draft_id=world.drafts[0].id, principal=alice)
        assert [h.action for h in history] == ["create", "revise"]
        before, after, by = history[1].before["tone"], history[1].after["tone"], history[1].changed_by
        assert (before, after, by) == (4, 2, world.alice.id)

    def test_revision_that_breaks_agreement_reopens(
        self, session: Session, spec: EvalSpec, world: GradingWorld
    ) -> None:
        ga, _ = grade_pair(session, spec, world)
        assert world.drafts[0].id in final_grades(session=session, run_id=world.run.id)
        revise(session, spec, ga, world.alice, tone=1)
        assert final_grades(session=session, run_id=world.run.id) == {}
        assert len(list_adjudications(session=session, status="open")) == 1


class TestGradeLockDuringAdjudication:
    """Issue 10, item 3: while the grades disagree, only the lead ends the disagreement."""

    def test_open_adjudication_locks_both_grades(
        self, session: Session, spec: EvalSpec, world: GradingWorld
    ) -> None:
        ga = grade(session, spec, world, world.alice, tone=2)
        # Before every grade is in, a grader may still revise their own grade.
        revise(session, spec, ga, world.alice, tone=1)
        gb = grade(session, spec, world, world.bob, tone=4)
        (adj,) = list_adjudications(session=session, status="open")
        # Either grader copying the other's grade would make them agree: refused.
        for g, user, other_tone in ((ga, world.alice, 4), (gb, world.bob, 1)):
            with pytest.raises(GradeLocked, match="the lead decides or returns") as err:
                revise(session, spec, g, user, tone=other_tone)
            assert err.value.status == 409
        session.refresh(ga)
        session.refresh(gb)
        assert (ga.tone, gb.tone) == (1, 4)
        assert session.get(Adjudication, adj.id).status == "open"  # type: ignore[union-attr]
        assert final_grades(session=session, run_id=world.run.id) == {}
        assert grade_lock(session=session, grade=ga) is not None

    def test_only_the_returned_grade_goes_back_and_a_reworked_pair_can_agree(
        self, session: Session, spec: EvalSpec, world: GradingWorld
    ) -> None:
        ga, gb, adj = returned_pair(session, spec, world)
        assert [g.id for g in returned_grades(session=session, grader_id=world.bob.id)] == [gb.id]
        assert list_adjudications(session=session, status="rework")[0].id == adj.id
        # The grade the lead did not return stays locked while the other is reworked.
        with pytest.raises(GradeLocked, match="the lead decides or returns"):
            revise(session, spec, ga, world.alice, tone=4)
        assert grade_lock(session=session, grade=ga) is not None
        assert grade_lock(session=session, grade=gb) is None
        revise(session, spec, gb, world.bob, tone=2)
        assert returned_grades(session=session, grader_id=world.bob.id) == []
        assert session.get(Adjudication, adj.id).status == "dissolved"  # type: ignore[union-attr]
        final = final_grades(session=session, run_id=world.run.id)[world.drafts[0].id]
        assert (final.source, final.tone) == ("agreement", 2.0)
        actions = [c.action for c in session.exec(select(GradeChange).where(GradeChange.grade_id == gb.id))]
        assert actions == ["create", "return", "revise"]
        # Agreement statistics still use the first, blind submissions: tone 2 vs 4 disagree.
        report = agreement_report(session=session, spec=spec, run_id=world.run.id).model_dump()
        tone = next(c for c in report["criteria"] if c["key"] == "tone")
        assert (report["n_pairs"], report["disagreement_rate"], tone["exact_agreement"]) == (1, 1.0, 0.0)

    def test_reworked_grade_that_still_disagrees_locks_again(
        self, session: Session, spec: EvalSpec, world: GradingWorld
    ) -> None:
        _, gb, adj = returned_pair(session, spec, world)
        revise(session, spec, gb, world.bob, tone=5)
        assert session.get(Adjudication, adj.id).status == "open"  # type: ignore[union-attr]
        with pytest.raises(GradeLocked, match="the lead decides or returns"):
            revise(session, spec, gb, world.bob, tone=2)


def test_grades_hidden_until_own_grade_and_the_lead_always_sees(
    session: Session, spec: EvalSpec, world: GradingWorld
) -> None:
    d = world.drafts[0].id
    bob, lead = principal_of(world.bob, "labeler"), principal_of(world.lead, "lead")
    grade(session, spec, world, world.alice)
    with pytest.raises(GradesHidden):
        grades_visible_to(session=session, draft_id=d, principal=bob)
    # Their history view holds only their own changes (none).
    assert grade_history(session=session, draft_id=d, principal=bob) == []
    assert [g.grader_id for g in grades_visible_to(session=session, draft_id=d, principal=lead)] == [
        world.alice.id
    ]
    grade(session, spec, world, world.bob)
    seen = grades_visible_to(session=session, draft_id=d, principal=bob)
    assert {g.grader_id for g in seen} == {world.alice.id, world.bob.id}


class TestQueue:
    def test_full_draft_is_skipped_and_expired_reservation_released(
        self, session: Session, spec: EvalSpec, world: GradingWorld
    ) -> None:
        batch = BatchFilter(run_id=world.run.id)

        def take(user) -> int:  # type: ignore[no-untyped-def]
            d = next_item(session=session, spec=spec, grader_id=user.id, batch=batch, now=T0)
            return d.id  # type: ignore[union-attr,return-value]

        first = world.drafts[0].id
        assert (take(world.alice), take(world.bob)) == (first, first)
        # Both places of the first draft are reserved: Carol gets the second draft.
        assert take(world.carol) == world.drafts[1].id
        with pytest.raises(NoPlaceLeft):
            grade(session, spec, world, world.carol, now=T0)
        # 21 minutes later Bob's reservation has expired; Carol may take it.
        later = T0 + dt.timedelta(minutes=spec.grading.reservation_minutes + 1)
        grade(session, spec, world, world.alice, now=T0)
        assert grade(session, spec, world, world.carol, now=later).grader_id == world.carol.id
        bobs = select(GradingSlot).where(GradingSlot.grader_id == world.bob.id, GradingSlot.draft_id == first)
        assert session.exec(bobs).first() is None

    def test_filters_narrow_the_batch(self, session: Session, spec: EvalSpec, world: GradingWorld) -> None:
        batch = BatchFilter(run_id=world.run.id, category="edge")
        d = next_item(session=session, spec=spec, grader_id=world.alice.id, batch=batch, now=T0)
        assert d is not None and d.id == world.drafts[1].id
        golden = BatchFilter(run_id=world.run.id, golden=True)
        assert batch_progress(session=session, spec=spec, batch=golden).drafts == 1

    def test_quoted_claim_must_be_in_draft_and_a_second_grade_is_refused(
        self, session: Session, spec: EvalSpec, world: GradingWorld
    ) -> None:
        with pytest.raises(GradeInvalid) as err:
            grade(session, spec, world, world.alice, factual="fail", unsupported_claim="free pizza")
        assert err.value.field == "unsupported_claim"
        grade(session, spec, world, world.alice)
        with pytest.raises(AlreadyGraded):
            grade(session, spec, world, world.alice)

    def test_progress_counts_grades_and_graders(
        self, session: Session, spec: EvalSpec, world: GradingWorld
    ) -> None:
        for i, user in ((0, world.alice), (0, world.bob), (1, world.alice), (2, world.carol)):
            grade(session, spec, world, user, i)
        batch = BatchFilter(run_id=world.run.id)
        p = batch_progress(session=session, spec=spec, batch=batch)
        # Draft 0 has both grades (they agree: final); drafts 1 and 2 one each.
        assert (p.drafts, p.grades_needed, p.grades_done, p.final) == (6, 12, 4, 1)
        assert {g.name: g.graded for g in p.graders} == {"Alice": 2, "Bob": 1, "Carol": 1}
        assert p.share == pytest.approx(4 / 12)
        # The queue's cheaper counts agree with the full progress, plus the grader's own share.
        counts = batch_counts(session=session, spec=spec, batch=batch, grader_id=world.alice.id)
        assert (counts.drafts, counts.grades_done, counts.grades_needed) == (6, 4, 12)
        assert counts.mine == 2 and counts.mine_share == pytest.approx(2 / 6)
        # Bob: drafts 1-5 still need him; Carol: drafts 1, 3, 4, 5 (0 is full, 2 she graded).
        assert waiting_for_grader(session=session, spec=spec, grader_id=world.bob.id) == 5
        assert waiting_for_grader(session=session, spec=spec, grader_id=world.carol.id) == 4


def test_versions_kept_and_approval(session: Session, world: GradingWorld, spec: EvalSpec) -> None:
    case_pk = world.drafts[0].case_pk
    v1 = save_reference(session=session, case_pk=case_pk, author_id=world.alice.id, text="First")
    v2 = save_reference(session=session, case_pk=case_pk, author_id=world.bob.id, text="Second")
    assert [v.version for v in reference_versions(session=session, case_pk=case_pk)] == [2, 1]
    assert [r.id for r in references_to_approve(session=session)] == [v2.id]
    approve_reference(session=session, reference_id=v1.id, lead_id=world.lead.id)
    assert current_reference(session=session, case_pk=case_pk).id == v1.id  # type: ignore[union-attr]
    approve_reference(session=session, reference_id=v2.id, lead_id=world.lead.id)
    assert references_to_approve(session=session) == []
    rg = grade_reference(
        session=session, reference_id=v2.id, grader_id=world.carol.id, scores=scores(spec, tone=5)
    )
    assert rg.tone == 5
    with pytest.raises(GradeInvalid) as err:
        save_reference(session=session, case_pk=case_pk, author_id=world.alice.id, text=" ")
    assert err.value.field == "text"


class TestReferenceApproval:
    """Four eyes on references (issue 33): never one's own version, and the first approval stands."""

    def test_the_author_cannot_approve_their_own_version(self, session: Session, world: GradingWorld) -> None:
        case_pk = world.drafts[0].case_pk
        mine = save_reference(session=session, case_pk=case_pk, author_id=world.lead.id, text="Written by the lead")
        with pytest.raises(NotAllowed) as err:
            approve_reference(session=session, reference_id=mine.id, lead_id=world.lead.id)
        assert err.value.status == 403 and "written by you" in err.value.message
        session.refresh(mine)
        assert (mine.approved_by, mine.approved_at) == (None, None)

    def test_re_approval_is_refused_and_keeps_the_first_approver(self, session: Session, world: GradingWorld) -> None:
        other_lead = make_user(session, email="lead2@example.test", roles=["lead"], name="Second Lead")
        v = save_reference(session=session, case_pk=world.drafts[0].case_pk, author_id=world.alice.id, text="Ref")
        first = dt.datetime(2026, 11, 2, 9, 30, tzinfo=dt.UTC)
        approve_reference(session=session, reference_id=v.id, lead_id=world.lead.id, now=first)
        with pytest.raises(AlreadyApproved) as err:
            approve_reference(session=session, reference_id=v.id, lead_id=other_lead.id)
        assert err.value.status == 409
        assert "already approved by Lead on 2026-11-02 09:30 UTC" in err.value.message
        session.refresh(v)
        assert v.approved_by == world.lead.id and as_utc(v.approved_at) == first
