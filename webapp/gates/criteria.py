"""The launch-gate criteria as pure functions over plain facts, so every edge is testable by hand.

Decisions where the spec is silent (documented in docs/gates.md):
- A draft that has not been run through the automated checks makes criterion 1 incomplete.
- Human grading covers the drafts that need grades (drafts with text); any of them without a
  final grade makes criterion 2 incomplete, never pass. Factual accuracy counts pass = 5,
  fail = 1 (spec file) in its average; "above 3.5" is strict, so exactly 3.5 fails.
- A draft on which no automated check applied does not pass criterion 1 (nothing shows it is right).
- Golden examples follow one rule, webapp.checks.rules.golden_failures (shared with
  `draftdesk check`, the alerts and the suite): any failed automated check, no check applied,
  or a final factual "fail" fails criterion 3 at once, naming what failed; otherwise an
  unchecked or ungraded golden draft leaves it incomplete.
- A regression case that the run does not include leaves criterion 5 incomplete; the report
  lists those cases and the command that exports the suite for the next run.
"""

from __future__ import annotations

from collections.abc import Sequence

from webapp.checks.examples import mix_shortfall, size_shortfall, tally_examples
from webapp.checks.rules import PROBLEM_LABELS, describe, named
from webapp.checks.types import CheckResult
from webapp.core import units
from webapp.core.spec import Criterion, EvalSpec
from webapp.datasets.mix import DatasetMix
from webapp.gates.pilot_facts import (
    EXPORT_COMMAND,
    DraftFacts,
    ExampleOutcome,
    PilotFacts,
    PpiCriterionFacts,
    PpiGradingFacts,
    examples,
)
from webapp.gates.report import CriterionResult, Evidence, Verdict, plural

EPS = 1e-9


def _draft_ev(d: DraftFacts, detail: str = "") -> Evidence:
    return Evidence(d.case_id, f"/drafts/{d.draft_id}", detail)


def _pct(x: float) -> str:
    return units.percent(x)  # the pass-rate format of every page


def _example_ev(e: ExampleOutcome) -> Evidence:
    if e.status == "missing":
        return Evidence(e.case_id, e.href, "no draft in this run")
    bad = e.failing_drafts
    if bad:
        why = named(_problem_union(bad))
        lead = "fails" if len(e.drafts) == 1 else f"{len(bad)} of {len(e.drafts)} drafts fail:"
        return Evidence(e.case_id, f"/drafts/{bad[0].draft_id}", f"{lead} {why}")
    return Evidence(e.case_id, f"/drafts/{e.drafts[0].draft_id}", "not checked")


def _problem_union(drafts: Sequence[DraftFacts]) -> list[CheckResult]:
    """The distinct problems of several drafts, first seen first (one entry per check)."""
    seen: dict[str, CheckResult] = {}
    for d in drafts:
        for r in d.problems:
            seen.setdefault(r.key, r)
    return list(seen.values())


def automated_checks(facts: PilotFacts, spec: EvalSpec, *, min_cases: int) -> CriterionResult:
    """Criterion 1: at least N% of the eval set's examples pass all automated checks, over at least min_cases cases.

    The unit is the example (case) of the set, never the draft: an example passes only when every
    draft (sample) of it is checked and passes; an example the run has no draft of fails.
    """
    threshold = spec.gates.pilot.automated_pass_rate
    title = "Automated checks"
    thr = f"≥ {_pct(threshold)} of the set's examples (every draft of an example passes), ≥ {min_cases} cases"
    outcomes, unnamed_missing = examples(facts)
    total = facts.case_count
    passing = [e for e in outcomes if e.status == "pass"]
    failing = [e for e in outcomes if e.status == "fail"]
    unchecked = [e for e in outcomes if e.status == "unchecked"]
    missing = [e for e in outcomes if e.status == "missing"]
    n_missing = len(missing) + unnamed_missing
    n_drafts = len(facts.drafts)
    rate = tally_examples((e.status for e in outcomes), total=total).rate  # the CLI's and the checks page's figure
    # What the rate could still reach if every unchecked example passed once checked.
    best = (len(passing) + len(unchecked)) / total if total else None
    measured = (
        f"{len(passing)}/{total} examples pass ({_pct(rate) if rate is not None else '—'}); "
        f"{plural(n_drafts, 'draft')}" + (f", {n_missing} {'example' if n_missing == 1 else 'examples'} without a draft" if n_missing else "")
    )
    evidence = [_example_ev(e) for e in failing] + [_example_ev(e) for e in missing]
    if unnamed_missing:
        evidence.append(Evidence(f"{unnamed_missing} more examples", None, "no draft in this run"))
    status: Verdict
    action = command = ""
    if n_drafts == 0:
        status, summary = "incomplete", "the run has no drafts"
    elif (too_small := size_shortfall(total=total, min_cases=min_cases)) is not None:
        status, summary = "fail", too_small
    elif unchecked and best is not None and best + EPS >= threshold:
        status = "incomplete"
        summary = f"{plural(len(unchecked), 'example')} not checked yet: press Re-check on the run's checks page"
        evidence = [_example_ev(e) for e in unchecked] + evidence
        action, command = "Re-check on the run's checks page, or from a terminal:", f"draftdesk check {facts.run_name}"
    elif rate is not None and rate + EPS >= threshold:
        status, summary = "pass", f"{_pct(rate)} of the set's examples pass every automated check"
    else:
        status, summary = "fail", _why_failing(rate, failing, n_missing=n_missing, n_unchecked=len(unchecked))
    result = CriterionResult("automated_checks", title, status, measured, thr, summary, rate, evidence)
    result.action, result.command = action, command
    return _with_mix(result, facts)


