"""One draft's stored check results (the draft's checks page and JSON, the add-to-suite form)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlmodel import Session

from webapp.checks.rules import NO_CHECK_APPLIED, problems
from webapp.checks.service import ordered_results, stored_results
from webapp.checks.types import CheckResult
from webapp.core.timeutil import as_utc
from webapp.datasets.models import EvalCase
from webapp.runs.models import Draft, Run
from webapp.runs.service import DraftNotFound


@dataclass
class DraftChecks:
    """A draft's stored check results, with its case."""

    draft: Draft
    case: EvalCase
    run: Run
    results: list[CheckResult]
    checked_at: dt.datetime | None
    kb_version: str | None

    @property
    def passed(self) -> bool:
        return bool(self.results) and not problems(self.results)

    @property
    def no_check_applied(self) -> bool:
        return any(r.key == NO_CHECK_APPLIED for r in problems(self.results))


def draft_results(*, session: Session, draft_id: int) -> DraftChecks:
    """Return a draft's stored check results (empty when the run was never checked); raise DraftNotFound."""
    draft = session.get(Draft, draft_id)
    if draft is None:
        raise DraftNotFound(f"draft: no draft with id {draft_id}")
    case = session.get(EvalCase, draft.case_pk)
    run = session.get(Run, draft.run_id)
    assert case is not None and run is not None  # foreign keys guarantee both
    rows = stored_results(session, [draft_id]).get(draft_id, [])
    checked_at = max((as_utc(r.checked_at) for r in rows), default=None)
    return DraftChecks(
        draft=draft,
        case=case,
        run=run,
        results=ordered_results(rows),
        checked_at=checked_at,
        kb_version=rows[0].kb_version if rows else None,
    )

