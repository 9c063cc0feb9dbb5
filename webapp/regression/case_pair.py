"""One case of two compared runs, side by side: each run's first draft with its checks, final grade and
judge scores, and the word diff from A to B (the comparison's case page)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from sqlmodel import Session

from webapp.checks.draft_checks import draft_results
from webapp.checks.types import CheckResult
from webapp.core.db import stored_id
from webapp.core.spec import EvalSpec
from webapp.core.textdiff import Segment, word_diff
from webapp.datasets.models import EvalCase
from webapp.grading.status import FinalGradeView, final_grades
from webapp.regression.comparison import comparable_runs, drafted_cases
from webapp.runs.models import Draft, Run


@dataclass
class DraftSide:
    """One run's draft of the case with what is known about it."""

    run: Run
    draft: Draft
    checks: list[CheckResult]
    final_grade: FinalGradeView | None
    judge_scores: Mapping[str, object] | None
    judge_hidden: bool


@dataclass
class CasePair:
    """A case's drafts in runs A and B (first sample of each), with the word diff from A to B."""

    case: EvalCase
    a: DraftSide | None
    b: DraftSide | None
    diff: list[Segment]


class JudgeLookup(Protocol):
    """The prompt-evaluator judge's scores of one draft as the viewer may see them: (scores or None, hidden)."""

    def __call__(self, *, run_id: int, draft_id: int) -> tuple[Mapping[str, object] | None, bool]: ...


def _draft_side(
    session: Session, run: Run, draft_ids: list[int], finals: dict[int, FinalGradeView], judge: JudgeLookup | None
) -> DraftSide | None:
    if not draft_ids:
        return None
    draft = session.get(Draft, draft_ids[0])
    assert draft is not None and draft.id is not None and run.id is not None
    scores, hidden = judge(run_id=run.id, draft_id=draft.id) if judge else (None, False)
    return DraftSide(
        run=run,
        draft=draft,
        checks=draft_results(session=session, draft_id=draft.id).results,
        final_grade=finals.get(draft.id),
        judge_scores=scores,
        judge_hidden=hidden,
    )


def case_pair(
    *, session: Session, spec: EvalSpec, a_id: int, b_id: int, case_id: str, judge: JudgeLookup | None = None
) -> CasePair:
    """Return one case's drafts in both runs side by side, with the judge's scores `judge` lets the viewer see.

    The judge's scores belong to the evaluator, beside the chain: the caller passes them in
    (webapp.regression.judge_scores, which keeps them hidden from blind graders).
    """
    ra, rb = comparable_runs(session, a_id, b_id)
    info, drafts = drafted_cases(session, (a_id, b_id))
    if case_id not in info:
        raise LookupError(f"case: neither run has a draft for case {case_id!r}")
    sides: list[DraftSide | None] = []
    for run in (ra, rb):
        run_id = stored_id(run.id)
        finals = final_grades(session=session, run_id=run_id)
        sides.append(_draft_side(session, run, drafts[run_id].get(case_id, []), finals, judge))
    a, b = sides
    first = a or b
    assert first is not None
    case = session.get(EvalCase, first.draft.case_pk)
    assert case is not None
    return CasePair(
        case=case,
        a=a,
        b=b,
        diff=word_diff(a.draft.draft_text if a else None, b.draft.draft_text if b else None),
    )