def _why_failing(rate: float | None, failing: Sequence[ExampleOutcome], *, n_missing: int, n_unchecked: int) -> str:
    """Say why criterion 1 fails: how many examples fail, lack a draft or wait for checks, and which checks hold it back."""
    parts = [f"{len(failing)} fail"] if failing else []
    parts += [f"{n_missing} {'has' if n_missing == 1 else 'have'} no draft in this run"] if n_missing else []
    parts += [f"{n_unchecked} not checked yet"] if n_unchecked else []
    summary = f"only {_pct(rate or 0)} of the set's examples pass every automated check; " + ", ".join(parts)
    # Say which checks hold the run back (examples failing each), most first.
    counts: dict[str, int] = {}
    for e in failing:
        for r in _problem_union(e.failing_drafts):
            counts[r.key] = counts.get(r.key, 0) + 1
    top = sorted(counts.items(), key=lambda kv: -kv[1])[:3]
    if top:
        summary += " (" + ", ".join(f"{PROBLEM_LABELS.get(k, k)}: {n}" for k, n in top) + ")"
    return summary


def _with_mix(result: CriterionResult, facts: PilotFacts) -> CriterionResult:
    """Add the set's mix against the plan to criterion 1: its parts, and a failure when the set is off plan."""
    if facts.mix is None:
        return result
    result.threshold += ", mix and intents as planned"
    result.parts = _mix_parts(facts.mix)
    off_plan = facts.mix.mismatches()
    note = mix_shortfall(facts.mix)  # the CI verdict's words too (webapp.checks.ci_gate)
    if note is not None:
        # A set that is not the plan's stratified sample cannot pass the gate, whatever its rate:
        # an all-routine set would pass 80% far more easily than the planned mix.
        result.summary = note if result.status != "fail" else f"{result.summary}; {note}"
        result.status = "fail"
        result.evidence = [Evidence("Eval set mix", facts.dataset_href, w) for w in off_plan] + result.evidence
        result.action = result.command = ""
    return result


def _mix_parts(mix: DatasetMix) -> list[CriterionResult]:
    """The set's mix against the plan, one part per category and one for the intents (shown on the gate page)."""
    parts = [
        CriterionResult(
            f"mix_{c.category}", f"{c.category.capitalize()} cases", "pass" if c.within else "fail",
            f"{c.count} ({c.share * 100:.1f}%)", f"{c.planned * 100:g}% ± {c.tolerance_points:g} pts", "", c.share,
        )
        for c in mix.categories
    ]
    if mix.uncategorised:
        parts.append(CriterionResult(
            "mix_uncategorised", "Cases without a category", "fail", f"{len(mix.uncategorised)}", "none", "",
            float(len(mix.uncategorised)),
        ))
    outside = sum(len(ids) for ids in mix.off_plan_intents.values())
    measured = (
        f"all {mix.total - len(mix.no_intent)} labelled cases in the top {mix.plan_intents}"
        if not outside
        else f"{outside} {'case' if outside == 1 else 'cases'} outside: " + ", ".join(mix.off_plan_intents)
    )
    parts.append(CriterionResult(
        "mix_intents", f"Intents (the plan's top {mix.plan_intents})", "pass" if not outside else "fail", measured,
        "none outside", "", float(outside),
    ))
    return parts


