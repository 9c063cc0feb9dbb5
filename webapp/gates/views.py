"""The gates pages' view models: the index of runs and one gate's report with its sign-offs."""

from __future__ import annotations

from dataclasses import dataclass

from sqlmodel import Session, col, select

from webapp.auth.models import User
from webapp.core.spec import EvalSpec
from webapp.gates import service
from webapp.gates.models import GateSignoff
from webapp.gates.provenance import SignoffProvenance, signoff_provenance
from webapp.gates.report import GateReport
from webapp.runs.models import Run


@dataclass(frozen=True)
class GatesIndexView:
    """/gates: runs over eval datasets, newest first, with links to their gate reports."""

    runs: list[Run]


def gates_index_view(*, session: Session) -> GatesIndexView:
    """Build the gates index."""
    return GatesIndexView(runs=service.runs_for_gates(session=session))


@dataclass(frozen=True)
class GateReportView:
    """/gates/{gate}?run=: the verdict, every criterion with evidence, and the sign-offs."""

    report: GateReport
    run: Run
    gate: str
    signoffs: list[GateSignoff]
    signers: dict[int, User]  # who signed, by user id
    provenance: dict[int, SignoffProvenance]  # by sign-off id: who created the account and granted the role
    signoff_state: service.SignoffState
    can_sign: bool
    my_signoff: GateSignoff | None
    signoff_flash: str | None  # the sign-off's confirmation, shown in the section the redirect scrolls to
    error: str | None


def signers(*, session: Session, signed: list[GateSignoff]) -> dict[int, User]:
    """Return the users who signed, by id."""
    ids = {s.user_id for s in signed}
    if not ids:
        return {}
    return {u.id: u for u in session.exec(select(User).where(col(User.id).in_(ids))).all() if u.id is not None}


def gate_report_view(
    *, session: Session, spec: EvalSpec, gate: str, run: Run, run_id: int, user_id: int, can_sign: bool,
    signoff_flash: str | None, error: str | None,
) -> GateReportView:
    """Build a gate's report page for a run, as the viewer (`user_id`) sees it."""
    signed = service.signoffs(session=session, gate=gate, run_id=run_id)
    return GateReportView(
        report=service.report(session=session, spec=spec, gate=gate, run=run),
        run=run,
        gate=gate,
        signoffs=signed,
        signers=signers(session=session, signed=signed),
        provenance=signoff_provenance(session=session, signed=signed),
        signoff_state=service.signoff_state(spec=spec, signed=signed),
        can_sign=can_sign,
        my_signoff=next((x for x in signed if x.user_id == user_id), None),
        signoff_flash=signoff_flash,
        error=error,
    )
