"""Run the automated checks on a run's drafts, store the results, and summarise them.

Pass rates: a draft passes when none of its applicable checks fails and at least one applies
("not applicable" is neither a pass nor a failure; a draft no check applies to is not passing).
The run's figure, and the CI verdict on it, is the pilot gate's: passing examples / examples of
the eval set (webapp.checks.examples: every draft of an example passes; an example without a
draft fails). The drafts' figure (passing drafts / drafts) is shown beside it; a check's pass
rate is its passes / (passes + failures), i.e. over the drafts it applies to.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from sqlalchemy.orm import QueryableAttribute, load_only
from sqlmodel import Session, SQLModel, col, delete, select

from webapp.checks.examples import ExampleStatus, ExampleTally, example_status, tally_examples
from webapp.checks.models import DraftCheck
from webapp.checks.rules import (
    CHECK_LABELS,
    is_safety_trigger,
    problems,
    run_checks,
)
from webapp.checks.schemas import NewAlert
from webapp.checks.types import CHECK_KEYS, CaseInput, CheckResult, Citation, DraftInput, check_status
from webapp.core import reactions
from webapp.core.blind import SignalsView
from webapp.core.db import stored_id
from webapp.core.facts import record_fact
from webapp.core.spec import CATEGORIES, EvalSpec
from webapp.core.timeutil import as_utc, utcnow
from webapp.datasets.mix import DatasetMix, dataset_mix
from webapp.datasets.models import Dataset, EvalCase
from webapp.kb.service import kb_snapshot
from webapp.kb.snapshot import KbSnapshot
from webapp.runs.models import Draft, Run

NO_INTENT = "(none)"


# --- inputs ------------------------------------------------------------------------------------------


def load_kb_snapshot(*, session: Session) -> KbSnapshot:
    """Return the KB as the checks see it (every revision with its status)."""
    return kb_snapshot(session=session)


def kb_version(kb: KbSnapshot) -> str:
    """Return a short digest of every revision and its status: it changes whenever the KB does."""
    items = sorted((a, r, info.status) for (a, r), info in kb.revisions.items())
    digest = hashlib.sha256(repr(items).encode()).hexdigest()[:16]
    return f"kb:{len(items)}:{digest}"


def draft_input(draft: Draft) -> DraftInput:
    """Convert a stored draft into the checks' input."""
    citations: list[Citation] = []
    for c in draft.citations or []:
        if isinstance(c, dict) and c.get("article_id"):
            rev = c.get("revision")
            citations.append(Citation(str(c["article_id"]), int(rev) if rev is not None else None))
        elif isinstance(c, str):
            citations.append(Citation(c))
    return DraftInput(
        draft_text=draft.draft_text,
        citations=tuple(citations),
        confidence=draft.confidence,
        intent=draft.intent,
        escalated=draft.escalated,
    )


def case_input(case: EvalCase) -> CaseInput:
    """Convert a stored case into the checks' input."""
    return CaseInput(
        case_id=case.case_id,
        input=case.input,
        category=case.category,
        expected_behavior=case.expected_behavior,
        golden=case.golden,
        expected_confidence_above=case.expected_confidence_above,
        expected_confidence_min=case.expected_confidence_min,
        expected_confidence_max=case.expected_confidence_max,
        expected_citations=tuple(case.expected_citations or ()),
    )


def run_drafts(session: Session, run_id: int, *, summary_only: bool = False) -> list[tuple[Draft, EvalCase]]:
    """Return the run's drafts with their cases, in the set's order (then sample, then id).

    Two queries, the drafts then their distinct cases, not one join: a run holds several drafts
    per case (samples, copies), and the join sent and decoded each case's conversation (JSON) once
    per draft. For the benchmark's 1,540-draft run of 77 cases, 48 -> 21 ms on PostgreSQL; the
    gate sweep reads it every few seconds while people grade (bench_realistic, 4 December).

    summary_only: only what the run's summary and the gate's facts read (the draft's id, case and
    sample; the case's labels and expectations), not the drafts' texts, citations and raw output
    nor the cases' conversations and metadata (their JSON decoding was most of a gate sweep's
    reading, 7 December). Any other attribute of those rows raises rather than loading row by row.
    """
    draft_stmt = select(Draft).where(Draft.run_id == run_id)
    case_stmt = select(EvalCase).where(col(EvalCase.id).in_(select(Draft.case_pk).where(Draft.run_id == run_id)))
    if summary_only:
        draft_stmt = draft_stmt.options(load_only(*_SUMMARY_DRAFT, raiseload=True))
        case_stmt = case_stmt.options(load_only(*_SUMMARY_CASE, raiseload=True))
    drafts = session.exec(draft_stmt).all()
    cases = {c.id: c for c in session.exec(case_stmt).all()}
    pairs = [(d, cases[d.case_pk]) for d in drafts if d.case_pk in cases]
    pairs.sort(key=lambda p: (p[1].position, p[0].sample_index, p[0].id or 0))
    return pairs