def _ppi_figure(c: PpiCriterionFacts) -> str:
    """Return '4.09 [3.95, 4.23]' (or '81% [74%, 88%]' for a share); '—' without an estimate."""
    if c.estimate is None or c.low is None or c.high is None:
        return "—"
    if c.share:
        return f"{c.estimate:.0%} [{c.low:.0%}, {c.high:.0%}]"
    return f"{c.estimate:.2f} [{c.low:.2f}, {c.high:.2f}]"


def _more(k: int | None) -> str:
    """Return ': about K more drafts to draw would decide' (the PPI page's words), or '' when unknown."""
    if k is None:
        return ""
    if k == 0:
        return ": grading the drafts already drawn should decide"
    return f": about {plural(k, 'more draft')} to draw would decide"


def _ppi_reading(c: PpiCriterionFacts) -> str:
    """Return one criterion's reading: which bound decides it, or that the interval straddles the threshold."""
    if c.verdict == "undecided":
        return "undecided: the confidence sequence straddles the threshold" + _more(c.more_grades).replace(":", ";", 1)
    return "lower bound clears the threshold" if c.verdict == "pass" else "upper bound at or below the threshold"


def human_grading_ppi(ppi: PpiGradingFacts, spec: EvalSpec) -> CriterionResult:
    """Criterion 2 on a run with a PPI sample: each criterion's confidence sequence against the threshold.

    The bounds are the anytime-valid sequence's (webapp.ppi.report.decide, issue 43), so reading
    the gate after every grade does not raise its error. A criterion passes when its lower bound
    clears the threshold, fails when its upper bound is below it, and is otherwise undecided (the gate says incomplete) with about how many more
    human grades would decide it; the whole criterion fails when any criterion fails, passes
    when all pass. "Undecided" means the interval straddles the threshold; each undecided
    criterion names its own "about K more drafts to draw" (the further grades the sequence needs: webapp.ppi.report.decide, the count
    the PPI page shows too). While sampled drafts wait for their final grades every reading is
    provisional and the criterion stays incomplete, whatever the bounds say (a pass on part of a
    sample is not the sample's pass), except on a run graded until decided: graded in the sample's
    random draw order, the grades so far are a uniform sample themselves and the calls hold while
    drawn drafts wait (issue 43). A fail on final figures wins.
    """
    g = spec.gates.pilot
    names = {c.key: c.name for c in spec.rubric.criteria}
    parts: list[CriterionResult] = []
    for c in ppi.criteria:
        st: Verdict = "incomplete" if c.verdict == "undecided" else c.verdict
        threshold = f"lower bound > {c.threshold:.1%}" if c.share else f"lower bound > {c.threshold:g}"
        summary = _ppi_reading(c) + (" (provisional: sampled drafts still to grade)" if c.provisional else "")
        if c.decided_at is not None and c.verdict != "undecided":
            summary += f"; decided {c.decided_at:%Y-%m-%d %H:%M} UTC on {plural(c.decided_grades or 0, 'grade')}"
        parts.append(CriterionResult(c.key, names.get(c.key, c.key), st, _ppi_figure(c), threshold, summary, c.estimate))
    undecided = [(c, p.title) for c, p in zip(ppi.criteria, parts, strict=True) if c.verdict == "undecided"]
    action = ""
    waiting = 0 if ppi.in_draw_order else ppi.pending  # drafts whose grades could still turn a call
    if not waiting and any(p.status == "fail" for p in parts):
        status: Verdict = "fail"
        summary = "upper bound at or below the threshold: " + ", ".join(p.title for p in parts if p.status == "fail")
    elif not parts or undecided or waiting:
        status = "incomplete"
        summary = "; ".join(f"{title} undecided" + _more(c.more_grades) for c, title in undecided)
        summary = summary or "each interval lies on one side of its threshold"
        if waiting:
            summary = f"provisional, {plural(ppi.pending, 'sampled draft')} still without a final grade; " + summary
        elif ppi.pending:
            verb = "waits" if ppi.pending == 1 else "wait"
            summary = f"graded until decided in draw order, the calls hold while {plural(ppi.pending, 'drawn draft')} {verb}; " + summary
        if ppi.closed_reason and not ppi.pending and undecided:
            # the all-graded closing (issue 43): nothing is left to serve, and a further sample is refused while it is set
            summary = f"graded until decided, its queue closed: {ppi.closed_reason}; " + summary
            action = ("Stop grading until decided (a lead, on the run's PPI page; the stored decisions stay), then draw a "
                      "further sample to decide the rest.")
        elif ppi.in_draw_order and ppi.pending:
            action = ("Grade the drawn drafts in the run's queue (graded until decided: it closes by itself once every "
                      "criterion is decided).")
        elif any(c.more_grades for c, _ in undecided):
            action = "Draw a further sample (the button on the run's PPI page; team leads draw it) to decide it."
        else:
            action = "Grade the sampled drafts still without a final grade (the run's grading queue), then read the intervals again."
    else:
        status = "pass"
        summary = "every criterion's lower bound clears the threshold"
    measured = " · ".join(f"{p.title} {p.measured}" for p in parts)
    return CriterionResult(
        "human_grading", "Human grading (PPI, confidence sequence)", status, measured,
        f"each criterion > {g.human_mean_above:g} (factual pass = {g.factual_pass_score:g}, fail = {g.factual_fail_score:g})",
        f"{summary}; {plural(ppi.graded, 'human grade')} on the sample, judge on every draft",
        None, [], parts, action=action, link=ppi.page if action else "",
    )


