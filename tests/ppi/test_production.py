"""Production weeks: a week's drafts as a run (exactly that week, capped with a stored seed, idempotent), the weekly
overall-quality estimate and its chart, the alert when a final week's upper bound is below the target, API, CLI, pages."""

from __future__ import annotations

import datetime as dt
import html
import json
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from scipy import stats
from sqlmodel import Session, col, func, select
from typer.testing import CliRunner, Result

from tests.conftest import TEST_SECRET, csrf_for
from tests.factories import make_dataset, make_run
from tests.metrics.conftest import ev, load
from webapp.alerts import channels as alerts_channels
from webapp.alerts import outbox as alerts_outbox
from webapp.alerts.models import AlertChannel, AlertNotice, AlertOutbox
from webapp.core.spec import EvalSpec
from webapp.datasets.models import EvalCase
from webapp.gates.service import runs_for_gates
from webapp.grading.models import FinalGrade
from webapp.metrics.models import Event
from webapp.ppi.charts import quality_figure
from webapp.ppi.estimator import Estimate, estimate_mean, make_sample
from webapp.ppi.models import PpiProductionWeek
from webapp.ppi.production import (
    WeekCriterion,
    WeekQuality,
    create_week_run,
    draw_week_sample,
    parse_week,
    quality_targets,
    resolve_week,
    weekly_quality,
)
from webapp.ppi.report import figure_of, stored_sample
from webapp.ppi.service import JudgeScoreIn, PpiError, draw_sample, record_judge_scores, run_sample
from webapp.regression.service import latest_run_id
from webapp.runs.models import Draft, Run

JUDGE = "judge-prod"
W47 = "2026-W47"  # Monday 2026-11-16 to Sunday 2026-11-22
Clients = Callable[..., TestClient]
WEEKS_API = "/api/v1/ppi/production-weeks"


def week_events() -> list[dict[str, object]]:
    """Events around 2026-W47: its first and last minutes, a ticket drafted twice, one without a draft, and its neighbours."""
    return [
        ev("2026-11-15", 23, event_id="before", ticket_id="t-before"),  # Sunday of W46
        ev("2026-11-16", 0, event_id="monday", ticket_id="t1", customer_message="Where is my invoice?"),
        ev("2026-11-18", 9, event_id="twice-a", ticket_id="t2", customer_message="Refund please"),
        ev("2026-11-18", 15, event_id="twice-b", ticket_id="t2", customer_message="Any news on the refund?"),
        ev("2026-11-19", 10, event_id="nodraft", ticket_id="t3", draft_shown=False, action=None, draft_text=None, sent_text="Hi"),
        ev("2026-11-22", 23, event_id="sunday", ticket_id="t4"),
        ev("2026-11-23", 0, event_id="after", ticket_id="t-after"),  # Monday of W48
    ]


def judge_all(session: Session, run_id: int, version: str = JUDGE) -> None:
    ids = session.exec(select(Draft.id).where(Draft.run_id == run_id)).all()
    scores = [JudgeScoreIn(d, "pass", 4, 4, 4) for d in ids]  # type: ignore[arg-type]
    record_judge_scores(session=session, run_id=run_id, judge_version=version, scores=scores)


def event_ids_of_run(session: Session, run_id: int) -> list[str]:
    drafts = session.exec(select(Draft).where(Draft.run_id == run_id).order_by(col(Draft.id))).all()
    return [d.raw_output["event_id"] for d in drafts]  # type: ignore[index]


class TestParseWeek:
    def test_an_iso_week_gives_its_monday_and_sunday(self) -> None:
        week = parse_week("2026-W47")
        assert (week.start, week.end) == (dt.date(2026, 11, 16), dt.date(2026, 11, 22))
        # 2026-W01 starts on Monday 2025-12-29 (1 January 2026 is a Thursday)
        assert parse_week("2026-W01").start == dt.date(2025, 12, 29)

    @pytest.mark.parametrize("today", [dt.date(2026, 11, 23), dt.date(2026, 11, 27), dt.date(2026, 11, 29)])
    def test_last_is_the_last_complete_week(self, today: dt.date) -> None:
        # Monday 23 Nov to Sunday 29 Nov 2026 is W48, still running: the last complete week is W47 (16-22 Nov)
        assert resolve_week("last", today=today).label == "2026-W47"
        assert resolve_week("last", today=dt.date(2026, 11, 30)).label == "2026-W48"
        assert resolve_week("2026-W45", today=today).label == "2026-W45"

    @pytest.mark.parametrize(
        ("text", "message"),
        [("47", r"^week: expected an ISO week like 2026-W47"), ("2026-W54", r"^week: 2026 has no ISO week 54"),
         ("2026-w47", r"^week: expected")],
    )
    def test_bad_weeks_are_refused_naming_the_field(self, text: str, message: str) -> None:
        with pytest.raises(PpiError, match=message):
            parse_week(text)