def safety_by_case() -> Callable[[EvalCase], bool]:
    """Return a function telling whether a case must be escalated, worked out once per case (a run has many drafts per case)."""
    known: dict[int | None, bool] = {}

    def safety_of(case: EvalCase) -> bool:
        if case.id not in known:
            known[case.id] = is_safety_trigger(case_input(case))
        return known[case.id]

    return safety_of


def _columns(model: type[SQLModel], names: str) -> list[QueryableAttribute[object]]:
    """Return the model's mapped attributes by name (what load_only takes)."""
    return [getattr(model, name) for name in names.split()]


_SUMMARY_DRAFT = _columns(Draft, "id run_id case_pk sample_index")
_SUMMARY_CASE = _columns(
    EvalCase,
    "id dataset_id position case_id input category intent golden expected_behavior"
    " expected_confidence_above expected_confidence_min expected_confidence_max expected_citations",
)


# --- checking ----------------------------------------------------------------------------------------


@dataclass
class RunCheckSummary:
    """What checking a run did: how many drafts, the KB state used, and the run's summary after."""

    run_id: int
    drafts: int
    kb_version: str
    checked_at: dt.datetime
    summary: RunSummary
    # The "run_checked" fact recorded with the results (reactions_now runs its reactions at once).
    fact_id: int = 0


def check_run(*, session: Session, spec: EvalSpec, run_id: int) -> RunCheckSummary:
    """Check every draft of a run against the KB as it is now and replace its stored results.

    Records the fact "run_checked" in the same transaction: regression and PPI react to it after the
    commit (the run's regression alerts, webapp/regression/reactions.py and webapp/ppi/reactions.py).
    """
    run = session.get(Run, run_id)
    if run is None:
        raise LookupError(f"run: no run with id {run_id}")
    kb = load_kb_snapshot(session=session)
    version = kb_version(kb)
    now = utcnow()
    pairs = run_drafts(session, run_id)
    session.exec(delete(DraftCheck).where(col(DraftCheck.run_id) == run_id))
    for draft, case in pairs:
        for r in run_checks(draft=draft_input(draft), case=case_input(case), kb=kb, spec=spec):
            session.add(
                DraftCheck(
                    draft_id=stored_id(draft.id),
                    run_id=run_id,
                    key=r.key,
                    status=r.status,
                    reason=r.reason,
                    checked_at=now,
                    kb_version=version,
                )
            )
    session.flush()
    fact = record_fact(session, "run_checked", run_id=run_id)
    return RunCheckSummary(
        run_id=run_id,
        drafts=len(pairs),
        kb_version=version,
        checked_at=now,
        summary=run_summary(session=session, run_id=run_id),
        fact_id=stored_id(fact.id),
    )


def raised_alerts(*, session: Session, spec: EvalSpec, result: RunCheckSummary) -> list[NewAlert]:
    """Commit the check, run its reactions now and return the regression alerts they raised.

    Decision: the re-check API and `draftdesk check` answer with the alerts their check raised (a CI
    step reads them), so they wait for the reactions instead of leaving them to the jobs loop; the
    check page does not wait (it redirects, and its alerts list reloads).
    """
    found = reactions.run_now(session, spec, result.fact_id)
    return [NewAlert.model_validate(a) for r in found if isinstance(r, list) for a in r]


# --- reading -----------------------------------------------------------------------------------------


@dataclass
class Rate:
    """A count of passes over a count of applicable items."""

    passed: int = 0
    total: int = 0

    @property
    def failed(self) -> int:
        return self.total - self.passed

    @property
    def rate(self) -> float | None:
        return self.passed / self.total if self.total else None


@dataclass
class CheckRate:
    """One check across a run: passes, failures, not-applicables, and pass rate over applicable drafts."""

    key: str
    label: str
    passed: int = 0
    failed: int = 0
    not_applicable: int = 0

    @property
    def applicable(self) -> int:
        return self.passed + self.failed

    @property
    def rate(self) -> float | None:
        return self.passed / self.applicable if self.applicable else None


@dataclass
class DraftOutcome:
    """One draft's checks: whether it passes (no applicable check fails, one applies), and why not."""

    draft_id: int
    case_id: str
    sample_index: int
    category: str | None
    intent: str | None
    golden: bool
    safety: bool
    results: list[CheckResult]

    @property
    def passed(self) -> bool:
        return not self.failures

    @property
    def failures(self) -> list[CheckResult]:
        """The failed checks, or one `no_check_applied` entry when no check applied (see rules.problems)."""
        return problems(self.results)


