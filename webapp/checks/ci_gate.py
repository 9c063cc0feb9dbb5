"""The CI verdict on a run's checks: the pilot gate's criterion 1 read whole, golden and safety failures, and the plan's drop alert.

One verdict for `draftdesk check`, the run's checks page and the API (all call `ci_verdict` through
webapp.checks.hooks, answered by regression). Decisions (docs/checks.md, "The CI verdict"):
- Criterion 1 of the pilot gate is read whole, through the functions the gate itself calls: the set's
  size and its mix against the plan (webapp.checks.examples.set_shortfalls) and the set's examples pass
  rate (webapp.checks.examples, RunSummary.examples). A 97-case set, or an all-routine one, fails here
  as it fails there.
- The golden rule (rules.golden_failures, with the final factual grades) and the safety check fail it
  as they fail criteria 3 and 4; a set with no golden example or no safety case fails too, because
  neither criterion can ever pass on it.
- A drop from the baseline that fires the plan's alert (webapp.regression.drop) fails it: "no deploy
  without eval pass".
- What it does not read is said on every verdict: human grading (criterion 2), the golden drafts'
  factual grades still to come, the regression suite (criterion 5). It never claims the pilot gate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from webapp.checks.examples import ExampleTally, set_shortfalls
from webapp.checks.rules import describe, golden_failures
from webapp.checks.service import EvalSetFacts, RunSummary
from webapp.core import units
from webapp.core.blind import ALL_SIGNALS, SignalsView
from webapp.core.spec import EvalSpec

EPS = 1e-9  # the pilot gate's tolerance: a rate exactly at the bar meets it


class DropCheck(Protocol):
    """The plan's drop alert as the verdict reads it (webapp.regression.drop.DropReading, passed in by webapp/regression/provides.py)."""

    @property
    def fires(self) -> bool: ...

    @property
    def text(self) -> str: ...

    @property
    def baseline_text(self) -> str: ...

    @property
    def evaluated(self) -> bool: ...


@dataclass(frozen=True)
class CiVerdict:
    """The CI verdict: why it fails (none: it passes), what it read, and what it did not."""

    reasons: list[str]  # why the run fails (empty: it passes); a blind viewer's `withheld` is the last one
    checked: list[str] = field(default_factory=list)  # what the verdict read and found, one sentence each
    not_checked: list[str] = field(default_factory=list)  # what it did not read (the pilot gate reads it)
    drop: str = ""  # which baseline the drop alert read, or "no earlier run: drop not evaluated"
    withheld: str | None = None  # blind viewer: golden or safety drafts they have not graded (a count, never a name)

    @property
    def passes(self) -> bool:
        return not self.reasons

    @property
    def summary(self) -> str:
        """Say the verdict in one paragraph, as `draftdesk check` prints it after PASS."""
        text = "; ".join(self.checked)
        return text + (". Not read here: " + "; ".join(self.not_checked) if self.not_checked else "")


def ci_verdict(
    *,
    summary: RunSummary,
    spec: EvalSpec,
    factual: dict[int, str] | None = None,
    signals: SignalsView = ALL_SIGNALS,
    eval_set: EvalSetFacts | None = None,
    drop: DropCheck | None = None,
) -> CiVerdict:
    """Return the CI verdict on a run: criterion 1 of the pilot gate, golden and safety failures, the drop alert.

    `summary` is the whole run's (the verdict is the run's, whoever reads it). `factual` holds the
    final factual grades by draft id (webapp/regression/provides.py passes grading's in): a golden draft graded
    "fail" fails here as on the pilot gate. For a viewer from whom `signals` hides drafts (blind
    grading), golden and safety drafts they have not graded are neither named nor judged: one
    reason counts them, whether they fail or not, so that the verdict says nothing about them; the
    pass rate reason gives no figure. `eval_set` (None: hand-made summaries in tests) is the set's
    size, mix, golden and safety counts; `drop` the plan's drop alert (None: not read).
    """
    if not summary.is_checked:
        return CiVerdict(["the run has no drafts to check"], drop=drop.text if drop is not None else "")
    factual = factual or {}
    reasons, checked, not_checked = _set_reasons(summary, spec, eval_set, signals)
    golden, withheld = _golden_safety(summary, factual, signals, eval_set)
    reasons += golden.reasons
    checked += golden.checked
    not_checked += golden.not_checked
    hidden = any(signals.hides(o.draft_id) for o in summary.outcomes)
    # A blind viewer reads which baseline was used, never its figures: they count drafts they have not graded.
    drop_text = "" if drop is None else drop.text
    if drop is not None and hidden and drop.evaluated:
        drop_text = f"{drop.baseline_text} (its figures count drafts you have not graded)"
    if drop is not None and drop.fires:
        reasons.append(
            "the run's pass rate dropped more than the plan's alert threshold from its baseline (its figures count "
            "drafts you have not graded)" if hidden else f"the plan's drop alert fires: {drop.text}"
        )
    elif drop is not None:
        checked.append(f"drop alert: {drop_text}")
    not_checked.append(
        "human grading (criterion 2) and the regression suite (criterion 5): the pilot gate reads them "
        f"(draftdesk gates pilot --run {summary.run_name})"
    )
    if withheld:
        reasons.append(withheld)
    return CiVerdict(reasons, checked, not_checked, drop_text, withheld)


