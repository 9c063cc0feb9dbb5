"""The plan's drop alert: a run's pass rate against its baseline, read by the alert, the run's checks page, `/runs/compare` and `draftdesk check`.

"Alert if ... overall pass rate drops more than 5% from the previous baseline" (the spec's
regression plan). Decisions (docs/checks.md, "Baselines and regression alerts"):
- The rate is the run's pass rate everywhere else: the share of the eval set's examples that pass
  (webapp.checks.examples; a case the run has no draft of does not pass), never the drafts' share.
  A run that drops cases cannot hide a drop by drafting fewer of them.
- The baseline is the run marked as its dataset's baseline, when one is marked (and it is not the run
  itself); otherwise the previous checked run of the same dataset (by name, as a marked baseline is:
  its earlier versions too), created before this one. Production-week runs are never a baseline.
  A new install, where nobody marked anything, so evaluates the drop from its second checked run on.
- "More than 5%" is read as more than 5 percentage points; exactly 5 points does not fire.
- Without an earlier checked run (or when the run or its baseline is not checked), the drop is not
  evaluated, and every reader says so: "no earlier run: drop not evaluated".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sqlalchemy import and_, exists, or_
from sqlmodel import Session, col, select

from webapp.checks import service as checks_service
from webapp.checks.examples import ExampleTally
from webapp.checks.models import DraftCheck
from webapp.checks.service import RunSummary
from webapp.core import units
from webapp.core.db import stored_id
from webapp.core.spec import EvalSpec
from webapp.regression.service import baseline_for, runs_of_dataset
from webapp.runs.models import PRODUCTION_SOURCE, Run

BaselineKind = Literal["marked", "previous", "compared"]
# Pass rates are ratios of small integers; a drop of exactly the threshold (0.85 -> 0.80) must not
# alert because of floating-point noise.
EPS = 1e-9
NOT_EVALUATED = "no earlier run: drop not evaluated"


@dataclass(frozen=True)
class AlertBaseline:
    """The run a drop is measured from, and why it is the one: marked as baseline, or the previous checked run."""

    run: Run
    kind: BaselineKind

    @property
    def name(self) -> str:
        return self.run.name

    @property
    def why(self) -> str:
        """Say why this run is the baseline: 'marked as the dataset's baseline' or 'the previous checked run; no baseline marked'."""
        if self.kind == "marked":
            return "marked as the dataset's baseline"
        if self.kind == "compared":
            return "run A of this comparison"
        return "the previous checked run of the dataset; no baseline marked"


def previous_checked_run(*, session: Session, run: Run) -> Run | None:
    """Return the newest checked run of the run's dataset created before it (production-week runs left out)."""
    earlier = or_(
        col(Run.created_at) < run.created_at,
        and_(col(Run.created_at) == run.created_at, col(Run.id) < run.id),
    )
    checked = exists().where(col(DraftCheck.run_id) == col(Run.id))
    return session.exec(
        select(Run)
        .where(col(Run.id).in_(runs_of_dataset(session=session, run=run)), col(Run.id) != run.id, Run.source != PRODUCTION_SOURCE)
        .where(earlier, checked)
        .order_by(col(Run.created_at).desc(), col(Run.id).desc())
        .limit(1)
    ).first()


def alert_baseline(*, session: Session, run_id: int) -> AlertBaseline | None:
    """Return the drop alert's baseline of a run: the marked baseline of its dataset, else the previous checked run."""
    marked = baseline_for(session=session, run_id=run_id)
    if marked is not None and marked.id != run_id:
        return AlertBaseline(marked, "marked")
    run = session.get(Run, run_id)
    assert run is not None  # baseline_for raised LookupError otherwise
    previous = previous_checked_run(session=session, run=run)
    return AlertBaseline(previous, "previous") if previous is not None else None


