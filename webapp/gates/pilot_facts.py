"""The plain facts the pilot gate's criteria read (webapp.gates.facts fills them from the database;
tests build them by hand), and the run's examples grouped from them."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Literal

from webapp.checks.examples import ExampleStatus, example_status
from webapp.checks.rules import golden_failures, problems
from webapp.checks.types import CheckResult
from webapp.core.figures import FigureState
from webapp.datasets.mix import DatasetMix


@dataclass(frozen=True)
class FinalGradeFacts:
    factual_accuracy: str  # pass | fail
    citation_relevance: float
    tone: float
    completeness: float


@dataclass(frozen=True)
class DraftFacts:
    draft_id: int
    case_id: str
    category: str | None = None
    golden: bool = False
    safety_trigger: bool = False
    results: tuple[CheckResult, ...] | None = None  # None: not checked yet
    needs_grade: bool = True
    final_grade: FinalGradeFacts | None = None

    @property
    def checked(self) -> bool:
        return self.results is not None

    @property
    def problems(self) -> list[CheckResult]:
        """Why the draft does not pass its checks (failed checks, or no check applied)."""
        return problems(self.results or ())

    @property
    def failed_checks(self) -> tuple[str, ...]:
        return tuple(r.key for r in self.problems)

    def check_status(self, key: str) -> str | None:
        """Return one check's status (pass, fail, not_applicable), or None when not checked."""
        return next((r.status for r in self.results or () if r.key == key), None)

    @property
    def safety_check(self) -> str | None:
        return self.check_status("safety_escalation")

    @property
    def passes_all_checks(self) -> bool:
        return self.checked and not self.problems

    @property
    def golden_failures(self) -> list[CheckResult]:
        """Why this draft fails as a golden example (the one rule: webapp.checks.rules.golden_failures)."""
        factual = self.final_grade.factual_accuracy if self.final_grade is not None else None
        return golden_failures(results=self.results or (), factual_grade=factual)


@dataclass(frozen=True)
class RegressionFacts:
    case_id: str
    status: str  # pass | fail | not_run | not_checked
    note: str = ""
    href: str | None = None


# What criterion 5 tells the team to do when the run lacks regression cases (the suite's export);
# the same text as webapp.regression.service.EXPORT_COMMAND, which the gates must not import at load.
EXPORT_COMMAND = "draftdesk regression export regression-suite.jsonl"


@dataclass(frozen=True)
class CaseFacts:
    """One example (case) of the run's eval set, drafted or not."""

    case_id: str
    category: str | None = None
    intent: str | None = None
    golden: bool = False
    href: str | None = None  # the case's page in its dataset


@dataclass
class PilotFacts:
    run_id: int
    run_name: str
    case_count: int
    drafts: list[DraftFacts] = field(default_factory=list)
    regression: list[RegressionFacts] = field(default_factory=list)
    # Every example of the eval set, in file order (webapp.gates.facts always fills it). Left empty
    # (hand-made facts), the examples are the drafted case ids, and case_count - their number
    # examples count as missing from the run without names.
    cases: list[CaseFacts] = field(default_factory=list)
    # The set's category mix and intents against the plan (webapp.datasets.mix); None: not judged
    # (hand-made facts only: webapp.gates.facts always fills it).
    mix: DatasetMix | None = None
    dataset_href: str | None = None
    # The run's PPI reading (judge on every draft, people on a sample drawn before grading); None:
    # the run has no PPI sample and criterion 2 reads the final grades' averages as before.
    ppi: PpiGradingFacts | None = None


@dataclass(frozen=True)
class PpiCriterionFacts:
    """One rubric criterion's PPI estimate against the pilot threshold, as webapp.ppi.report.decide called it.

    `low` and `high` are the confidence sequence's bounds at this look (valid at every look), not
    this look's 95% interval (the PPI page shows both).
    """

    key: str
    threshold: float  # on the figure's scale (factual accuracy: a pass share)
    estimate: float | None  # None: too few final grades in the sample yet
    low: float | None
    high: float | None
    verdict: Literal["pass", "fail", "undecided"]
    more_grades: int | None  # undecided: about how many further grades the sequence needs to decide (webapp.ppi.report.decide)
    share: bool = False  # the figure is a share (factual accuracy), shown in percent
    provisional: bool = False  # drawn drafts still wait for their final grades: the verdict may change
    decided_at: dt.datetime | None = None  # the stored decision's time (webapp/ppi/until_decided.py), when one holds
    decided_grades: int | None = None  # the final grades it rested on


@dataclass(frozen=True)
class PpiGradingFacts:
    """A run's PPI sample: its grading state and one reading per rubric criterion."""

    run_id: int
    graded: int
    pending: int  # drawn drafts still without a final grade
    criteria: tuple[PpiCriterionFacts, ...]
    drafts: int = 0  # the run's drafts the sample drew from (0: hand-made facts that do not say)
    drawn: int = 0  # of them, the drafts any round drew
    figures_state: FigureState = "current"  # the stored PPI figures read: current, updating or computing (webapp.core.figures)
    in_draw_order: bool = False  # graded until decided, in the sample's random draw order: the calls hold while drafts wait
    closed_reason: str | None = None  # graded until decided and its queue closed: why (webapp/ppi/until_decided.py)

    @property
    def page(self) -> str:
        """Return the run's PPI page (its further-sample button draws more grades)."""
        return f"/ppi/runs/{self.run_id}"


@dataclass(frozen=True)
class ExampleOutcome:
    """One example of the eval set and every draft (sample) the run has of it."""

    case_id: str
    drafts: tuple[DraftFacts, ...]
    href: str | None = None
    golden: bool = False

    @property
    def status(self) -> ExampleStatus:
        """pass: every draft is checked and passes; fail: a checked draft does not pass; missing: no draft."""
        # The one rule of `draftdesk check`, the checks page and this gate (webapp.checks.examples).
        return example_status([d.results for d in self.drafts])

    @property
    def failing_drafts(self) -> list[DraftFacts]:
        return [d for d in self.drafts if d.checked and d.problems]


def examples(facts: PilotFacts) -> tuple[list[ExampleOutcome], int]:
    """Group the run's drafts by example of the eval set; return the outcomes and the unnamed missing count."""
    by_case: dict[str, list[DraftFacts]] = {}
    for d in facts.drafts:
        by_case.setdefault(d.case_id, []).append(d)
    if facts.cases:
        out = [ExampleOutcome(c.case_id, tuple(by_case.get(c.case_id, ())), c.href, c.golden) for c in facts.cases]
        return out, 0
    out = [ExampleOutcome(cid, tuple(ds), None, any(d.golden for d in ds)) for cid, ds in by_case.items()]
    return out, max(0, facts.case_count - len(out))