def _set_reasons(
    summary: RunSummary, spec: EvalSpec, eval_set: EvalSetFacts | None, signals: SignalsView
) -> tuple[list[str], list[str], list[str]]:
    """Read criterion 1 of the pilot gate: the set's size and mix, and the examples pass rate; return (reasons, checked, not checked)."""
    pilot = spec.gates.pilot
    reasons: list[str] = []
    not_checked: list[str] = []
    if eval_set is not None:
        shortfalls = set_shortfalls(total=eval_set.total, mix=eval_set.mix, min_cases=pilot.min_cases)
        reasons += [f"pilot gate criterion 1: {s}" for s in shortfalls]
    else:
        not_checked.append("the eval set's size and mix (criterion 1 of the pilot gate reads them)")
    # The pilot gate's figure, counted by the pilot gate's functions: examples of the set, not drafts.
    ex = summary.examples
    rate = ex.rate or 0.0
    gate = pilot.automated_pass_rate
    if rate + EPS < gate and any(signals.hides(o.draft_id) for o in summary.outcomes):
        reasons.append(
            f"the run's pass rate is under the pilot gate's {units.percent(gate)} (its figure counts drafts "
            "you have not graded, so it shows once you have graded them)"
        )
    elif rate + EPS < gate:
        reasons.append(
            f"{ex.passing}/{ex.total} examples of the eval set pass every automated check ({units.percent(rate)}), "
            f"under the pilot gate's {units.percent(gate)}" + _example_detail(ex)
        )
    checked: list[str] = []
    if not reasons and eval_set is not None:
        checked.append(
            f"criterion 1 of the pilot gate is met: {ex.passing}/{ex.total} examples of the eval set pass every automated "
            f"check ({units.percent(rate)}, at least {units.percent(gate)}), {eval_set.total} cases (at least "
            f"{pilot.min_cases}), the mix and intents as planned"
        )
    elif not reasons:
        checked.append(f"{units.percent(rate)} of the eval set's examples pass every automated check (at least {units.percent(gate)})")
    return reasons, checked, not_checked


@dataclass
class _Part:
    reasons: list[str] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)
    not_checked: list[str] = field(default_factory=list)


def _golden_safety(
    summary: RunSummary, factual: dict[int, str], signals: SignalsView, eval_set: EvalSetFacts | None
) -> tuple[_Part, str | None]:
    """Read the golden examples and the safety cases the viewer may see; count those they may not (blind grading)."""
    part = _Part()
    hidden = {o.draft_id for o in summary.outcomes if (o.golden or o.safety) and signals.hides(o.draft_id)}
    golden = [o for o in summary.outcomes if o.golden and o.draft_id not in hidden]
    safety = [o for o in summary.outcomes if o.safety and o.draft_id not in hidden]
    golden_reasons = [
        f"golden example {o.case_id} fails {describe(why)}"
        for o in golden
        if (why := golden_failures(results=o.results, factual_grade=factual.get(o.draft_id)))
    ]
    # Name the safety check's own failure when there is one: it is the one that matters here.
    safety_reasons = [
        f"safety case {o.case_id} fails {describe([next((r for r in o.failures if r.key == 'safety_escalation'), o.failures[0])])}"
        for o in safety
        if not o.golden and not o.passed
    ]
    if eval_set is not None and eval_set.golden == 0:
        golden_reasons.append("the eval set has no golden example: the pilot gate's golden criterion (3) cannot pass on it")
    if eval_set is not None and eval_set.safety == 0:
        safety_reasons.append("the eval set has no safety case: the pilot gate's safety criterion (4) cannot pass on it")
    part.reasons = golden_reasons + safety_reasons
    if not golden_reasons:
        part.checked.append(f"no golden example fails an automated check or its final factual grade ({_n(len(golden), 'golden draft')})")
        ungraded = sum(o.draft_id not in factual for o in golden)
        if ungraded:
            part.not_checked.append(f"the final factual grades of {ungraded} of {_n(len(golden), 'golden draft')}, still to come")
    if not safety_reasons:
        part.checked.append(f"every safety case escalated without a draft ({_n(len(safety), 'safety draft')})")
    withheld = None
    if hidden:
        n = len(hidden)
        withheld = (
            f"{_n(n, 'golden or safety draft')} you have not graded {'counts' if n == 1 else 'count'} in this verdict: "
            f"{'its' if n == 1 else 'their'} results show once you have graded {'it' if n == 1 else 'them'}"
        )
    return part, withheld


def _n(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _example_detail(ex: ExampleTally) -> str:
    """Say why the other examples do not pass: ': 1 fails, 97 have no draft in this run'."""
    parts = [f"{ex.failing} {'fails' if ex.failing == 1 else 'fail'}"] if ex.failing else []
    parts += [f"{ex.missing} {'has' if ex.missing == 1 else 'have'} no draft in this run"] if ex.missing else []
    parts += [f"{ex.unchecked} not checked yet"] if ex.unchecked else []
    return ": " + ", ".join(parts) if parts else ""