@dataclass(frozen=True)
class DropReading:
    """A run's examples pass rate against its baseline's, and whether the plan's drop alert fires."""

    run_name: str
    baseline: AlertBaseline | None
    examples: ExampleTally | None  # None: the run is not checked
    baseline_examples: ExampleTally | None  # None: no baseline, or it is not checked
    threshold: float  # the alert's drop as a share (0.05 = 5 points)

    @property
    def rate(self) -> float | None:
        return self.examples.rate if self.examples is not None else None

    @property
    def baseline_rate(self) -> float | None:
        return self.baseline_examples.rate if self.baseline_examples is not None else None

    @property
    def drop(self) -> float | None:
        """Return the baseline's rate minus the run's (positive: a drop), or None when not evaluated."""
        if self.rate is None or self.baseline_rate is None:
            return None
        return self.baseline_rate - self.rate

    @property
    def evaluated(self) -> bool:
        return self.drop is not None

    @property
    def fires(self) -> bool:
        """Tell whether the drop is more than the threshold (exactly the threshold does not fire)."""
        return self.drop is not None and self.drop > self.threshold + EPS

    @property
    def limit(self) -> str:
        return f"{self.threshold * 100:g}-point"

    @property
    def baseline_text(self) -> str:
        """Say which baseline was used: 'baseline run-a (the previous checked run of the dataset; no baseline marked)'."""
        if self.baseline is None:
            return NOT_EVALUATED
        return f"baseline {self.baseline.name} ({self.baseline.why})"

    @property
    def change_text(self) -> str:
        """Say the change in points: 'down 12.0 points' or 'up 1.0 points' or 'unchanged'."""
        drop = self.drop
        if drop is None:
            return ""
        if abs(drop) < EPS:
            return "unchanged"
        return f"{'down' if drop > 0 else 'up'} {abs(drop) * 100:.1f} points"

    @property
    def text(self) -> str:
        """Say what the alert read, as every page and `check` show it (the baseline named, or why nothing was read)."""
        if self.baseline is None:
            return NOT_EVALUATED
        if self.examples is None:
            return f"{self.baseline_text}: this run is not checked yet, drop not evaluated"
        if self.baseline_examples is None:
            return f"{self.baseline_text} is not checked: drop not evaluated"
        if self.fires:
            verdict = f"more than the {self.limit} threshold: the drop alert fires"
        elif (self.drop or 0) > EPS:
            verdict = f"not more than the {self.limit} threshold: no drop alert"
        else:
            verdict = "no drop alert"
        return (
            f"{self.baseline_text}: {_share(self.baseline_examples)} of the set's examples pass there, "
            f"{_share(self.examples)} here, {self.change_text}, {verdict}"
        )


def _share(ex: ExampleTally) -> str:
    return f"{units.percent(ex.rate)} ({ex.passing}/{ex.total})"


def _checked_examples(summary: RunSummary) -> ExampleTally | None:
    # An unchecked run's examples all read "unchecked" (0%): that is no pass rate to compare.
    return summary.examples if summary.is_checked else None


def drop_reading(
    *, session: Session, spec: EvalSpec, run_id: int, summary: RunSummary | None = None
) -> DropReading:
    """Read the plan's drop alert for a run: its baseline, both examples pass rates, and whether it fires.

    `summary` is the run's whole check summary (never a blind viewer's) when the caller holds it.
    """
    run_summary = summary if summary is not None else checks_service.run_summary(session=session, run_id=run_id)
    baseline = alert_baseline(session=session, run_id=run_id)
    base = None
    if baseline is not None:
        base = _checked_examples(checks_service.run_summary(session=session, run_id=stored_id(baseline.run.id)))
    return DropReading(
        run_name=run_summary.run_name,
        baseline=baseline,
        examples=_checked_examples(run_summary),
        baseline_examples=base,
        threshold=spec.regression.alert_pass_rate_drop,
    )


@dataclass(frozen=True)
class CompareDrop:
    """The plan's drop rule on a comparison: B against A, and B's own alert (against its baseline)."""

    pair: DropReading  # A as the baseline: what the plan's rule says of these two runs
    own: DropReading  # B's drop alert as raised, against its baseline (drop_reading)

    @property
    def a_is_baseline(self) -> bool:
        """Tell whether A is the baseline B's own alert reads (then the pair's reading is the alert)."""
        own, pair = self.own.baseline, self.pair.baseline
        return own is not None and pair is not None and own.run.id == pair.run.id

    @property
    def fires(self) -> bool:
        return self.pair.fires


def compare_drop(*, session: Session, spec: EvalSpec, a_run: Run, a: RunSummary, b: RunSummary) -> CompareDrop:
    """Read the plan's drop rule on two compared runs (A before, B after), and B's own drop alert."""
    pair = DropReading(
        run_name=b.run_name,
        baseline=AlertBaseline(a_run, "compared"),
        examples=_checked_examples(b),
        baseline_examples=_checked_examples(a),
        threshold=spec.regression.alert_pass_rate_drop,
    )
    return CompareDrop(pair=pair, own=drop_reading(session=session, spec=spec, run_id=b.run_id, summary=b))
