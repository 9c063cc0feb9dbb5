"""What runs' pages, API and command line ask of grading, which sits above runs (webapp/core/hooks.py).

Grading answers both (webapp/grading/provides.py): how many grades each draft has (an import
keeps a graded draft's text and citations), and which drafts' model signals a viewer sees
(blind grading, from the drafts grading says the viewer has graded). The checks pages, above
runs and below grading too, ask the same `signals_view`.
"""

from __future__ import annotations

import functools
from collections.abc import Collection

from sqlmodel import Session

from webapp.auth.service import Principal
from webapp.core.blind import SignalsView
from webapp.core.hooks import hook
from webapp.core.spec import EvalSpec
from webapp.runs import service


@hook
def grade_counts(session: Session, draft_ids: list[int]) -> dict[int, int]:
    """Return how many grades each of these drafts has (drafts without any are left out)."""
    ...


@hook
def signals_view(
    *, session: Session, spec: EvalSpec, principal: Principal | None, run_id: int | None = None, draft_ids: Collection[int] = ()
) -> SignalsView:
    """Return which drafts' model signals the viewer sees (webapp.core.blind's rule; grading knows what they graded)."""
    ...


# Runs' import with grading's grade counts, so that a graded draft keeps its text and citations:
# the same keyword arguments as webapp.runs.service.import_drafts, less that one.
import_drafts = functools.partial(service.import_drafts, grade_counts=grade_counts)