@dataclass
class RunSummary:
    """A run's check results: overall, per check, per category, per intent, and the failing drafts."""

    run_id: int
    run_name: str
    dataset_id: int
    drafts: int
    checked: int  # drafts that have results
    overall: Rate
    per_check: list[CheckRate]
    per_category: dict[str, Rate]
    per_intent: dict[str, Rate]
    outcomes: list[DraftOutcome]
    checked_at: dt.datetime | None
    kb_version: str | None
    kb_changed: bool  # the KB changed since the results were computed
    # The run's examples against its eval set, as the pilot gate counts them (webapp.checks.examples):
    # the run's figure and the CI verdict's. For a blind viewer, over the examples whose every draft they see.
    examples: ExampleTally = ExampleTally(0, 0, 0, 0, 0)
    # Every draft id of the run by case id, checked or not (what `examples` is counted from).
    case_drafts: dict[str, tuple[int, ...]] = field(default_factory=dict)
    # Blind grading (summary_for_viewer): checked drafts left out of every figure above, because
    # the viewer has not graded them yet. 0 for a viewer who sees every draft.
    hidden: int = 0

    @property
    def is_checked(self) -> bool:
        return self.checked > 0

    @property
    def failing(self) -> list[DraftOutcome]:
        return [o for o in self.outcomes if not o.passed]

    @property
    def golden_failures(self) -> list[DraftOutcome]:
        return [o for o in self.failing if o.golden]

    @property
    def safety_failures(self) -> list[DraftOutcome]:
        return [o for o in self.failing if o.safety]


def stored_results(session: Session, draft_ids: list[int]) -> dict[int, list[DraftCheck]]:
    out: dict[int, list[DraftCheck]] = defaultdict(list)
    if not draft_ids:
        return out
    for row in session.exec(select(DraftCheck).where(col(DraftCheck.draft_id).in_(draft_ids))).all():
        out[row.draft_id].append(row)
    return out


def ordered_results(rows: list[DraftCheck]) -> list[CheckResult]:
    by_key = {r.key: r for r in rows}
    return [CheckResult(k, check_status(by_key[k].status), by_key[k].reason) for k in CHECK_KEYS if k in by_key]


def _aggregate(outcomes: list[DraftOutcome]) -> tuple[Rate, list[CheckRate], dict[str, Rate], dict[str, Rate]]:
    """Return the overall, per-check, per-category and per-intent figures of some drafts' outcomes."""
    per_check = {k: CheckRate(k, CHECK_LABELS[k]) for k in CHECK_KEYS}
    per_category: dict[str, Rate] = {c: Rate() for c in CATEGORIES}
    per_intent: dict[str, Rate] = {}
    overall = Rate()
    for outcome in outcomes:
        for r in outcome.results:
            cr = per_check[r.key]
            if r.status == "pass":
                cr.passed += 1
            elif r.status == "fail":
                cr.failed += 1
            else:
                cr.not_applicable += 1
        groups = [overall]
        if outcome.category:
            groups.append(per_category.setdefault(outcome.category, Rate()))
        groups.append(per_intent.setdefault(outcome.intent or NO_INTENT, Rate()))
        for g in groups:
            g.total += 1
            g.passed += int(outcome.passed)
    return overall, list(per_check.values()), per_category, dict(sorted(per_intent.items()))


def _tally(case_drafts: dict[str, tuple[int, ...]], outcomes: list[DraftOutcome], total: int) -> ExampleTally:
    """Count the examples of a set of `total` the way the pilot gate does, from each case's drafts and their outcomes."""
    results = {o.draft_id: o.results for o in outcomes}
    statuses: list[ExampleStatus] = [example_status([results.get(d) for d in ids]) for ids in case_drafts.values()]
    return tally_examples(statuses, total=total)