def human_grading(facts: PilotFacts, spec: EvalSpec) -> CriterionResult:
    """Criterion 2: the human final grades average above the threshold on each rubric criterion.

    The plan's reading (the spec's `gates.human_grading: plan`, the default): every graded example
    counts and the observed averages meet the threshold or not. Without a PPI sample every draft
    that needs a grade needs its final grade first; with one, the drafts people were given (the
    drawn ones) do, and drafts nobody was asked to grade wait for nothing. Decision: the average
    is the plain mean of the graded drafts, unweighted, as the plan writes it, though the sample
    grades every safety, adversarial, golden and regression draft (forced). A team that sets
    `human_grading: intervals` reads a run with a PPI sample from its intervals instead
    (human_grading_ppi).
    """
    if facts.ppi is not None and spec.gates.human_grading == "intervals":
        return human_grading_ppi(facts.ppi, spec)
    g = spec.gates.pilot
    above = g.human_mean_above
    rubric = spec.rubric
    needed = [d for d in facts.drafts if d.needs_grade]
    graded = [d for d in needed if d.final_grade is not None]
    # With a PPI sample, only the drawn drafts were given to people: the rest are not waited for.
    ungraded = [d for d in needed if d.final_grade is None] if facts.ppi is None else []
    waiting = len(ungraded) if facts.ppi is None else facts.ppi.pending
    parts = [_grading_part(crit, graded, spec, waiting=bool(waiting)) for crit in rubric.criteria]
    status, summary = _grading_status(facts, parts, needed=len(needed), graded=len(graded), ungraded=len(ungraded), above=above)
    measured = " · ".join(f"{p.title} {p.measured}" for p in parts)
    evidence = [_draft_ev(d, "no final grade") for d in ungraded]
    low_drafts = [d for d in graded if d.final_grade and d.final_grade.factual_accuracy == "fail"]
    evidence += [_draft_ev(d, "final grade: factual fail") for d in low_drafts]
    title = "Human grading"
    if facts.ppi is not None:
        # Say which question the figures answer: the graded drafts' own averages, not an interval.
        title = "Human grading (the plan's reading: averages of the graded drafts)"
        summary += "; " + _sampled_counts(facts.ppi, graded=len(graded), drawn=facts.ppi.drawn or len(needed))
    return CriterionResult(
        "human_grading", title, status, measured, f"each criterion > {above:g} (factual pass = {g.factual_pass_score:g}, fail = {g.factual_fail_score:g})",
        summary, None, evidence, parts,
    )


def _sampled_counts(ppi: PpiGradingFacts, *, graded: int, drawn: int) -> str:
    """Say how many drafts the plan's reading averages and how many the run has: '30 graded of 33 drawn; the run has 77 drafts, 44 not drawn'.

    `drawn` is the drafts people were given (the sample's gradable drafts); the rest of the run's
    drafts were not drawn, so nobody was asked to grade them and the averages leave them out.
    """
    text = f"{graded} graded of {drawn} drawn"
    if ppi.drafts > drawn:
        text += f"; the run has {plural(ppi.drafts, 'draft')}, {ppi.drafts - drawn} not drawn"
    return text + "; every graded draft counts"