class TestCreateWeekRun:
    def test_the_run_holds_exactly_the_weeks_drafts(self, session: Session, spec: EvalSpec) -> None:
        load(session, spec, week_events())
        made = create_week_run(session=session, week=W47, budget=10, cap=1000, seed=1)
        assert made.created and made.run.name == "prod-2026-W47" and made.run.source == "production"
        assert event_ids_of_run(session, made.run.id) == ["monday", "twice-a", "twice-b", "sunday"]  # type: ignore[arg-type]
        assert (made.week.events_with_draft, made.week.drafts_taken, made.week.budget) == (4, 4, 10.0)
        # one case per ticket: the ticket drafted twice is one case with samples 0 and 1
        cases = session.exec(select(EvalCase).where(EvalCase.dataset_id == made.run.dataset_id).order_by(col(EvalCase.position))).all()
        assert [c.case_id for c in cases] == ["t1", "t2", "t4"]
        t2 = cases[1]
        assert t2.input == "Any news on the refund?" and t2.extra["events"] == ["twice-a", "twice-b"]
        assert [m["text"] for m in t2.conversation or []] == ["Refund please", "Any news on the refund?"]
        samples = session.exec(select(Draft.sample_index).where(Draft.case_pk == t2.id).order_by(col(Draft.sample_index))).all()
        assert list(samples) == [0, 1]
        # what the agent sent is not in the case or the draft (graders grade blind)
        drafts = session.exec(select(Draft).where(Draft.run_id == made.run.id)).all()
        assert all(d.draft_text == "Hello" and set(d.raw_output or {}) == {"event_id"} for d in drafts)
        # a second call reports the run and changes nothing
        again = create_week_run(session=session, week="2026-W47", budget=50, cap=2, seed=9)
        assert not again.created and again.run.id == made.run.id and again.week.budget == 10.0
        assert session.exec(select(func.count()).select_from(Run)).one() == 1
        assert session.exec(select(func.count()).select_from(PpiProductionWeek)).one() == 1
        assert session.exec(select(func.count()).select_from(Draft)).one() == 4
        # week runs are no launch or regression candidates
        assert runs_for_gates(session=session) == [] and latest_run_id(session=session) is None

    def test_a_busy_week_is_capped_by_a_uniform_draw_with_the_stored_seed(self, session: Session, spec: EvalSpec) -> None:
        events = [ev("2026-11-17", 8 + k % 10, event_id=f"e-{k:02d}", ticket_id=f"t-{k:02d}") for k in range(12)]
        load(session, spec, events)
        made = create_week_run(session=session, week=W47, budget=3, cap=5, seed=42)
        assert (made.week.events_with_draft, made.week.drafts_taken, made.week.cap, made.week.cap_seed) == (12, 5, 5, 42)
        # replay from the stored seed: numpy's default_rng(42) picks 5 of the 12 (events in id order)
        stored = list(session.exec(select(Event.event_id).order_by(col(Event.id))).all())
        picked = sorted(int(k) for k in np.random.default_rng(made.week.cap_seed).choice(12, size=5, replace=False))
        assert event_ids_of_run(session, made.run.id) == [stored[k] for k in picked]  # type: ignore[arg-type]
        assert len(set(picked)) == 5

    def test_ids_first_keeps_the_same_drafts_and_loads_only_those(self, session: Session, spec: EvalSpec) -> None:
        """A seeded week of 400 events with a draft (plus drafts-less and neighbouring ones), capped at 30.

        The kept drafts are those of the earlier rule (every row of the week in id order, then
        numpy's default_rng(seed).choice over their positions), and only the 30 kept events are
        loaded as ORM rows (counted with SQLAlchemy's instance "load" event).
        """
        from sqlalchemy import event as sa_event

        events = [
            ev(f"2026-11-{16 + k % 7:02d}", k % 24, event_id=f"w-{k:03d}", ticket_id=f"t-{k % 350:03d}") for k in range(400)
        ]
        events += [ev("2026-11-18", 3, event_id=f"nodraft-{k}", ticket_id=f"n-{k}", draft_shown=False, action=None,
                      draft_text=None, sent_text="Hi") for k in range(20)]
        events += [ev("2026-11-15", 5, event_id=f"before-{k}", ticket_id=f"b-{k}") for k in range(20)]
        load(session, spec, events)
        session.commit()
        # The earlier rule, on the stored rows: the week's events with a draft, in id order.
        in_week = list(session.exec(
            select(Event.event_id)
            .where(col(Event.day) >= dt.date(2026, 11, 16), col(Event.day) <= dt.date(2026, 11, 22),
                   col(Event.draft_text).is_not(None), Event.draft_text != "")
            .order_by(col(Event.id))
        ).all())
        assert len(in_week) == 400
        picked = sorted(int(k) for k in np.random.default_rng(77).choice(400, size=30, replace=False))
        session.expunge_all()
        loaded: list[str] = []

        def count(target: Event, _context: object) -> None:
            loaded.append(target.event_id)

        sa_event.listen(Event, "load", count)
        try:
            made = create_week_run(session=session, week=W47, budget=5, cap=30, seed=77)
        finally:
            sa_event.remove(Event, "load", count)
        assert event_ids_of_run(session, made.run.id) == [in_week[k] for k in picked]  # type: ignore[arg-type]
        assert (made.week.events_with_draft, made.week.drafts_taken) == (400, 30)
        assert sorted(loaded) == sorted(in_week[k] for k in picked)

    def test_empty_week_bad_input_or_taken_name_is_refused(self, session: Session, spec: EvalSpec) -> None:
        load(session, spec, week_events())
        with pytest.raises(PpiError, match=r"^week: no production event with a draft in 2026-W40"):
            create_week_run(session=session, week="2026-W40", budget=10, cap=10)
        with pytest.raises(PpiError, match=r"^budget: must be a positive number"):
            create_week_run(session=session, week=W47, budget=0, cap=10)
        with pytest.raises(PpiError, match=r"^seed: must lie in"):
            create_week_run(session=session, week=W47, budget=1, cap=10, seed=-1)
        assert session.exec(select(func.count()).select_from(Run)).one() == 0
        # a dataset or a run already named like the week
        make_dataset(session, [{"case_id": "c1"}], name="prod-2026-W47")
        with pytest.raises(PpiError, match=r"^week: a dataset named prod-2026-W47 exists already"):
            create_week_run(session=session, week=W47, budget=1, cap=10)
        other = make_dataset(session, [{"case_id": "c1"}], name="other")
        make_run(session, other, [{"case_id": "c1", "draft_text": "Hi"}], name="prod-2026-W48")
        load(session, spec, [ev("2026-11-24", 10, event_id="w48", ticket_id="t48")])
        with pytest.raises(PpiError, match=r"^week: a run named prod-2026-W48 exists already"):
            create_week_run(session=session, week="2026-W48", budget=1, cap=10)


