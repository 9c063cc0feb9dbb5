"""A gate report's whole-run part, stored when its inputs change (issue 42 item 2).

The pilot and production reports read every draft of the run with its check results (checks'
run_summary), the final grades, the regression suite and the eval set: a loop over the whole run
(about 0.3 s for a run of 1,000 drafts), on every gate page, the API and the home gate card. So
that part is stored (webapp/core/figures.py) and pages read it: the four criteria that read only
those rows (automated checks at the pilot's and the production's case counts, golden examples with
their warnings, safety escalation, the regression suite) and the drafts human grading averages
(without their check results). What stays computed per request is cheap: human grading from
those drafts and the run's stored PPI figures (webapp/ppi/stored_figures.py, read as they are),
and the production gate's streaks, hallucinations and survey (they follow the day and the events).

The fingerprint of the inputs is one aggregate query: the run's drafts (count, newest id), its
check results (count, newest id and time: a re-check replaces them), the final grades of its
drafts (count, newest decision, the sums of their scores and factual passes), the regression
suite (count, newest id: cases are only added), the eval set's cases (count, newest id), the
dataset's case count, the run's name, the plan file's digest and REPORT_VERSION. The reactions to
"run_checked" and "draft_finalised" (webapp/gates/reactions.py) store it again; the jobs loop's
sweep (webapp/gates/background.py) takes what changed without a fact (a regression case added, a
run imported, a changed plan file). With no row yet (a run nobody has reacted to), a read
computes it there and then, as before, and stores nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from urllib.parse import quote

from pydantic import TypeAdapter
from sqlalchemy import Engine, case, func, select, true
from sqlmodel import Session

from webapp.checks.models import DraftCheck
from webapp.core import figures
from webapp.core.db import session_scope, table_of
from webapp.core.figures import FigureRead, FigureState
from webapp.core.spec import EvalSpec
from webapp.datasets import service as datasets_service
from webapp.datasets.models import Dataset, EvalCase
from webapp.gates import criteria, facts
from webapp.gates.pilot_facts import DraftFacts, PilotFacts, PpiGradingFacts
from webapp.gates.report import CriterionResult, Evidence
from webapp.grading.models import FinalGrade
from webapp.ppi.stored_figures import spec_digest
from webapp.regression.models import RegressionCase
from webapp.runs.models import PRODUCTION_SOURCE, Draft, Run

KIND = "gate_run"
# Raise when the criteria's code reads the same rows differently: every stored report is then stale.
REPORT_VERSION = "1"
HUMAN = "human_grading"

_DR = table_of(Draft)
_F = table_of(FinalGrade)
_RC = table_of(RegressionCase)
_EC = table_of(EvalCase)
_DS = table_of(Dataset)
_R = table_of(Run)
_CH = table_of(DraftCheck)


@dataclass(frozen=True)
class GateParts:
    """A run's gate criteria that read the whole run, as stored; human grading is put in when read (`pilot`, `production_set`)."""

    case_count: int
    pilot_criteria: list[CriterionResult]  # the pilot criteria but human grading, in order (golden with its warnings)
    production_criteria: list[CriterionResult]  # the same at the production gate's case count (no warnings)
    graded: list[DraftFacts]  # the drafts that need a final grade, with it, without their check results

    def grading_facts(self, *, run_id: int, run_name: str, ppi: PpiGradingFacts | None) -> PilotFacts:
        """Return the facts human grading reads: these drafts and the run's PPI reading as it is now."""
        return PilotFacts(run_id, run_name, self.case_count, list(self.graded), ppi=ppi)


_ADAPTER: TypeAdapter[GateParts] = TypeAdapter(GateParts)


def with_human(parts: list[CriterionResult], human: CriterionResult) -> list[CriterionResult]:
    """Return the criteria in the report's order: automated checks, human grading, then the rest."""
    return [*parts[:1], human, *parts[1:]]


def fingerprint(*, session: Session, spec: EvalSpec, run: Run) -> str:
    """Return the fingerprint of what the run's stored gate criteria are computed from (module docstring)."""
    ch = _CH
    drafts = select(func.count(), func.max(_DR.c.id)).where(_DR.c.run_id == run.id).subquery()
    checks = select(func.count(), func.max(ch.c.id), func.max(ch.c.checked_at)).where(ch.c.run_id == run.id).subquery()
    finals = (
        select(
            func.count(), func.max(_F.c.decided_at), func.sum(_F.c.citation_relevance + _F.c.tone + _F.c.completeness),
            func.sum(case((_F.c.factual_accuracy == "pass", 1), else_=0)), func.max(_F.c.id),
        )
        .where(_F.c.draft_id.in_(select(_DR.c.id).where(_DR.c.run_id == run.id)))
        .subquery()
    )
    suite = select(func.count(), func.max(_RC.c.id)).subquery()
    cases = select(func.count(), func.max(_EC.c.id)).where(_EC.c.dataset_id == run.dataset_id).subquery()
    dataset = select(func.max(_DS.c.count)).where(_DS.c.id == run.dataset_id).subquery()
    name = select(func.max(_R.c.name)).where(_R.c.id == run.id).subquery()
    joined = drafts.join(checks, true()).join(finals, true()).join(suite, true()).join(cases, true()).join(dataset, true()).join(name, true())
    row = session.execute(select(drafts, checks, finals, suite, cases, dataset, name).select_from(joined)).one()
    return "|".join([REPORT_VERSION, spec_digest(spec), *(str(x) for x in row)])