def _grading_part(crit: Criterion, graded: Sequence[DraftFacts], spec: EvalSpec, *, waiting: bool) -> CriterionResult:
    """One rubric criterion's mean final grade over the graded drafts against the threshold (factual: pass/fail scores)."""
    g = spec.gates.pilot
    values: list[float] = []
    for d in graded:
        fg = d.final_grade
        assert fg is not None
        if crit.kind == "pass_fail":
            values.append(g.factual_pass_score if fg.factual_accuracy == "pass" else g.factual_fail_score)
        else:
            values.append(float(getattr(fg, crit.key)))
    mean = sum(values) / len(values) if values else None
    st: Verdict = "incomplete" if mean is None or waiting else "pass" if mean > g.human_mean_above + EPS else "fail"
    measured = "—" if mean is None else f"{mean:.2f}"
    return CriterionResult(crit.key, crit.name, st, measured, f"> {g.human_mean_above:g}", "", mean)


def _grading_status(
    facts: PilotFacts, parts: list[CriterionResult], *, needed: int, graded: int, ungraded: int, above: float
) -> tuple[Verdict, str]:
    """Criterion 2's verdict and summary: incomplete while grades are missing, else pass when every part passes."""
    waiting = facts.ppi.pending if facts.ppi is not None else ungraded
    if not needed:
        return "incomplete", "no drafts to grade"
    if facts.ppi is not None and not graded:
        return "incomplete", "no sampled draft has a final grade yet"
    if facts.ppi is not None and waiting:
        return "incomplete", f"{plural(waiting, 'sampled draft')} {'has' if waiting == 1 else 'have'} no final grade yet"
    if ungraded:
        return "incomplete", f"{ungraded} of {plural(needed, 'draft')} have no final grade yet"
    if all(p.status == "pass" for p in parts):
        return "pass", "every criterion averages above the threshold"
    return "fail", f"not above {above:g}: {', '.join(p.title for p in parts if p.status == 'fail')}"


def golden_factual(facts: PilotFacts, spec: EvalSpec) -> CriterionResult:
    """Criterion 3: no golden example fails (rules.golden_failures: a failed check, no check applied, or factual fail)."""
    allowed = spec.gates.pilot.golden_factual_failures_allowed
    golden = [d for d in facts.drafts if d.golden]
    failures = [(d, d.golden_failures) for d in golden if d.golden_failures]
    failed_ids = {d.draft_id for d, _ in failures}
    unchecked = [d for d in golden if not d.checked and d.draft_id not in failed_ids]
    ungraded = [d for d in golden if d.checked and d.needs_grade and d.final_grade is None and d.draft_id not in failed_ids]
    # A golden example of the set that the run has no draft of fails: nothing shows it is right,
    # and only a new run (not more checking or grading) can fix it.
    drafted = {d.case_id for d in facts.drafts}
    absent = [c for c in facts.cases if c.golden and c.case_id not in drafted]
    measured = f"{len(failures)} failures on {len(golden)} golden drafts"
    if absent:
        measured += f"; {len(absent)} golden {'example' if len(absent) == 1 else 'examples'} not in this run"
    evidence = [_draft_ev(d, "fails " + describe(why)) for d, why in failures]
    evidence += [Evidence(c.case_id, c.href, "golden example with no draft in this run") for c in absent]
    evidence += [_draft_ev(d, "not checked yet") for d in unchecked] + [_draft_ev(d, "no final grade yet") for d in ungraded]
    status: Verdict
    if not golden and not absent:
        status, summary = "incomplete", "the run has no golden examples"
    elif len(failures) + len(absent) > allowed:
        status = "fail"
        summary = "; ".join(
            [f"{d.case_id} fails {named(why)}" for d, why in failures]
            + [f"{c.case_id} has no draft in this run" for c in absent]
        )
    elif unchecked:
        status, summary = "incomplete", f"{plural(len(unchecked), 'golden draft')} not checked yet"
    elif ungraded:
        status, summary = "incomplete", f"{plural(len(ungraded), 'golden draft')} without a final human grade yet"
    else:
        status, summary = "pass", "no golden example fails a check or its factual-accuracy grade"
    return CriterionResult(
        "golden_factual", "Golden examples", status, measured,
        f"≤ {allowed} failures (any failed check, or factual accuracy graded fail)", summary, float(len(failures)), evidence,
    )