# --- the weekly estimate ------------------------------------------------------------------------------

# (factual, citation, tone, completeness) of four human grades and their overall quality (factual pass 5, fail 1):
LOW = [("fail", 2, 3, 2), ("fail", 3, 3, 3), ("pass", 2, 2, 3), ("pass", 2, 2, 1)]  # 2.0, 2.5, 3.0, 2.5: mean 2.5
MIXED = [("fail", 3, 3, 4), ("fail", 4, 4, 4), ("pass", 3, 3, 4), ("pass", 3, 3, 2)]  # 2.75, 3.25, 3.75, 3.25: mean 3.25
# By hand: all four drafts drawn (budget 4 of 4: pi = 1), so the estimate is the plain mean of the human figures and
# its standard error sqrt(sum of squared deviations) / N = sqrt(0.5) / 4 (each draft its own ticket), with 3 degrees of
# freedom: t(0.975, 3) = 3.18245, half-width 0.56258.
HALF = 3.182446305284263 * 0.5**0.5 / 4


def graded_week(session: Session, spec: EvalSpec, grades: list[tuple[str, int, int, int]], *, week: str = W47, pending: int = 0) -> int:
    """Make a week run of four drafts, judge them, draw all four, and give them the human grades (but the last `pending`)."""
    monday = parse_week(week).start
    load(session, spec, [ev(monday + dt.timedelta(days=k), 10, event_id=f"{week}-{k}", ticket_id=f"{week}-t{k}") for k in range(4)])
    run_id = create_week_run(session=session, week=week, budget=4, cap=100, seed=3).run.id
    assert run_id is not None
    drafts = session.exec(select(Draft.id).where(Draft.run_id == run_id).order_by(col(Draft.id))).all()
    judge_all(session, run_id)
    draw_sample(session=session, run_id=run_id, budget=4, judge_version=JUDGE, seed=11)
    assert all(s.drawn and s.pi == 1.0 for s in run_sample(session=session, run_id=run_id) or [])
    for d, (fa, c, t, comp) in list(zip(drafts, grades, strict=True))[: 4 - pending]:
        session.add(FinalGrade(draft_id=d, factual_accuracy=fa, citation_relevance=c, tone=t, completeness=comp, source="agreement"))  # type: ignore[arg-type]
    session.flush()
    return run_id