def warn_golden_without_expectations(*, session: Session, spec: EvalSpec, run: Run, results: list[CriterionResult]) -> None:
    """Add a warning to the golden-examples criterion for each golden case of the set without expectation fields.

    A warning, not a verdict: the case-expectations check silently does not run on such a case
    (webapp.datasets.loader.golden_expectation_warning says which cases need them).
    """
    golden = next((c for c in results if c.key == "golden_factual"), None)
    if golden is None:
        return
    for case_, message in datasets_service.golden_without_expectations(session=session, dataset_id=run.dataset_id, spec=spec):
        href = f"/datasets/{run.dataset_id}/cases/{quote(case_.case_id, safe='')}"
        golden.evidence.append(Evidence(case_.case_id, href, f"warning: {message}; add them to the dataset"))


def compute(*, session: Session, spec: EvalSpec, run: Run) -> GateParts:
    """Compute the run's whole-run gate criteria from its rows (what is stored; webapp.gates.facts.run_facts)."""
    pf = facts.run_facts(session=session, spec=spec, run=run)
    pilot = [c for c in criteria.pilot_criteria(pf, spec) if c.key != HUMAN]
    warn_golden_without_expectations(session=session, spec=spec, run=run, results=pilot)
    production = [c for c in criteria.pilot_criteria(pf, spec, min_cases=spec.gates.production.min_cases) if c.key != HUMAN]
    graded = [replace(d, results=None) for d in pf.drafts if d.needs_grade]
    return GateParts(pf.case_count, pilot, production, graded)


def refresh(*, session: Session, spec: EvalSpec, run: Run) -> bool:
    """Compute the run's gate criteria and store them with their inputs' fingerprint (read first, as for the PPI figures).

    Nothing is computed when the stored row is current already. A production week's run is no
    launch candidate: nothing is stored for it (return False).
    """
    if run.source == PRODUCTION_SOURCE or run.id is None:
        return False
    fp = fingerprint(session=session, spec=spec, run=run)
    row = figures.stored(session, KIND, str(run.id))
    if row is None or row.fingerprint != fp:  # a burst of grades: the first reaction stores them all, the rest find it current
        figures.store(session, KIND, str(run.id), fp, compute(session=session, spec=spec, run=run), _ADAPTER)
    return True


def gate_parts(*, session: Session, spec: EvalSpec, run: Run) -> tuple[GateParts, FigureState]:
    """Return the run's gate criteria as stored and whether they are current ("current" or "updating").

    Computed here (and not stored) when nothing is stored yet, or when the row is stale in a process
    without a jobs loop (webapp.core.figures.refresh_on_read).
    """
    fp = fingerprint(session=session, spec=spec, run=run)
    got: FigureRead[GateParts] = figures.read(session, KIND, str(run.id), fp, _ADAPTER)
    if got.value is None or (got.state != "current" and figures.refresh_on_read()):
        return compute(session=session, spec=spec, run=run), "current"
    return got.value, got.state


def stale_runs(*, session: Session, spec: EvalSpec) -> list[int]:
    """Return the launch candidates whose stored gate criteria are missing or older than their inputs, in id order."""
    stale: list[int] = []
    ids = session.execute(select(_R.c.id).where(_R.c.source != PRODUCTION_SOURCE).order_by(_R.c.id)).scalars().all()
    for run_id in ids:
        run = session.get(Run, run_id)
        row = figures.stored(session, KIND, str(run_id))
        if run is not None and (row is None or row.fingerprint != fingerprint(session=session, spec=spec, run=run)):
            stale.append(int(run_id))
    return stale


def refresh_outside_write_lock(*, engine: Engine, spec: EvalSpec, run_id: int) -> bool:
    """Compute a run's gate criteria in a read transaction, then store them in a short write one; return whether stored.

    The jobs loop's way (webapp/gates/background.py): on SQLite a writer's transaction holds the
    one write lock, and computing a large run's criteria takes a few hundred milliseconds, which
    every grade save and events batch would wait for. The fingerprint is read before the criteria,
    so a change committed in between leaves the row stale, and the next sweep computes it again.
    """
    with session_scope(engine, write=False) as read:
        run = read.get(Run, run_id)
        if run is None or run.source == PRODUCTION_SOURCE:
            return False
        fp = fingerprint(session=read, spec=spec, run=run)
        parts = compute(session=read, spec=spec, run=run)
    with session_scope(engine) as write:
        figures.store(write, KIND, str(run_id), fp, parts, _ADAPTER)
    return True


def refresh_stale(*, session: Session, spec: EvalSpec) -> list[int]:
    """Store again every launch candidate's gate criteria whose inputs changed since (or that have none); return the runs."""
    done: list[int] = []
    ids = session.execute(select(_R.c.id).where(_R.c.source != PRODUCTION_SOURCE).order_by(_R.c.id)).scalars().all()
    for run_id in ids:
        run = session.get(Run, run_id)
        row = figures.stored(session, KIND, str(run_id))
        if run is not None and (row is None or row.fingerprint != fingerprint(session=session, spec=spec, run=run)):
            refresh(session=session, spec=spec, run=run)
            done.append(int(run_id))
    return done
