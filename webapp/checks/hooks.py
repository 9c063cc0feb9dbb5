"""What the checks' pages, API and command line ask of the domains above checks (webapp/core/hooks.py).

The CI gate reads the golden drafts' final factual grades (grading) and the drop alert
(regression), and its compare link names the drop alert's baseline: regression answers both
(webapp/regression/provides.py), since it may import checks and grading.
"""

from __future__ import annotations

from sqlmodel import Session

from webapp.checks.ci_gate import CiVerdict
from webapp.checks.service import RunSummary
from webapp.core.blind import ALL_SIGNALS, SignalsView
from webapp.core.hooks import hook
from webapp.core.spec import EvalSpec
from webapp.runs.models import Run


@hook
def ci_verdict(*, session: Session, spec: EvalSpec, summary: RunSummary, signals: SignalsView = ALL_SIGNALS) -> CiVerdict:
    """Return the CI verdict on a run (webapp.checks.ci_gate): criterion 1 whole, golden and safety, the drop alert."""
    ...


@hook
def baseline_of(*, session: Session, run_id: int) -> Run | None:
    """Return the run the drop alert measures a run from (marked baseline, else the previous checked run), or None.

    The CI verdict's compare link compares with it, so the link shows the comparison the verdict read.
    """
    ...


def ci_gate_failures(*, session: Session, spec: EvalSpec, summary: RunSummary, signals: SignalsView = ALL_SIGNALS) -> list[str]:
    """Return why a run fails the CI gate: its checks, and the final factual grades of its golden drafts.

    A failure of a draft whose signals `signals` hides is counted, not named (blind grading).
    """
    return ci_verdict(session=session, spec=spec, summary=summary, signals=signals).reasons
