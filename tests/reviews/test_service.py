"""The PM's review: periods, a reproducible and stable sample, verdicts, word diff, regression hand-off."""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
from sqlmodel import Session

from tests.factories import make_user
from tests.metrics.conftest import ev, load
from webapp.core.spec import EvalSpec
from webapp.regression import service as regression_service
from webapp.reviews import service

D = dt.date.fromisoformat
TODAY = D("2026-11-20")  # a Friday of ISO week 2026-W47


class TestPeriods:
    def test_iso_week_and_month(self) -> None:
        assert service.period_of(D("2026-11-02"), "weekly") == "2026-W45"
        assert service.period_of(D("2027-01-01"), "weekly") == "2026-W53"  # a Friday in ISO week 53 of 2026
        assert service.period_bounds("2026-W45") == (D("2026-11-02"), D("2026-11-08"), "weekly")
        assert service.period_bounds("2026-02") == (D("2026-02-01"), D("2026-02-28"), "monthly")
        with pytest.raises(service.ReviewError, match="period"):
            service.period_bounds("2026-13")


def _week(session: Session, spec: EvalSpec, n: int = 30) -> list[dict[str, Any]]:
    events = [ev(D("2026-11-02") + dt.timedelta(days=i % 7), draft_text=f"draft {i}", sent_text=f"sent {i}", action="edit") for i in range(n)]
    events.append(ev("2026-11-03", action="reject", sent_text=None))  # not a sent draft
    events.append(ev("2026-11-03", draft_shown=False, action=None, draft_text=None, sent_text=None))
    events.append(ev("2026-11-09", action="accept"))  # the next week
    load(session, spec, events)
    return events


class TestDraw:
    def test_sample_is_seeded_by_period_and_stable(self, session: Session, spec: EvalSpec) -> None:
        events = _week(session, spec)
        sample = service.draw_sample(session=session, spec=spec, period="2026-W45", today=TODAY)
        items = service.sample_items(session=session, sample=sample)
        assert sample.wanted == spec.review.weekly_pairs == 20 and sample.candidates == 30
        chosen = [i.event_id for i, _ in items]
        # the same draw, independently: sorted candidate ids sampled with the period's seed
        ids = sorted(e["event_id"] for e in events[:30])
        assert chosen == random.Random("draftdesk-review:2026-W45").sample(ids, 20)
        # stable once drawn: later events of the week do not change it
        load(session, spec, [ev("2026-11-04", action="accept") for _ in range(5)])
        again = service.draw_sample(session=session, spec=spec, period="2026-W45", today=TODAY)
        assert again.id == sample.id
        assert [i.event_id for i, _ in service.sample_items(session=session, sample=again)] == chosen

    def test_monthly_cadence_in_steady_state(self, session: Session, spec: EvalSpec) -> None:
        steady = spec.model_copy(update={"review": spec.review.model_copy(update={"phase": "steady_state"})})
        _week(session, steady, n=40)
        sample = service.draw_sample(session=session, spec=steady, period="2026-11", today=TODAY)
        assert (sample.cadence, sample.wanted, sample.candidates) == ("monthly", 30, 41)
        assert len(service.sample_items(session=session, sample=sample)) == 30

    def test_fewer_candidates_than_wanted(self, session: Session, spec: EvalSpec) -> None:
        _week(session, spec, n=3)
        sample = service.draw_sample(session=session, spec=spec, period="2026-W45", today=TODAY)
        assert str(service.progress(session=session, sample=sample)) == "0/3 reviewed"


class TestVerdicts:
    def test_progress_counts_verdicts(self, session: Session, spec: EvalSpec) -> None:
        _week(session, spec)
        sample = service.draw_sample(session=session, spec=spec, period="2026-W45", today=TODAY)
        items = service.sample_items(session=session, sample=sample)
        for item, _ in items[:12]:
            service.record_verdict(session=session, item_id=item.id, verdict="good", notes="", reviewer=None)  # type: ignore[arg-type]
        assert str(service.progress(session=session, sample=sample)) == "12/20 reviewed"
        with pytest.raises(service.ReviewError, match="verdict"):
            service.record_verdict(session=session, item_id=items[0][0].id, verdict="meh", notes="", reviewer=None)  # type: ignore[arg-type]
        periods = service.list_periods(session=session, spec=spec, today=D("2026-11-20"))
        assert [(p.period, p.candidates, p.complete) for p in periods] == [("2026-W46", 1, True), ("2026-W45", 30, True)]
        assert str(periods[1].progress) == "12/20 reviewed"