def quality(estimate: float, low: float, high: float, *, pending: int = 0, sampled: bool = True, target: float = 3.5) -> WeekQuality:
    """A week whose tone has this estimate (the other criteria well above 3.5), against a team's target for tone."""
    e = Estimate(estimate, low, high, 0.1, 10, 0.95, (1.0,), estimate, 0.1, 20, 50)
    high_e = Estimate(4.5, 4.2, 4.8, 0.1, 10, 0.95, (1.0,), 4.5, 0.1, 20, 50)
    criteria = (
        WeekCriterion("factual_accuracy", "Factual accuracy", high_e, 3.5),
        WeekCriterion("tone", "Tone appropriateness", e, target),
    )
    return WeekQuality(W47, dt.date(2026, 11, 16), dt.date(2026, 11, 22), 1, "prod-2026-W47", 50, sampled, 20, 20 - pending, pending, high_e, criteria)


class TestWeeklyQuality:
    def test_the_estimate_is_the_hand_worked_mean_and_interval(
        self, session: Session, spec: EvalSpec, api_as: Clients
    ) -> None:
        # the team's targets (its plan file's team_targets), one per criterion: not the plan's
        assert quality_targets(spec) == {"factual_accuracy": 3.5, "citation_relevance": 3.5, "tone": 3.5, "completeness": 3.5}
        graded_week(session, spec, LOW)
        [week] = weekly_quality(session=session, spec=spec)
        assert week.estimate is not None and not week.provisional
        assert week.estimate.estimate == pytest.approx(2.5, abs=1e-12)
        assert (week.estimate.low, week.estimate.high) == (pytest.approx(2.5 - HALF, abs=1e-9), pytest.approx(2.5 + HALF, abs=1e-9))
        assert pytest.approx(stats.t.ppf(0.975, 3) * np.sqrt(0.5) / 4) == HALF
        # the API's list gives the same figures; labelers may not read it
        session.commit()
        answer = api_as("support_lead").get(WEEKS_API)
        assert answer.status_code == 200
        [listed] = answer.json()
        assert listed["week"] == W47 and listed["estimate"] == pytest.approx(2.5)
        assert listed["high"] == pytest.approx(2.5 + HALF) and listed["below_target"] is True
        assert listed["provisional"] is False and "target" not in listed  # overall quality has no target
        assert listed["estimand"] == "superpopulation"  # issue 34: a week's interval is about drafts like the week's
        crits = {c["key"]: c for c in listed["criteria"]}
        assert set(crits) == {"factual_accuracy", "citation_relevance", "tone", "completeness"}
        assert all(c["team_target"] == 3.5 for c in crits.values())
        # LOW's citation relevance 2, 3, 2, 2: mean 2.25, all four drawn; its upper bound is far below 3.5
        assert crits["citation_relevance"]["estimate"] == pytest.approx(2.25) and crits["citation_relevance"]["below_target"] is True
        assert api_as("labeler").get(WEEKS_API).status_code == 403

    def test_figures_kept_by_content_are_the_fresh_ones_and_follow_a_changed_grade(self, session: Session, spec: EvalSpec) -> None:
        """The kept week figures (decision 0010) equal a fresh computation, and a changed grade is a new answer at once."""
        run_id = graded_week(session, spec, MIXED)
        [first] = weekly_quality(session=session, spec=spec)
        stored = stored_sample(session=session, run_id=run_id)
        assert stored is not None
        fresh_tone = figure_of(spec, stored, "tone", estimand="superpopulation").estimate
        tone = {c.key: c.estimate for c in first.criteria}["tone"]
        assert tone is not None and fresh_tone is not None and tone.estimate == fresh_tone.estimate and tone.low == fresh_tone.low
        [again] = weekly_quality(session=session, spec=spec)
        assert again.estimate == first.estimate and again.criteria == first.criteria
        # a lead changes one final grade: the week's figures change on the next read
        grade = session.exec(select(FinalGrade).join(Draft, col(Draft.id) == FinalGrade.draft_id).where(Draft.run_id == run_id)).first()
        assert grade is not None
        grade.tone = 5.0
        session.add(grade)
        session.flush()
        [changed] = weekly_quality(session=session, spec=spec)
        changed_tone = {c.key: c.estimate for c in changed.criteria}["tone"]
        assert changed_tone is not None and changed_tone.estimate > tone.estimate

    def test_the_chart_shows_the_estimators_figures_on_the_stored_rows(self, session: Session, spec: EvalSpec) -> None:
        run_id = graded_week(session, spec, MIXED)
        graded_week(session, spec, LOW, week="2026-W48", pending=1)
        stored = stored_sample(session=session, run_id=run_id)
        assert stored is not None
        # the estimator called directly on the rows: MIXED's tone grades 3, 4, 3, 3 against the judge's 4
        human = np.array([t for _, _, t, _ in MIXED], dtype=float)
        direct = estimate_mean(make_sample(judge=np.full(4, 4.0), human=human, drawn=np.ones(4, bool), pi=np.ones(4), cluster=stored.tickets), seed=stored.seed, estimand="superpopulation")
        assert direct.estimate == pytest.approx(3.25)
        weeks = weekly_quality(session=session, spec=spec)
        fig = quality_figure(weeks, quality_targets(spec))
        by_name = {t["name"]: t for t in fig["data"]}
        assert list(by_name) == ["Factual accuracy", "Citation relevance", "Tone appropriateness", "Completeness"]
        tone = by_name["Tone appropriateness"]
        assert tone["x"] == [W47, "2026-W48"] and tone["y"][0] == pytest.approx(direct.estimate, abs=1e-12)
        assert tone["error_y"]["array"][0] == pytest.approx(direct.high - direct.estimate, abs=1e-12)
        assert tone["error_y"]["arrayminus"][0] == pytest.approx(direct.estimate - direct.low, abs=1e-12)
        # factual accuracy as the gate reads it: MIXED passes 2 of 4, so 1 + 4 x 0.5 = 3.0
        assert by_name["Factual accuracy"]["y"][0] == pytest.approx(3.0)
        # the week with a grade pending is drawn hollow (provisional)
        assert tone["marker"]["symbol"] == ["diamond", "diamond-open"]
        assert fig["layout"]["scattermode"] == "group"
        [target] = fig["layout"]["shapes"]
        assert (target["y0"], target["y1"]) == (3.5, 3.5) and target["name"].startswith("the team's target: above 3.5 (every criterion)")

    @pytest.mark.parametrize(
        ("targets", "message"),
        [
            ("    factual_accuracy: 3.5\n    citation_relevance: 3.5\n    tone: 3.5\n", "missing a target for 'completeness'"),
            ("    factual_accuracy: 3.5\n    citation_relevance: 3.5\n    tone: 3.5\n    completeness: 3.5\n    speed: 3\n", "'speed' is not a rubric criterion"),
            ("    factual_accuracy: 3.5\n    citation_relevance: 3.5\n    tone: 7\n    completeness: 3.5\n", "the target of 'tone' must lie within 1..5"),
        ],
    )
    def test_a_bad_team_target_is_refused_naming_the_key(self, tmp_path: Path, targets: str, message: str) -> None:
        from tests.conftest import SPEC_PATH
        from webapp.core.spec import SpecError, load_spec

        text = SPEC_PATH.read_text()
        shipped = "    factual_accuracy: 3.5\n    citation_relevance: 3.5\n    tone: 3.5\n    completeness: 3.5\n"
        assert text.count(shipped) == 1
        bad = tmp_path / "spec.yaml"
        bad.write_text(text.replace(shipped, targets))
        with pytest.raises(SpecError, match=r"key 'team_targets.weekly_human_quality'") as err:
            load_spec(bad)
        assert message in str(err.value)

    def test_the_targets_are_the_teams_setting_per_criterion(self, session: Session, spec: EvalSpec) -> None:
        """LOW read as the gate reads it: factual 1 + 4 x 0.5 = 3.0, citation 2.25, tone 2.5, completeness 2.25 (all drawn)."""
        graded_week(session, spec, LOW)
        [week] = weekly_quality(session=session, spec=spec)
        figures = {c.key: c.estimate.estimate for c in week.criteria if c.estimate}
        assert figures == pytest.approx({"factual_accuracy": 3.0, "citation_relevance": 2.25, "tone": 2.5, "completeness": 2.25})
        # completeness (2, 3, 3, 1) spreads wider than citation (2, 3, 2, 2) and tone (3, 3, 2, 2): its upper bound reaches 3.5
        assert week.below_target and [c.key for c in week.below_criteria] == ["citation_relevance", "tone"]
        # a team that sets its targets lower (here 1.5, below every lower bound) gets no alert
        lower = spec.model_copy(update={"team_targets": spec.team_targets.model_copy(update={"weekly_human_quality": dict.fromkeys(figures, 1.5)})})
        [week] = weekly_quality(session=session, spec=lower)
        assert not week.below_target and [c.target for c in week.criteria] == [1.5] * 4
        assert week.above_targets == all(c.estimate is not None and c.estimate.low > 1.5 for c in week.criteria)
        # only tone's target raised to 4.5: only tone alerts
        one = dict.fromkeys(figures, 1.0) | {"tone": 4.5}
        tone_only = spec.model_copy(update={"team_targets": spec.team_targets.model_copy(update={"weekly_human_quality": one})})
        [week] = weekly_quality(session=session, spec=tone_only)
        assert [c.key for c in week.below_criteria] == ["tone"]

    def test_overall_quality_counts_factual_pass_5_and_fail_1(self, session: Session, spec: EvalSpec) -> None:
        # one week graded all "pass, 5, 5, 5" but one "fail, 5, 5, 5": (5+5+5+5)/4 = 5 three times, (1+5+5+5)/4 = 4
        graded_week(session, spec, [("pass", 5, 5, 5)] * 3 + [("fail", 5, 5, 5)])
        [week] = weekly_quality(session=session, spec=spec)
        assert week.estimate is not None and week.estimate.estimate == pytest.approx((5 + 5 + 5 + 4) / 4)


