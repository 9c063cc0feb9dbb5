"""One ISO week of production drafts as a run, so the judge pass, sampler, grading queue and estimator apply unchanged.

A week's run (`prod-2026-W47`) holds one draft per production event of that week (Monday to
Sunday, the event's `day` in the spec's time zone) that had a draft. Its dataset (same name) holds
one case per ticket: the customer's message(s) as stored with the events, the intent and plan.

Decisions (docs/ppi.md, "Production weeks"):
- One case per ticket, one draft per event (several events of a ticket are its samples 0, 1, ...):
  the estimator clusters by case, so a ticket drafted twice counts as one cluster, as in eval runs.
- At most `cap` drafts (the setting DRAFTDESK_PPI_WEEKLY_DRAFT_CAP) go into the run, because the
  judge grades every draft of a run: a busier week's drafts are drawn uniformly at random without
  replacement (numpy `default_rng(cap_seed).choice`, events in id order), and the seed is stored.
  A uniform subsample of the week is itself a random sample of the week's drafts, so the estimate
  still stands for the whole week. The week's event ids are selected first and only the kept
  events are loaded as rows (`kept_positions` over the ids in id order: the same draw as when
  every row was loaded, so a stored seed keeps its drafts).
- What the agent sent is not copied into the case or the draft: graders grade blind.
- A week that has its run is reported, never made twice (one `ppi_production_week` row per week).
- Each criterion is estimated as the pilot gate reads it (factual accuracy as pass = 5, fail = 1)
  against the team's target (`team_targets.weekly_human_quality`, labelled so: issue 34, the plan
  sets no weekly target). Overall quality (the mean of the four per draft) has no target.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import pickle
import re
import secrets
import threading
from collections import Counter, OrderedDict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

import numpy as np
from sqlalchemy import ColumnElement
from sqlmodel import Session, col, select

from webapp.core.spec import EvalSpec
from webapp.core.timeutil import utcnow
from webapp.datasets.models import Dataset, EvalCase
from webapp.metrics.models import Event
from webapp.ppi.estimator import Estimate
from webapp.ppi.models import PpiJudgeScore, PpiProductionWeek
from webapp.ppi.report import WEEK_ESTIMAND, StoredSample, decide, figure_of, stored_sample
from webapp.ppi.schemas import WeekCriterionPublic, WeekQualityPublic
from webapp.ppi.service import SEED_LIMIT, PpiError, SampleSummary, draw_sample
from webapp.ppi.signals import OVERALL
from webapp.runs.models import PRODUCTION_SOURCE, Draft, Run

_WEEK = re.compile(r"^(\d{4})-W(\d{2})$")
RUN_PREFIX = "prod-"


@dataclass(frozen=True)
class IsoWeek:
    """An ISO week: its label ("2026-W47") and its Monday and Sunday."""

    label: str
    start: dt.date
    end: dt.date


def parse_week(text: str) -> IsoWeek:
    """Read an ISO week written YYYY-Www ("2026-W47"); raise PpiError naming the field otherwise."""
    m = _WEEK.match(text.strip())
    if m is None:
        raise PpiError(f"week: expected an ISO week like 2026-W47, got {text!r}")
    year, week = int(m.group(1)), int(m.group(2))
    try:
        monday = dt.date.fromisocalendar(year, week, 1)
    except ValueError:
        raise PpiError(f"week: {year} has no ISO week {week}") from None
    return IsoWeek(label=f"{year}-W{week:02d}", start=monday, end=monday + dt.timedelta(days=6))


def resolve_week(text: str, *, today: dt.date) -> IsoWeek:
    """Read a week as parse_week does, or "last": the last complete ISO week before `today` (a weekly job's default)."""
    if text.strip().lower() == "last":
        return week_of(today - dt.timedelta(days=today.isoweekday()))
    return parse_week(text)


def week_of(day: dt.date) -> IsoWeek:
    """Return the ISO week a day falls in."""
    year, week, _ = day.isocalendar()
    return parse_week(f"{year}-W{week:02d}")


def run_name(week: IsoWeek) -> str:
    """Return the name of a week's run (and of its dataset): prod-2026-W47."""
    return RUN_PREFIX + week.label


@dataclass(frozen=True)
class WeekRun:
    """A week's run, and whether this call made it (False: it existed already)."""

    created: bool
    week: PpiProductionWeek
    run: Run


def _week_filter(week: IsoWeek) -> tuple[ColumnElement[bool], ...]:
    """The week's production events that had a draft (the event's `day`, Monday to Sunday)."""
    return (col(Event.day) >= week.start, col(Event.day) <= week.end, col(Event.draft_text).is_not(None), col(Event.draft_text) != "")


def week_event_ids(*, session: Session, week: IsoWeek) -> list[int]:
    """Return the ids of the week's production events that had a draft, in id order (ids only: no row is loaded)."""
    return list(session.exec(select(Event.id).where(*_week_filter(week)).order_by(col(Event.id))).all())  # type: ignore[arg-type]


# Ids per IN list when loading the kept events (well under SQLite's and psycopg's parameter limits).
_ID_CHUNK = 500


def events_by_id(*, session: Session, ids: Sequence[int]) -> list[Event]:
    """Load exactly these events as ORM rows, in id order."""
    out: list[Event] = []
    ordered = sorted(ids)
    for k in range(0, len(ordered), _ID_CHUNK):
        chunk = ordered[k : k + _ID_CHUNK]
        out.extend(session.exec(select(Event).where(col(Event.id).in_(chunk)).order_by(col(Event.id))).all())
    return out


def kept_positions(total: int, *, cap: int, seed: int) -> list[int]:
    """Return the positions (in id order) of the events a week's run keeps: all, or `cap` drawn uniformly with the seed."""
    if total <= cap:
        return list(range(total))
    return sorted(int(k) for k in np.random.default_rng(seed).choice(total, size=cap, replace=False))


def _short(intent: str | None) -> str | None:
    # events allow 100 characters of intent, cases and drafts 60
    return None if intent is None else intent[:60]


def _most_common(values: list[str | None]) -> str:
    counted = Counter(v for v in values if v)
    return counted.most_common(1)[0][0] if counted else ""


def _check_week_request(*, budget: float, cap: int, seed: int | None) -> int:
    """Refuse a bad budget, cap or seed (naming the field); return the seed to use (a fresh one when None)."""
    if not budget > 0 or budget != budget or budget == float("inf"):
        raise PpiError("budget: must be a positive number (the expected number of drafts people grade)")
    if cap < 1:
        raise PpiError("cap: must be at least 1")
    if seed is None:
        return secrets.randbelow(SEED_LIMIT)
    if not 0 <= seed < SEED_LIMIT:
        raise PpiError(f"seed: must lie in 0..{SEED_LIMIT - 1}")
    return seed


def _refuse_name_taken(session: Session, name: str) -> None:
    """Refuse a week whose run or dataset name another run or dataset holds."""
    if session.exec(select(Run.id).where(Run.name == name)).first() is not None:
        raise PpiError(f"week: a run named {name} exists already and is not this week's production run; rename it first")
    if session.exec(select(Dataset.id).where(Dataset.name == name)).first() is not None:
        raise PpiError(f"week: a dataset named {name} exists already and is not this week's production cases; rename it first")


def _week_dataset_and_run(
    session: Session, *, iso: IsoWeek, taken: list[Event], tickets: int, events_with_draft: int, stamp: dt.datetime
) -> tuple[Dataset, Run]:
    """Add the week's dataset (one case per ticket) and its run, named after the week."""
    name = run_name(iso)
    digest = hashlib.sha256("\n".join(e.event_id for e in taken).encode()).hexdigest()
    dataset = Dataset(
        name=name, version=1, sha256=f"sha256:{digest}", format="events", count=tickets,
        source_path=f"production events {iso.start} – {iso.end}", imported_at=stamp,
    )
    session.add(dataset)
    session.flush()
    assert dataset.id is not None
    run = Run(
        name=name,
        dataset_id=dataset.id,
        model=_most_common([e.model_version for e in taken]),
        prompt_version=_most_common([e.prompt_version for e in taken]),
        notes=f"Production drafts of {iso.label} ({len(taken)} of {events_with_draft} events with a draft).",
        source=PRODUCTION_SOURCE,
        created_at=stamp,
    )
    session.add(run)
    session.flush()
    return dataset, run


def _ticket_case(*, dataset_id: int, position: int, ticket: str, events: list[Event], week: str) -> EvalCase:
    """Return the case of one ticket: its last customer message, and every one when it was drafted more than once."""
    first = events[0]
    messages = [e for e in events if e.customer_message]
    return EvalCase(
        dataset_id=dataset_id,
        position=position,
        case_id=ticket,
        input=(messages[-1].customer_message or "") if messages else "",
        conversation=[
            {"role": "customer", "at": e.occurred_at.isoformat(), "text": e.customer_message} for e in messages
        ] if len(messages) > 1 else None,
        intent=_short(first.intent),
        extra={"source": "production", "week": week, "events": [e.event_id for e in events], "plan": first.plan},
    )


def _event_draft(*, run_id: int, case_pk: int, sample_index: int, event: Event, stamp: dt.datetime) -> Draft:
    """Return the draft one production event carried, as a draft of the week's run."""
    return Draft(
        run_id=run_id,
        case_pk=case_pk,
        sample_index=sample_index,
        draft_text=event.draft_text,
        intent=_short(event.intent),
        confidence=event.confidence,
        latency_ms=None if event.latency_ms is None else round(event.latency_ms),
        cost_usd=event.cost_usd,
        raw_output={"event_id": event.event_id},
        created_at=stamp,
    )


def _add_cases_and_drafts(
    session: Session, *, dataset_id: int, run_id: int, by_ticket: dict[str, list[Event]], week: str, stamp: dt.datetime
) -> None:
    """Add one case per ticket and one draft per kept event."""
    for position, (ticket, ticket_events) in enumerate(by_ticket.items()):
        case = _ticket_case(dataset_id=dataset_id, position=position, ticket=ticket, events=ticket_events, week=week)
        session.add(case)
        session.flush()
        assert case.id is not None
        for k, e in enumerate(ticket_events):
            session.add(_event_draft(run_id=run_id, case_pk=case.id, sample_index=k, event=e, stamp=stamp))


def create_week_run(
    *,
    session: Session,
    week: str,
    budget: float,
    cap: int,
    seed: int | None = None,
    created_by: int | None = None,
    now: dt.datetime | None = None,
) -> WeekRun:
    """Turn one ISO week of production drafts into a run (at most `cap` drafts, drawn uniformly when more); idempotent."""
    iso = parse_week(week)
    chosen_seed = _check_week_request(budget=budget, cap=cap, seed=seed)
    existing = session.exec(select(PpiProductionWeek).where(PpiProductionWeek.week == iso.label)).first()
    if existing is not None:
        run = session.get(Run, existing.run_id)
        assert run is not None
        return WeekRun(created=False, week=existing, run=run)
    _refuse_name_taken(session, run_name(iso))
    # Ids first, then only the kept rows: a week of 350,000 events is 350,000 integers, not ORM rows.
    ids = week_event_ids(session=session, week=iso)
    if not ids:
        raise PpiError(f"week: no production event with a draft in {iso.label} ({iso.start} – {iso.end})")
    taken = events_by_id(session=session, ids=[ids[k] for k in kept_positions(len(ids), cap=cap, seed=chosen_seed)])
    stamp = now or utcnow()
    by_ticket: dict[str, list[Event]] = {}
    for e in taken:
        by_ticket.setdefault(e.ticket_id, []).append(e)
    dataset, run = _week_dataset_and_run(
        session, iso=iso, taken=taken, tickets=len(by_ticket), events_with_draft=len(ids), stamp=stamp
    )
    assert dataset.id is not None and run.id is not None
    _add_cases_and_drafts(session, dataset_id=dataset.id, run_id=run.id, by_ticket=by_ticket, week=iso.label, stamp=stamp)
    row = PpiProductionWeek(
        week=iso.label, run_id=run.id, events_with_draft=len(ids), drafts_taken=len(taken), cap=cap,
        cap_seed=chosen_seed, budget=float(budget), created_by=created_by, created_at=stamp,
    )
    session.add(row)
    session.flush()
    return WeekRun(created=True, week=row, run=run)


def draw_week_sample(
    *, session: Session, week: str, judge_version: str | None = None, seed: int | None = None, now: dt.datetime | None = None
) -> SampleSummary:
    """Draw a week's human-grading sample with the budget stored when its run was made (after the judge pass).

    Without `judge_version`, the one judge version that scored the week's run is used (a weekly job
    need not know it); none, or several, is refused with the versions named.
    """
    iso = parse_week(week)
    row = session.exec(select(PpiProductionWeek).where(PpiProductionWeek.week == iso.label)).first()
    if row is None:
        raise PpiError(f"week: {iso.label} has no run yet; make it first (draftdesk ppi production-week)")
    if judge_version is None:
        versions = sorted(set(session.exec(select(PpiJudgeScore.judge_version).where(PpiJudgeScore.run_id == row.run_id))))
        if len(versions) != 1:
            found = ", ".join(versions) if versions else "none: run the judge pass first (prompt-evaluator judge-run)"
            raise PpiError(f"judge_version: give one; the week's run has judge scores of {found}")
        judge_version = versions[0]
    return draw_sample(session=session, run_id=row.run_id, budget=row.budget, judge_version=judge_version, seed=seed, now=now)


# --- the weekly estimate ------------------------------------------------------------------------------


@dataclass(frozen=True)
class WeekCriterion:
    """One rubric criterion of a week, as the pilot gate reads it (factual accuracy: pass = 5, fail = 1), against the team's target."""

    key: str
    name: str
    estimate: Estimate | None  # None until two drawn drafts have final grades
    target: float  # the team's target (spec: team_targets.weekly_human_quality), on the same 1-5 reading
    rounds: int = 1  # the week's sample rounds: a further round was drawn after its figures were read

    @property
    def bounds(self) -> tuple[float, float] | None:
        """Return the alert's bounds: the 95% interval of a one-round week, the confidence sequence's after a further round.

        Decision (issue 43): the alert fires only on a final week, so a one-round week is read once,
        on a sample sized before grading (one look); a further round drawn after reading it is the
        look-again loop, read through `webapp.ppi.report.decide`.
        """
        e = self.estimate
        if e is None or self.rounds <= 1:
            return None if e is None else (e.low, e.high)
        call = decide(e, self.target, value_range=(1.0, 5.0))
        return (e.low, e.high) if call.low is None or call.high is None else (call.low, call.high)

    @property
    def below(self) -> bool:
        """Tell whether the criterion's upper bound (`bounds`) is below the team's target (strictly)."""
        return (b := self.bounds) is not None and b[1] < self.target

    @property
    def above(self) -> bool:
        """Tell whether the criterion's lower bound (`bounds`) is above the team's target."""
        return (b := self.bounds) is not None and b[0] > self.target


@dataclass(frozen=True)
class WeekQuality:
    """One production week's human-graded quality: overall and per criterion with 95% intervals, and the sample's state."""

    week: str
    start: dt.date
    end: dt.date
    run_id: int
    run_name: str
    drafts: int
    sampled: bool  # the sample has been drawn (needs the judge's scores of every draft first)
    drawn: int
    graded: int
    pending: int
    estimate: Estimate | None  # overall quality (mean of the four criteria); None until two drawn drafts have final grades
    criteria: tuple[WeekCriterion, ...] = ()
    updating: bool = False  # read stored, its inputs changed since (or none stored yet): webapp/ppi/stored_figures.py

    @property
    def provisional(self) -> bool:
        """Tell whether the figure may still move: drawn drafts still wait for their final grades (or none are drawn)."""
        return not self.sampled or self.pending > 0

    @property
    def below_criteria(self) -> list[WeekCriterion]:
        """Return the criteria whose final upper bound (`WeekCriterion.bounds`) is below the team's target (none while provisional)."""
        return [] if self.provisional else [c for c in self.criteria if c.below]

    @property
    def below_target(self) -> bool:
        """Tell whether the week's alert fires: a final week with a criterion whose upper bound (`WeekCriterion.bounds`) is below its target.

        Decision: only final weeks fire (pending grades leave the interval built on a part of the sample, which is
        no longer a random one), and only strictly below: an upper bound equal to the target still allows it.
        """
        return bool(self.below_criteria)

    @property
    def above_targets(self) -> bool:
        """Tell whether a final week has every criterion's lower bound (`WeekCriterion.bounds`) above its team's target."""
        return not self.provisional and bool(self.criteria) and all(c.above for c in self.criteria)


def quality_targets(spec: EvalSpec) -> dict[str, float]:
    """Return the team's weekly targets per criterion (team_targets.weekly_human_quality; not the plan's)."""
    return dict(spec.team_targets.weekly_human_quality)


def _on_gate_scale(spec: EvalSpec, key: str, e: Estimate | None) -> Estimate | None:
    """Return a criterion's estimate as the pilot gate reads it: factual accuracy's pass share as the pass/fail scores' average."""
    if e is None or key != "factual_accuracy":
        return e
    g = spec.gates.pilot
    lo, span = g.factual_fail_score, g.factual_pass_score - g.factual_fail_score
    graded = None if e.graded_sum is None else e.n_labels * lo + span * e.graded_sum
    return replace(e, estimate=lo + span * e.estimate, low=lo + span * e.low, high=lo + span * e.high, se=span * e.se, graded_sum=graded)


def week_criteria(spec: EvalSpec, stored: StoredSample | None) -> tuple[WeekCriterion, ...]:
    """Return each rubric criterion's figure of a week's sample against the team's target."""
    targets = quality_targets(spec)
    return tuple(
        WeekCriterion(
            c.key, c.name,
            None if stored is None else _on_gate_scale(spec, c.key, figure_of(spec, stored, c.key, estimand=WEEK_ESTIMAND).estimate),
            targets[c.key],
            1 if stored is None else stored.rounds,
        )
        for c in spec.rubric.criteria
    )


# A week's figures are a pure function of its stored sample and the spec, and /metrics asks for them
# twice per visit (the chart, the firing-alerts count) while the learned predictor cross-fits a ridge
# per figure: kept by content, so a changed grade, draw or judge score is a new key and never a stale
# answer (docs/decisions/0010-weekly-figures-kept-by-content.md: the realistic benchmark's /metrics
# on PostgreSQL failed without it).
_WEEK_FIGURES: OrderedDict[bytes, tuple[Estimate | None, tuple[WeekCriterion, ...]]] = OrderedDict()
_WEEK_FIGURES_KEPT = 64
_WEEK_FIGURES_LOCK = threading.Lock()


def week_figures(spec: EvalSpec, stored: StoredSample) -> tuple[Estimate | None, tuple[WeekCriterion, ...]]:
    """Return a week's overall estimate and its criteria, computed once per content of (spec, sample)."""
    key = hashlib.sha256(pickle.dumps((spec.model_dump_json(), stored), protocol=5)).digest()
    with _WEEK_FIGURES_LOCK:
        kept = _WEEK_FIGURES.get(key)
        if kept is not None:
            _WEEK_FIGURES.move_to_end(key)
            return kept
    figures = (figure_of(spec, stored, OVERALL, estimand=WEEK_ESTIMAND).estimate, week_criteria(spec, stored))
    with _WEEK_FIGURES_LOCK:
        _WEEK_FIGURES[key] = figures
        while len(_WEEK_FIGURES) > _WEEK_FIGURES_KEPT:
            _WEEK_FIGURES.popitem(last=False)
    return figures


def weekly_quality(
    *,
    session: Session,
    spec: EvalSpec,
    start: dt.date | None = None,
    end: dt.date | None = None,
    skip: Collection[str] = (),
) -> list[WeekQuality]:
    """Return each production week's quality estimates, oldest first (weeks overlapping start..end, not in skip)."""
    stmt = select(PpiProductionWeek, Run.name).join(Run, col(Run.id) == PpiProductionWeek.run_id).order_by(col(PpiProductionWeek.week))
    out = []
    for row, name in session.exec(stmt).all():
        iso = parse_week(row.week)
        if row.week in skip:
            continue
        if (start is not None and iso.end < start) or (end is not None and iso.start > end):
            continue
        out.append(week_quality(session=session, spec=spec, week=row.week, run_id=row.run_id, run_name=name, drafts=row.drafts_taken))
    return out


def week_quality(*, session: Session, spec: EvalSpec, week: str, run_id: int, run_name: str, drafts: int) -> WeekQuality:
    """Compute one production week's quality from its run's stored sample (what webapp/ppi/stored_figures.py stores)."""
    iso = parse_week(week)
    stored = stored_sample(session=session, run_id=run_id)
    estimate, criteria = (None, week_criteria(spec, None)) if stored is None else week_figures(spec, stored)
    return WeekQuality(
        week=week,
        start=iso.start,
        end=iso.end,
        run_id=run_id,
        run_name=run_name,
        drafts=drafts,
        sampled=stored is not None,
        drawn=0 if stored is None else stored.n_drawn,
        graded=0 if stored is None else stored.graded,
        pending=0 if stored is None else stored.pending,
        estimate=estimate,
        criteria=criteria,
    )


def week_view(w: WeekQuality) -> WeekQualityPublic:
    """Return a week's figures as the API and the metrics page's table give them."""
    e = w.estimate
    below = {c.key for c in w.below_criteria}
    return WeekQualityPublic(
        week=w.week, start=w.start.isoformat(), end=w.end.isoformat(), run_name=w.run_name,
        drafts=w.drafts, sampled=w.sampled, drawn=w.drawn, graded=w.graded, pending=w.pending,
        provisional=w.provisional, estimate=None if e is None else e.estimate, low=None if e is None else e.low,
        high=None if e is None else e.high, below_target=w.below_target,
        criteria=[
            WeekCriterionPublic(
                key=c.key, name=c.name, estimate=None if c.estimate is None else c.estimate.estimate,
                low=None if c.estimate is None else c.estimate.low, high=None if c.estimate is None else c.estimate.high,
                team_target=c.target, below_target=c.key in below,
            )
            for c in w.criteria
        ],
        estimand=WEEK_ESTIMAND,
        figures_state="updating" if w.updating else "current",
    )
