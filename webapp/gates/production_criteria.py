"""The production gate's criteria as pure functions over plain facts (the pilot's criteria: webapp.gates.criteria)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from webapp.core.spec import EvalSpec
from webapp.gates.criteria import pilot_criteria
from webapp.gates.pilot_facts import PilotFacts
from webapp.gates.report import CriterionResult, Evidence, Verdict, combine, plural
from webapp.metrics.weekly import weekly_counts


@dataclass(frozen=True)
class StreakFacts:
    longest: int
    longest_start: dt.date | None
    longest_end: dt.date | None
    current: int
    missed_days: tuple[tuple[dt.date, tuple[str, ...]], ...] = ()  # business days that missed, with the metrics
    scope: str = ""  # the window and segment counted, e.g. "pilot window 2026-11-02 – 2026-11-13, all traffic"


@dataclass(frozen=True)
class HallucinationFacts:
    report_id: int
    event_id: str
    day: dt.date


@dataclass(frozen=True)
class SurveyFacts:
    yes: int
    no: int
    neutral: int
    round_name: str | None = None
    round_id: int | None = None


def pilot_online_targets(streak: StreakFacts, spec: EvalSpec, *, today: dt.date) -> CriterionResult:
    """Production 1: pilot metrics met every target on at least N consecutive business days."""
    need = spec.gates.production.consecutive_business_days
    pilot = spec.online_metrics.pilot
    span = ""
    if streak.longest_start and streak.longest_end:
        span = f" ({streak.longest_start:%b %d}–{streak.longest_end:%b %d})"
    measured = f"longest streak {streak.longest} business days{span}; current {streak.current}"
    if streak.scope:
        measured += f" ({streak.scope})"
    evidence = [
        Evidence(f"{day:%a %Y-%m-%d}", f"/metrics?start={day}&end={day}", "missed: " + ", ".join(ms))
        for day, ms in streak.missed_days
    ]
    status: Verdict
    if streak.longest >= need:
        status, summary = "pass", f"targets met on {streak.longest} consecutive business days"
    elif today <= pilot.end:
        status, summary = "incomplete", f"{streak.longest} of {need} consecutive business days so far; the pilot runs until {pilot.end}"
    else:
        status, summary = "fail", f"the longest run of business days meeting every target was {streak.longest}; {need} are needed"
    return CriterionResult("pilot_targets", "Pilot online metrics on target", status, measured, f"≥ {need} consecutive business days", summary, float(streak.longest), evidence)


def no_confirmed_hallucinations(reports: Sequence[HallucinationFacts], spec: EvalSpec, *, today: dt.date) -> CriterionResult:
    """Production 2: no confirmed hallucination report during the pilot."""
    allowed = spec.gates.production.confirmed_hallucinations_allowed
    pilot = spec.online_metrics.pilot
    evidence = [Evidence(f"report {r.report_id} on event {r.event_id}", "/metrics/hallucinations", f"{r.day}") for r in reports]
    status: Verdict
    if len(reports) > allowed:
        status, summary = "fail", f"{plural(len(reports), 'confirmed hallucination report')} during the pilot"
    elif today < pilot.start:
        status, summary = "incomplete", f"the pilot starts on {pilot.start}"
    elif today <= pilot.end:
        status, summary = "incomplete", f"none confirmed so far; the pilot runs until {pilot.end}"
    else:
        status, summary = "pass", "no confirmed hallucination report during the pilot"
    weeks = pilot_weeks(reports, spec, today=today)
    worst = max(weeks, key=lambda p: p.value or 0.0, default=None)
    measured = f"{len(reports)} confirmed"
    if worst is not None and reports:
        measured += f"; most in one week: {int(worst.value or 0)} in {worst.title.removeprefix('Week ')}"
    return CriterionResult(
        "no_hallucinations", "No confirmed hallucinations in the pilot", status, measured,
        f"≤ {allowed} ({pilot.start} – {pilot.end}); target 0 per week", summary, float(len(reports)), evidence, weeks,
    )


def pilot_weeks(reports: Sequence[HallucinationFacts], spec: EvalSpec, *, today: dt.date) -> list[CriterionResult]:
    """The plan's weekly target ("0 per week") over each ISO week (Monday-Sunday) of the pilot window.

    A report counts in the week of its event's day; only the pilot's days count (the reports are
    those of the pilot window). A week over its target fails; a week with none passes once its
    last pilot day is over, and is incomplete before.
    """
    pilot = spec.online_metrics.pilot
    counts: dict[dt.date, int] = {}
    for r in reports:
        counts[r.day] = counts.get(r.day, 0) + 1
    out: list[CriterionResult] = []
    for w in weekly_counts(counts, start=pilot.start, end=pilot.end, spec=spec, today=today):
        last_day = min(w.end, pilot.end)
        st: Verdict = "fail" if not w.met else "pass" if last_day < today else "incomplete"
        out.append(CriterionResult(
            f"week_{w.iso}", f"Week {w.label}", st, f"{w.count} confirmed", f"{w.target:g} per week", "", float(w.count),
        ))
    return out


def survey_net_positive(s: SurveyFacts, spec: EvalSpec) -> CriterionResult:
    """Production 3: more agents find the assistant helpful than not, in the newest round, once enough answered.

    Only the newest round counts (answers of earlier rounds are about an earlier assistant), and
    only when at least `gates.production.survey_min_responses` agents answered it: right after a
    round opens, one "helpful" answer is not "more agents find it helpful than not".
    """
    need = spec.gates.production.survey_min_responses
    total = s.yes + s.no + s.neutral
    measured = f"{s.yes} helpful, {s.no} not, {s.neutral} neutral (net {s.yes - s.no:+d}); {total} of {need} answers needed"
    status: Verdict
    if total == 0:
        status, summary = "incomplete", "no survey answers yet" + (f" in round {s.round_name}" if s.round_name else "")
    elif total < need:
        status, summary = "incomplete", f"{plural(total, 'agent')} answered round {s.round_name}; {need} answers are needed"
    elif s.yes > s.no:
        status, summary = "pass", "more agents find the assistant helpful than not"
    else:
        status, summary = "fail", "no more agents find the assistant helpful than not"
    link = f"/survey?round={s.round_id}" if s.round_id is not None else "/survey"
    return CriterionResult(
        "survey", "Agent feedback survey", status, measured, f"net positive, ≥ {need} answers in the newest round", summary,
        float(s.yes - s.no), [Evidence("Survey answers" + (f" ({s.round_name})" if s.round_name else ""), link)],
    )


def full_eval_set(facts: PilotFacts, spec: EvalSpec) -> CriterionResult:
    """Production 4: a 250-case eval set passes the pilot gate's thresholds."""
    return eval_set_criterion(pilot_criteria(facts, spec, min_cases=spec.gates.production.min_cases), facts.case_count, spec)


def eval_set_criterion(parts: list[CriterionResult], case_count: int, spec: EvalSpec) -> CriterionResult:
    """Production 4 from the pilot criteria at the production case count (`parts`) and the eval set's size."""
    need = spec.gates.production.min_cases
    status = combine([p.status for p in parts])
    if case_count < need:
        status = "fail"
        summary = f"the run's eval set has {case_count} cases; {need} are needed"
    else:
        summary = "passes every pilot threshold" if status == "pass" else "; ".join(
            f"{p.title}: {p.summary}" for p in parts if p.status != "pass"
        )
    evidence = [e for p in parts for e in p.evidence][:50]
    return CriterionResult(
        "full_eval_set", f"{need}-case eval set passes the pilot thresholds", status,
        f"{case_count} cases; " + ", ".join(f"{p.title} {p.status}" for p in parts),
        f"≥ {need} cases, every pilot criterion", summary, None, evidence, parts,
    )
