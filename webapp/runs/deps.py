"""`RunDep`: the run a page or API route names in `run` (its name, or its id), or 404.

Every page and JSON route that looks one run up takes `run: RunDep` after its role check
(dependencies resolve in order, so a wrong role gets 403 before a lookup can answer 404).
Routes that name two runs (the comparison) call `run_or_404` for each.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException
from sqlmodel import Session

from webapp.core.db import SessionDep
from webapp.runs.models import Run
from webapp.runs.service import RunNotFound, resolve_run


def run_or_404(session: Session, ref: str) -> Run:
    """Return the run named `ref` (or numbered, when no run has that name), or fail with 404 saying so."""
    try:
        return resolve_run(session=session, ref=ref)
    except RunNotFound as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from None


def run_by_ref(run: str, session: SessionDep) -> Run:
    """Return the run the path (or query) parameter `run` names, or fail with 404."""
    return run_or_404(session, run)


RunDep = Annotated[Run, Depends(run_by_ref)]
