"""The checks pages' view models: a run's results and one draft's results, each built by a named function.

The pages (webapp.checks.pages) ask grading (webapp/runs/hooks.py) what the viewer may see (blind grading) and
the CI gate's reasons, and pass them in.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from webapp.checks.ci_gate import CiVerdict
from webapp.checks.draft_checks import DraftChecks
from webapp.checks.rules import PROBLEM_LABELS
from webapp.checks.service import RunSummary
from webapp.runs.models import Run


@dataclass(frozen=True)
class RunChecksView:
    """/runs/{run}/checks: the run's figures as the viewer may see them, its failing drafts and the CI gate."""

    run: Run
    s: RunSummary  # summary_for_viewer's: a blind grader's figures count only the drafts they graded
    gate: CiVerdict  # hooks.ci_verdict's: what fails, what was read and not, the drop alert's baseline
    can_recheck: bool
    can_add_case: bool
    flash: str | None
    labels: dict[str, str] = field(default_factory=lambda: dict(PROBLEM_LABELS))


def recheck_notice(summary: RunSummary, rechecked: bool) -> str | None:
    """Say, after a re-check, how many drafts were checked against the current KB."""
    return f"Re-checked {summary.checked} drafts against the current KB." if rechecked else None


@dataclass(frozen=True)
class DraftChecksView:
    """/drafts/{id}/checks: one draft's results with reasons (hidden from a blind grader until they grade it)."""

    d: DraftChecks
    hidden: bool
    can_add_case: bool
    labels: dict[str, str] = field(default_factory=lambda: dict(PROBLEM_LABELS))
