"""Runs and their drafts: lookups shared by every domain."""

from __future__ import annotations

from sqlmodel import Session, select

from webapp.runs.models import Run


class RunNotFound(LookupError):
    """No run has that name or id."""


def resolve_run(*, session: Session, ref: str | int) -> Run:
    """Return the run named `ref`, or with id `ref` when no run has that name; raise RunNotFound."""
    ref_s = str(ref).strip()
    run = session.exec(select(Run).where(Run.name == ref_s)).first()
    if run is None and ref_s.isdigit():
        run = session.get(Run, int(ref_s))
    if run is None:
        raise RunNotFound(f"run: no run named or numbered {ref_s!r}")
    return run