def summary_for_viewer(summary: RunSummary, signals: SignalsView) -> RunSummary:
    """Return the summary as a viewer may see it: every figure over the drafts whose signals `signals` shows.

    Blind grading (webapp/core/blind.py): a draft's check results are its model signals, and a count is
    a signal too. A category or intent with one ungraded draft would otherwise say whether that
    draft fails ("refund_request 0/1"), and the overall and per-check counts say as much once the
    labeler has graded all but one. So a blind viewer's overall, per-check, per-category and
    per-intent figures, failing drafts, golden and safety failures count only the drafts they have
    graded; `hidden` says how many checked drafts are left out (not how many of them fail).
    """
    if signals.everything:
        return summary
    shown = [o for o in summary.outcomes if signals.shows(o.draft_id)]
    overall, per_check, per_category, per_intent = _aggregate(shown)
    # An example with a draft the viewer may not see is left out of the examples' figure too.
    seen_cases = {cid: ids for cid, ids in summary.case_drafts.items() if all(signals.shows(d) for d in ids)}
    left_out = len(summary.case_drafts) - len(seen_cases)
    examples = _tally(seen_cases, shown, summary.examples.total - left_out)
    return replace(
        summary, overall=overall, per_check=per_check, per_category=per_category, per_intent=per_intent,
        outcomes=shown, hidden=len(summary.outcomes) - len(shown), examples=examples, case_drafts=seen_cases,
    )


def run_summary(*, session: Session, run_id: int, pairs: list[tuple[Draft, EvalCase]] | None = None) -> RunSummary:
    """Summarise a run's stored check results (drafts never checked are counted as unchecked).

    `pairs`: the run's drafts and cases as run_drafts returns them, when the caller has read them already.
    """
    run = session.get(Run, run_id)
    if run is None:
        raise LookupError(f"run: no run with id {run_id}")
    if pairs is None:
        pairs = run_drafts(session, run_id, summary_only=True)
    stored = stored_results(session, [d.id for d, _ in pairs if d.id is not None])
    outcomes: list[DraftOutcome] = []
    checked_at: dt.datetime | None = None
    version: str | None = None
    case_drafts: dict[str, list[int]] = defaultdict(list)
    safety_of = safety_by_case()
    for draft, case in pairs:
        case_drafts[case.case_id].append(draft.id or 0)
        rows = stored.get(draft.id or 0, [])
        if not rows:
            continue
        for r in rows:
            ts = as_utc(r.checked_at)
            if checked_at is None or ts > checked_at:
                checked_at, version = ts, r.kb_version
        results = ordered_results(rows)
        outcome = DraftOutcome(
            draft_id=draft.id or 0,
            case_id=case.case_id,
            sample_index=draft.sample_index,
            category=case.category,
            intent=case.intent,
            golden=case.golden,
            safety=safety_of(case),
            results=results,
        )
        outcomes.append(outcome)
    overall, per_check, per_category, per_intent = _aggregate(outcomes)
    kb_changed = False
    if version is not None:
        kb_changed = kb_version(load_kb_snapshot(session=session)) != version
    dataset = session.get(Dataset, run.dataset_id)
    by_case = {cid: tuple(ids) for cid, ids in case_drafts.items()}
    # The set's size as the pilot gate reads it (webapp.gates.facts.pilot_facts: the dataset's count).
    total = dataset.count if dataset is not None else len(by_case)
    return RunSummary(
        run_id=run_id,
        run_name=run.name,
        dataset_id=run.dataset_id,
        drafts=len(pairs),
        checked=len(outcomes),
        overall=overall,
        per_check=per_check,
        per_category=per_category,
        per_intent=per_intent,
        outcomes=outcomes,
        checked_at=checked_at,
        kb_version=version,
        kb_changed=kb_changed,
        examples=_tally(by_case, outcomes, total),
        case_drafts=by_case,
    )


def case_passes(*, summary: RunSummary) -> dict[str, bool]:
    """Return, per case id, whether every checked draft (sample) of the case passes all applicable checks."""
    out: dict[str, bool] = {}
    for o in summary.outcomes:
        out[o.case_id] = out.get(o.case_id, True) and o.passed
    return out


@dataclass(frozen=True)
class EvalSetFacts:
    """A run's eval set as the CI verdict reads it: its size, its mix against the plan, its golden and safety cases."""

    total: int  # the dataset's count, as RunSummary.examples and the pilot gate read it
    mix: DatasetMix
    golden: int  # golden cases of the set
    safety: int  # safety-trigger cases of the set (rules.is_safety_trigger)


def eval_set_facts(*, session: Session, spec: EvalSpec, dataset_id: int) -> EvalSetFacts:
    """Return the set's size, mix (webapp.datasets.mix.dataset_mix, the pilot gate's), golden and safety case counts."""
    cases = session.exec(select(EvalCase).where(EvalCase.dataset_id == dataset_id).order_by(col(EvalCase.position))).all()
    dataset = session.get(Dataset, dataset_id)
    return EvalSetFacts(
        total=dataset.count if dataset is not None else len(cases),
        mix=dataset_mix(((c.case_id, c.category, c.intent) for c in cases), spec),
        golden=sum(c.golden for c in cases),
        safety=sum(is_safety_trigger(case_input(c)) for c in cases),
    )
