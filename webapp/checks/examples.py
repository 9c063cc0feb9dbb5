"""The one count of a run's examples against its eval set, for `draftdesk check`, the checks page and the pilot gate.

The plan's automated-check criterion reads "80% of the 100 examples": the unit is the example
(case) of the eval set, never the draft. An example passes only when the run has a draft of it
and every draft (sample) of it is checked and passes; an example the run has no draft of counts
as failing (a run that drafted 3 of 100 cases is at 3%, not 100%). The pilot gate
(webapp.gates.criteria.automated_checks), the CLI's CI verdict and the run's checks page all call
`example_status` and `tally_examples`, so the three cannot read different figures of one run.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from webapp.checks.rules import problems
from webapp.checks.types import CheckResult
from webapp.datasets.mix import DatasetMix

ExampleStatus = Literal["pass", "fail", "unchecked", "missing"]


def example_status(drafts: Sequence[Sequence[CheckResult] | None]) -> ExampleStatus:
    """Return one example's status from its drafts' results (None: a draft not checked yet).

    missing: no draft; fail: a checked draft does not pass (a failed check, or no check applied);
    unchecked: otherwise some draft is not checked yet; pass: every draft is checked and passes.
    """
    if not drafts:
        return "missing"
    if any(results is not None and problems(results) for results in drafts):
        return "fail"
    if any(results is None for results in drafts):
        return "unchecked"
    return "pass"


@dataclass(frozen=True)
class ExampleTally:
    """How a run's examples stand against its eval set: passing, failing, unchecked and missing, of `total`."""

    passing: int
    failing: int
    unchecked: int
    missing: int
    total: int  # the examples of the eval set (the denominator of the pass rate)

    @property
    def rate(self) -> float | None:
        """Return passing examples / examples of the set (None for an empty set)."""
        return self.passing / self.total if self.total else None


def tally_examples(statuses: Iterable[ExampleStatus], *, total: int) -> ExampleTally:
    """Count example statuses against a set of `total` examples; examples not listed count as missing."""
    counts = {"pass": 0, "fail": 0, "unchecked": 0, "missing": 0}
    for status in statuses:
        counts[status] += 1
    listed = sum(counts.values())
    return ExampleTally(
        passing=counts["pass"],
        failing=counts["fail"],
        unchecked=counts["unchecked"],
        missing=counts["missing"] + max(0, total - listed),
        total=total,
    )


def size_shortfall(*, total: int, min_cases: int) -> str | None:
    """Say why a set of `total` examples is too small for a gate needing `min_cases` (None: large enough)."""
    return f"the eval set has {total} cases; this gate needs at least {min_cases}" if total < min_cases else None


def mix_shortfall(mix: DatasetMix | None) -> str | None:
    """Say how the set departs from the plan's stratified mix and intents (None: it matches, or no mix was read)."""
    off_plan = mix.mismatches() if mix is not None else []
    return "the eval set does not match the plan: " + "; ".join(off_plan) if off_plan else None


def set_shortfalls(*, total: int, mix: DatasetMix | None, min_cases: int) -> list[str]:
    """Return why the eval set itself cannot pass the automated-checks criterion (its size, its mix), whatever its rate.

    The pilot gate's criterion 1 (webapp.gates.criteria.automated_checks) and the CI verdict
    (webapp.checks.ci_gate) read the set through these two functions.
    """
    return [s for s in (size_shortfall(total=total, min_cases=min_cases), mix_shortfall(mix)) if s]