class TestWordDiff:
    def test_marks_deleted_and_inserted_words(self) -> None:
        left, right = service.word_diff("Refunds take 5 to 10 days.", "Refunds take 3 to 5 days.")
        assert [(s.op, s.text) for s in left if s.op != "equal"] == [("delete", "5"), ("delete", "10")]
        assert [(s.op, s.text) for s in right if s.op != "equal"] == [("insert", "3"), ("insert", "5")]
        assert "".join(s.text for s in left) == "Refunds take 5 to 10 days."
        assert "".join(s.text for s in right) == "Refunds take 3 to 5 days."


class TestRegressionHandOff:
    @pytest.fixture
    def drawn(self, session: Session, spec: EvalSpec) -> tuple[Callable[..., str], Any]:
        """add_to_regression for the first drawn pair of a one-pair week, as a PM; and that pair's event."""
        pm = make_user(session, email="pm@example.test", roles=["pm"])
        _week(session, spec, n=1)
        sample = service.draw_sample(session=session, spec=spec, period="2026-W45", today=TODAY)
        item, event = service.sample_items(session=session, sample=sample)[0]
        return partial(service.add_to_regression, session=session, item_id=item.id, created_by=pm.id), event

    def test_adds_one_case_with_the_sent_text_as_reference_however_often_clicked(self, session, drawn):
        add, event = drawn
        case_id = add(input_text="Where is my refund?", reference_text="sent 0")
        assert case_id == f"review-{event.event_id}"
        # a second click does not add it twice, whatever input it carries
        assert add(input_text="x", reference_text="y") == case_id
        cases = regression_service.list_cases(session=session)
        assert [(c.case_id, c.source, c.source_ref, c.reference, c.input) for c in cases] == [
            (case_id, "review", event.event_id, "sent 0", "Where is my refund?")
        ]

    def test_needs_input_keeps_the_edited_reference_and_refuses_an_empty_one(self, session, drawn) -> None:
        add, event = drawn
        with pytest.raises(service.ReviewError, match="input"):
            add(created_by=None, input_text=" ", reference_text="r")
        with pytest.raises(service.ReviewError, match="reference"):
            add(input_text="Refund?", reference_text="  ")
        assert regression_service.list_cases(session=session) == []
        fixed = "We cannot promise a refund; here is how to request one: KB-1042."
        add(input_text="Refund?", reference_text=f" {fixed} ")
        (case,) = regression_service.list_cases(session=session)
        assert case.reference == fixed and case.reference != event.sent_text


class TestDrawablePeriods:
    """A sample is drawn only for a period that has begun, from 2000 on (issue 33: 2099-W01 was drawn)."""

    @pytest.mark.parametrize(
        ("period", "why"),
        [
            ("2026-W48", "2026-W48 has not begun (the current ISO week is 2026-W47)"),
            ("2099-W01", "2099-W01 has not begun (the current ISO week is 2026-W47)"),
            ("2026-12", "2026-12 has not begun (the current month is 2026-11)"),
            ("1999-W52", "1999-W52 is before 2000"),
            ("0001-01", "0001-01 is before 2000"),
            ("2026-W54", "no ISO week '2026-W54'"),
            ("2026-w47", "expected YYYY-Www or YYYY-MM, not '2026-w47'"),
        ],
    )
    def test_refused_with_the_period_named_and_nothing_stored(
        self, session: Session, spec: EvalSpec, period: str, why: str
    ) -> None:
        _week(session, spec)
        with pytest.raises(service.ReviewError) as err:
            service.draw_sample(session=session, spec=spec, period=period, today=TODAY)
        assert str(err.value).startswith("period: ") and why in str(err.value)
        assert service.get_sample(session=session, period=period) is None

    def test_the_week_in_progress_and_past_weeks_are_drawn(self, session: Session, spec: EvalSpec) -> None:
        _week(session, spec)
        assert service.draw_sample(session=session, spec=spec, period="2026-W47", today=TODAY).candidates == 0
        assert service.draw_sample(session=session, spec=spec, period="2026-W45", today=TODAY).candidates == 30
        assert service.draw_sample(session=session, spec=spec, period="2000-W01", today=TODAY).candidates == 0
