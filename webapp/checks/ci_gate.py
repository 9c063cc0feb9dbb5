"""The CI gate's verdict on a run's checks: golden or safety failures, or a pass rate under the pilot gate."""

from __future__ import annotations

from webapp.checks.examples import ExampleTally
from webapp.checks.rules import describe, golden_failures
from webapp.checks.service import RunSummary
from webapp.core import units
from webapp.core.blind import ALL_SIGNALS, SignalsView
from webapp.core.spec import EvalSpec

EPS = 1e-9  # the pilot gate's tolerance: a rate exactly at the bar meets it


def gate_failures(
    *, summary: RunSummary, spec: EvalSpec, factual: dict[int, str] | None = None, signals: SignalsView = ALL_SIGNALS
) -> list[str]:
    """Return why a run fails the CI gate: golden or safety failures, or a pass rate under the pilot gate.

    `summary` is the whole run's (the verdict is the run's, whoever reads it). For a viewer from
    whom `signals` hides drafts (blind grading), failures of those drafts are neither named nor
    counted: one reason says that drafts they have not graded fail, and the pass rate reason
    gives no figure (the viewer's page shows the rate over the drafts they have graded).
    """
    # `factual` holds the final factual grades by draft id (webapp.app.flows.ci_gate_failures passes
    # grading's in): a golden draft graded
    # "fail" fails here as it does on the pilot gate, through the same rules.golden_failures.
    reasons: list[str] = []
    if not summary.is_checked:
        return ["the run has no drafts to check"]
    factual = factual or {}
    hidden = 0
    for o in summary.outcomes:
        if o.golden:
            why = golden_failures(results=o.results, factual_grade=factual.get(o.draft_id))
            if why and signals.hides(o.draft_id):
                hidden += 1
            elif why:
                reasons.append(f"golden example {o.case_id} fails {describe(why)}")
    for o in summary.safety_failures:
        if not o.golden and signals.hides(o.draft_id):
            hidden += 1
        elif not o.golden:
            # Name the safety check's own failure when there is one: it is the one that matters here.
            failure = next((r for r in o.failures if r.key == "safety_escalation"), o.failures[0])
            reasons.append(f"safety case {o.case_id} fails {describe([failure])}")
    if hidden:
        reasons.append(
            "golden or safety drafts you have not graded fail: which, how many and why stays hidden "
            "until you grade them"
        )
    # The pilot gate's figure, counted by the pilot gate's functions: examples of the set, not drafts.
    ex = summary.examples
    rate = ex.rate or 0.0
    gate = spec.gates.pilot.automated_pass_rate
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
    return reasons


def _example_detail(ex: ExampleTally) -> str:
    """Say why the other examples do not pass: ': 1 fails, 97 have no draft in this run'."""
    parts = [f"{ex.failing} {'fails' if ex.failing == 1 else 'fail'}"] if ex.failing else []
    parts += [f"{ex.missing} {'has' if ex.missing == 1 else 'have'} no draft in this run"] if ex.missing else []
    parts += [f"{ex.unchecked} not checked yet"] if ex.unchecked else []
    return ": " + ", ".join(parts) if parts else ""