class TestAlertRule:
    @pytest.mark.parametrize(
        ("high", "pending", "sampled", "fires"),  # a week not sampled yet never fires
        [(3.4, 0, True, True), (3.49, 0, True, True), (3.5, 0, True, False), (3.6, 0, True, False),
         (3.4, 2, True, False), (2.2, 0, False, False)],
    )
    def test_fires_only_when_a_final_upper_bound_is_below_the_target(
        self, high: float, pending: int, sampled: bool, fires: bool
    ) -> None:
        assert quality(high - 0.3, high - 0.6, high, pending=pending, sampled=sampled).below_target is fires

    def test_the_alert_goes_through_the_ledger_and_outbox(
        self, session: Session, spec: EvalSpec, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # week 49 runs to 6 December: ingest it as of 7 December (events more than a day ahead are refused),
        # and evaluate the alerts at the same moment: on the wall clock's later days the online metrics'
        # own alerts (days without events after the 6th) joined the outbox and the count below failed
        now = dt.datetime(2026, 12, 7, 12, tzinfo=dt.UTC)
        monkeypatch.setattr("webapp.metrics.ingest.utcnow", lambda: now)
        alerts_channels.add_channel(session=session, name="quality", kind="file", target=str(tmp_path / "n.jsonl"), topics=["human_quality"])
        alerts_channels.add_channel(session=session, name="online", kind="file", target=str(tmp_path / "m.jsonl"), topics=["metrics"])
        graded_week(session, spec, LOW)  # 2.5 [1.94, 3.06]: below 3.5
        graded_week(session, spec, MIXED, week="2026-W48")  # 3.25 [2.69, 3.81]: the estimate is below, the interval is not
        graded_week(session, spec, LOW, week="2026-W49", pending=1)  # provisional
        result = alerts_outbox.record_transitions(session=session, spec=spec, now=now)
        quality_items = [t for t in result.transitions if t["kind"] == "human_quality"]
        assert [t["key"] for t in quality_items] == ["human_quality:2026-W47:firing"]
        item = quality_items[0]
        w47 = weekly_quality(session=session, spec=spec)[0]
        worst = min((c for c in w47.criteria if c.estimate), key=lambda c: c.estimate.high - c.target)  # type: ignore[union-attr]
        assert worst.estimate is not None and item["value"] == pytest.approx(worst.estimate.high) and item["op"] == "<"
        assert item["threshold"] == 3.5 and item["threshold_text"] == "above 3.5 (the team's target)"
        assert "a criterion's 95% interval lies below the team's target" in item["rule"]
        assert item["days"][0] == "2026-11-16" and item["days"][-1] == "2026-11-22"
        assert item["path"] == "/metrics?start=2026-11-16&end=2026-11-22#quality-weekly"
        [message] = [m for m in result.messages if m.payload["items"][0]["kind"] == "human_quality"]
        channel = session.get(AlertChannel, message.channel_id)
        assert channel is not None and channel.name == "quality"  # the "metrics" group is the online metrics only
        # recorded once: the next pass finds nothing new
        assert [t for t in alerts_outbox.record_transitions(session=session, spec=spec, now=now).transitions if t["kind"] == "human_quality"] == []
        assert session.exec(select(func.count()).select_from(AlertOutbox)).one() == 1

    def test_periodic_pass_fires_and_regrading_resolves(self, session: Session, spec: EvalSpec) -> None:
        run_id = graded_week(session, spec, LOW)
        # passes after events leave it to the periodic pass
        alerts_outbox.notify_changes(session=session, spec=spec)  # what an ingested batch triggers
        assert session.exec(select(func.count()).select_from(AlertNotice).where(AlertNotice.kind == "human_quality")).one() == 0
        result = alerts_outbox.record_transitions(session=session, spec=spec)  # the periodic pass
        assert [t["key"] for t in result.transitions if t["kind"] == "human_quality"] == ["human_quality:2026-W47:firing"]

        def regrade(score: int) -> list[dict[str, object]]:
            finals = select(FinalGrade).join(Draft, col(Draft.id) == FinalGrade.draft_id)
            for f in session.exec(finals.where(Draft.run_id == run_id)).all():
                f.tone, f.completeness, f.citation_relevance = score, score, score
                session.add(f)
            session.flush()
            return alerts_outbox.record_transitions(session=session, spec=spec).transitions

        # the lead corrects the final grades upwards (as after adjudication): the week's interval now includes 3.5
        assert [t["key"] for t in regrade(4)] == ["human_quality:2026-W47:resolved"]
        # fired and resolved: nothing more for that week, even if its grades fall again
        assert regrade(1) == []


# --- API, CLI, pages ----------------------------------------------------------------------------------


class TestApi:
    def test_only_the_lead_creates_a_week_once_and_a_browser_needs_the_csrf_token(
        self, session: Session, spec: EvalSpec, api_as: Clients, client_as: Clients
    ) -> None:
        load(session, spec, week_events())
        body = {"week": W47, "budget": 2}
        for role in ["pm", "support_lead", "labeler", "admin"]:
            assert api_as(role).post(WEEKS_API, json=body).status_code == 403, role
        browser = client_as("lead")
        token = browser.headers.pop("X-CSRF-Token")  # sent on every call by the signed-in client: not now
        refused = browser.post(WEEKS_API, json=body)
        assert refused.status_code == 403 and "CSRF" in refused.json()["detail"]
        assert browser.post(WEEKS_API, json=body, headers={"X-CSRF-Token": "x" + token}).status_code == 403
        assert session.exec(select(func.count()).select_from(Run)).one() == 0
        w48 = {"week": "2026-W48", "budget": 2}  # the week's one event, "after"
        ok = browser.post(WEEKS_API, json=w48, headers={"X-CSRF-Token": csrf_for(browser)})
        assert ok.status_code == 201
        lead = api_as("lead")
        made = lead.post(WEEKS_API, json={"week": W47, "budget": 2, "seed": 5})
        assert made.status_code == 201, made.text
        assert made.json() | {"run_id": 0} == {
            "created": True, "week": W47, "run_id": 0, "run_name": "prod-2026-W47", "events_with_draft": 4,
            "drafts_taken": 4, "cap": 1000, "cap_seed": 5, "budget": 2.0,
        }
        again = lead.post(WEEKS_API, json=body)
        assert again.status_code == 200 and again.json()["created"] is False and again.json()["run_id"] == made.json()["run_id"]
        bad = lead.post(WEEKS_API, json={"week": "2026-W99", "budget": 2})
        assert bad.status_code == 422 and bad.json()["detail"] == "week: 2026 has no ISO week 99"


class TestCli:
    def test_creates_then_reports_and_the_sample_uses_the_stored_budget(
        self, monkeypatch: pytest.MonkeyPatch, db_url: str, session: Session, spec: EvalSpec
    ) -> None:
        from webapp.app.cli import app as cli_app

        monkeypatch.setenv("DRAFTDESK_DATABASE_URL", db_url)
        monkeypatch.setenv("DRAFTDESK_MODE", "dev")
        monkeypatch.setenv("DRAFTDESK_SECRET_KEY", TEST_SECRET)
        monkeypatch.setenv("DRAFTDESK_PPI_WEEKLY_DRAFT_CAP", "3")

        def ppi(*args: str) -> Result:
            return CliRunner().invoke(cli_app, ["ppi", *args])

        load(session, spec, week_events())
        first = ppi("production-week", "--week", W47, "--budget", "100", "--seed", "7")
        assert first.exit_code == 0, first.output
        assert "created run prod-2026-W47: 3 drafts of 4 production events with a draft (cap 3, seed 7)" in first.output
        again = ppi("production-week", "--week", W47, "--budget", "100")
        assert again.exit_code == 0 and "2026-W47 has its run already: prod-2026-W47 (3 drafts), nothing changed" in again.output
        session.expire_all()
        assert session.exec(select(func.count()).select_from(Run)).one() == 1
        out = ppi("production-week", "--week", "2026/47", "--budget", "10")
        assert out.exit_code == 2 and "week: expected an ISO week like 2026-W47" in out.output
        judge_all(session, session.exec(select(Run.id)).one())  # type: ignore[arg-type]
        session.commit()
        none = ppi("production-sample", "--week", "2026-W40", "--judge-version", JUDGE)
        assert none.exit_code == 2 and "week: 2026-W40 has no run yet" in none.output
        out = ppi("production-sample", "--week", W47, "--judge-version", JUDGE, "--seed", "4")
        assert out.exit_code == 0, out.output
        # the stored budget 100 over 3 drafts: every pi is 1, all three are drawn
        assert "sample drawn: 3 of 3 drafts to grade (expected 3, seed 4)" in out.output

    def test_the_sample_reads_the_runs_only_judge_version_when_none_is_given(self, session: Session, spec: EvalSpec) -> None:
        load(session, spec, week_events())
        run_id = create_week_run(session=session, week=W47, budget=100, cap=10).run.id
        assert run_id is not None
        with pytest.raises(PpiError, match=r"^judge_version: give one; the week's run has judge scores of none: run the judge pass first"):
            draw_week_sample(session=session, week=W47)
        judge_all(session, run_id, "judge-b")
        judge_all(session, run_id, "judge-a")
        with pytest.raises(PpiError, match=r"^judge_version: give one; the week's run has judge scores of judge-a, judge-b$"):
            draw_week_sample(session=session, week=W47)
        drawn = draw_week_sample(session=session, week=W47, judge_version="judge-a", seed=4)
        assert (drawn.drawn, drawn.drafts) == (4, 4)
        # with one version (W48's run, of the one event "after") the sample defaults to it
        w48 = create_week_run(session=session, week="2026-W48", budget=100, cap=10).run.id
        judge_all(session, w48)  # type: ignore[arg-type]
        draw_week_sample(session=session, week="2026-W48", seed=4)
        stored = stored_sample(session=session, run_id=w48)  # type: ignore[arg-type]
        assert stored is not None and stored.judge_version == JUDGE


class TestMetricsPage:
    def test_the_page_chart_carries_the_estimators_figures(
        self, session: Session, spec: EvalSpec, client_as: Clients
    ) -> None:
        # without weeks the page says how to make one; labelers may not open it
        page = client_as("pm").get("/metrics")
        assert page.status_code == 200 and "draftdesk ppi production-week --week YYYY-Www --budget N" in page.text
        assert client_as("labeler").get("/metrics").status_code == 403
        graded_week(session, spec, LOW)
        graded_week(session, spec, MIXED, week="2026-W48", pending=1)
        session.commit()
        page = client_as("support_lead").get("/metrics")
        assert page.status_code == 200
        m = re.search(r'id="chart-human-quality" data-metric="human_quality" data-figure="([^"]*)"', page.text)
        assert m is not None
        fig = json.loads(html.unescape(m.group(1)))
        weeks = {w.week: w for w in weekly_quality(session=session, spec=spec)}
        by_name = {t["name"]: t for t in fig["data"]}
        citation = next(c for c in weeks[W47].criteria if c.key == "citation_relevance")
        e = citation.estimate
        assert e is not None and by_name["Citation relevance"]["x"][0] == W47
        assert by_name["Citation relevance"]["y"][0] == pytest.approx(e.estimate, abs=1e-12) == pytest.approx(2.25)
        # below the team's target: drawn in the alert colour
        assert by_name["Citation relevance"]["marker"]["color"][0] == "#b42318"
        assert '<tr data-week="2026-W47">' in page.text and "alert: below the team's target" in page.text
        assert "1 grade pending" in page.text and "the team's targets" in page.text
        assert "the team's target &gt; 3.5" in page.text
        assert f"<strong>{e.estimate:.2f}</strong> [{e.low:.2f}, {e.high:.2f}] <span class=\"badge fail\">below</span>" in page.text
        assert "about drafts like the week's (superpopulation)" in page.text
