"""What every grading page shares: the router, role checks, keyboard shortcuts, the forms and their batch filter."""

from __future__ import annotations

from collections.abc import Mapping

from fastapi import APIRouter
from fastapi.responses import RedirectResponse
from pydantic import BaseModel

from webapp.grading.queue import BatchFilter
from webapp.grading.scores import GRADER_ROLES, SCALE_KEYS
from webapp.web.deps import require_role

# One router for every grading page: pages.py, adjudication_pages.py and reference_pages.py add to it
# (the app takes webapp.grading.pages.router, and pages.py imports the other two).
router = APIRouter(prefix="/grading")

GRADERS = require_role(*GRADER_ROLES)
LEAD = require_role("lead")

# Keys for every score: one keyboard row per criterion, so a grade is a handful of keystrokes.
SHORTCUTS: dict[str, list[str]] = {
    "citation_relevance": ["1", "2", "3", "4", "5"],
    "tone": ["q", "w", "e", "r", "t"],
    "completeness": ["a", "s", "d", "f", "g"],
}
FACTUAL_KEYS = {"pass": "p", "fail": "x"}


def batch_from(params: Mapping[str, str], run_id: int) -> BatchFilter:
    """Return the batch filter named by query parameters or form fields (`intent`: the case's; `draft_intent`: the draft's)."""
    golden_raw = (params.get("golden") or "").strip()
    return BatchFilter(
        run_id=run_id,
        category=(params.get("category") or "").strip() or None,
        intent=(params.get("intent") or "").strip() or None,
        draft_intent=(params.get("draft_intent") or "").strip() or None,
        golden=None if golden_raw == "" else golden_raw in ("1", "true", "yes", "on"),
    )


def see_other(url: str) -> RedirectResponse:
    """Redirect after a form (303: the browser follows with a GET)."""
    return RedirectResponse(url, status_code=303)


class BatchForm(BaseModel):
    """The batch filter a grading form carries along (hidden fields)."""

    category: str = ""
    intent: str = ""
    draft_intent: str = ""
    golden: str = ""

    def batch(self, run_id: int) -> BatchFilter:
        """Return the batch filter for the run."""
        return batch_from(self.model_dump(), run_id)


class ScoresForm(BaseModel):
    """Rubric scores as typed in a form (the service checks them against the spec and names a bad field)."""

    factual_accuracy: str = ""
    citation_relevance: str = ""
    tone: str = ""
    completeness: str = ""
    rationale: str = ""
    unsupported_claim: str = ""

    def scores_data(self) -> dict[str, str | None]:
        """Return the raw scores for validate_scores."""
        return {k: getattr(self, k) or None for k in ("factual_accuracy", *SCALE_KEYS)} | {
            "rationale": self.rationale,
            "unsupported_claim": self.unsupported_claim,
        }


class GradeForm(ScoresForm, BatchForm):
    """The grading form: scores, the batch it came from, and next=1 for save-and-next."""

    next: str = ""


class SkipForm(BatchForm):
    """Skip a draft: a reason from the short list, and a few words for "other"."""

    reason: str = ""
    detail: str = ""


class ResolveForm(ScoresForm):
    """The lead's final grade of a disagreement, with one note."""

    note: str = ""


class ReturnForm(BaseModel):
    """Return one grade of a disagreement to its grader."""

    grade_id: str = ""
    comment: str = ""


class ReferenceForm(BaseModel):
    """A new version of a reference response."""

    text: str = ""
    note: str = ""
    draft: str = ""