def safety_escalation(facts: PilotFacts, spec: EvalSpec) -> CriterionResult:
    """Criterion 4: every safety-trigger case produces an escalation and no draft."""
    need = spec.gates.pilot.safety_escalation_rate
    safety = [d for d in facts.drafts if d.safety_trigger]
    ok = [d for d in safety if d.safety_check == "pass"]
    bad = [d for d in safety if d.safety_check != "pass"]
    rate = len(ok) / len(safety) if safety else None
    measured = f"{len(ok)}/{len(safety)} escalated" + (f" ({_pct(rate)})" if rate is not None else "")
    evidence = [_draft_ev(d, "drafted instead of escalating" if d.safety_check == "fail" else "not checked") for d in bad]
    status: Verdict
    if not safety:
        status, summary = "incomplete", "the run has no safety cases"
    elif any(d.safety_check is None for d in safety):
        status, summary = "incomplete", "some safety drafts have not been checked"
    elif rate is not None and rate + EPS >= need:
        status, summary = "pass", "every safety case was escalated without a draft"
    else:
        status, summary = "fail", f"{plural(len(bad), 'safety case')} got a draft instead of an escalation"
    return CriterionResult("safety_escalation", "Safety escalation", status, measured, f"{_pct(need)}", summary, rate, evidence)


def regression_suite(facts: PilotFacts, spec: EvalSpec) -> CriterionResult:
    """Criterion 5: every regression case passes on this run (a case the run does not include is listed)."""
    cases = facts.regression
    failed = [c for c in cases if c.status == "fail"]
    missing = [c for c in cases if c.status == "not_run"]
    unchecked = [c for c in cases if c.status not in ("pass", "fail", "not_run")]  # not_checked
    passed = [c for c in cases if c.status == "pass"]
    measured = f"{len(passed)}/{len(cases)} pass"
    if missing:
        measured += f", {len(missing)} not in this run"
    if unchecked:
        measured += f", {len(unchecked)} not checked"
    evidence = [Evidence(c.case_id, c.href, "fails" + (f": {c.note}" if c.note else "")) for c in failed]
    evidence += [Evidence(c.case_id, c.href, "not in this run: its dataset has no such case") for c in missing]
    evidence += [Evidence(c.case_id, c.href, c.note or c.status.replace("_", " ")) for c in unchecked]
    action = ""
    if missing:
        # The suite grows (e.g. from the weekly review) faster than datasets do: say what to do.
        ids = ", ".join(c.case_id for c in missing)
        action = (
            f"This run does not include {plural(len(missing), 'regression case')}: {ids}. Add the suite's cases to the "
            "next run's dataset; export the suite (or Export JSONL on /regression) with:"
        )
    status: Verdict
    if not cases:
        status, summary = "incomplete", "the regression suite is empty"
    elif failed:
        status, summary = "fail", f"{plural(len(failed), 'regression case')} {'fails' if len(failed) == 1 else 'fail'}"
        if missing:
            summary += f"; {len(missing)} not in this run"
    elif missing or unchecked:
        parts = ([f"{plural(len(missing), 'regression case')} not in this run ({', '.join(c.case_id for c in missing)})"] if missing else [])
        parts += ([f"{plural(len(unchecked), 'regression case')} without a checked draft"] if unchecked else [])
        status, summary = "incomplete", "; ".join(parts)
    else:
        status, summary = "pass", "every regression case passes"
    rate = len(passed) / len(cases) if cases else None
    return CriterionResult(
        "regression_suite", "Regression suite", status, measured, "all pass", summary, rate, evidence,
        action=action, command=EXPORT_COMMAND if action else "",
    )


def pilot_criteria(facts: PilotFacts, spec: EvalSpec, *, min_cases: int | None = None) -> list[CriterionResult]:
    """Evaluate the five pilot criteria (min_cases defaults to the pilot gate's)."""
    return [
        automated_checks(facts, spec, min_cases=min_cases or spec.gates.pilot.min_cases),
        human_grading(facts, spec),
        golden_factual(facts, spec),
        safety_escalation(facts, spec),
        regression_suite(facts, spec),
    ]
