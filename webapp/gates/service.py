"""Launch-gate reports (pilot and production) and their sign-offs."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Literal

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from webapp.auth import audit
from webapp.auth.service import Principal
from webapp.core.db import stored_id
from webapp.core.figures import FigureState
from webapp.core.spec import EvalSpec
from webapp.core.timeutil import as_utc, utcnow
from webapp.gates import criteria, facts, production_criteria, stored_report
from webapp.gates.models import GateSignoff
from webapp.gates.report import GateReport
from webapp.gates.schemas import gate_report_public
from webapp.metrics import daily as metrics_daily
from webapp.runs.models import PRODUCTION_SOURCE, Run

Gate = Literal["pilot", "production"]
GATES: tuple[str, ...] = ("pilot", "production")


class GateError(ValueError):
    """A gate request that cannot be honoured; the message names the field."""


class SignoffConflict(GateError):
    """This person already signed this gate for this run (pages answer 409)."""


class FiguresUpdating(GateError):
    """The report reads stored figures whose inputs changed since they were computed: not signed until they are current (409)."""


def today_in(spec: EvalSpec) -> dt.date:
    """Return today's date in the spec's time zone (the same day the metrics pages count to)."""
    return metrics_daily.today_in(spec)


def _worst(*states: FigureState) -> FigureState:
    """Return the least current of the states (computing, then updating, then current)."""
    return "computing" if "computing" in states else "updating" if "updating" in states else "current"


def pilot_report(*, session: Session, spec: EvalSpec, run: Run) -> GateReport:
    """Evaluate the pilot gate for a run over its dataset (its whole-run criteria read stored: webapp/gates/stored_report.py)."""
    assert run.id is not None
    parts, state = stored_report.gate_parts(session=session, spec=spec, run=run)
    ppi = facts.ppi_facts(session=session, spec=spec, run_id=run.id)
    human = criteria.human_grading(parts.grading_facts(run_id=run.id, run_name=run.name, ppi=ppi), spec)
    results = stored_report.with_human(parts.pilot_criteria, human)
    ppi_state: FigureState = ppi.figures_state if ppi else "current"
    return GateReport("pilot", run.id, run.name, results, utcnow(), figures_state=_worst(ppi_state, state), report_state=state)


def production_report(*, session: Session, spec: EvalSpec, run: Run, today: dt.date | None = None) -> GateReport:
    """Evaluate the production gate: pilot metrics, hallucinations, survey, and the run's eval set (read stored, as the pilot's)."""
    assert run.id is not None
    today = today or today_in(spec)
    parts, state = stored_report.gate_parts(session=session, spec=spec, run=run)
    ppi = facts.ppi_facts(session=session, spec=spec, run_id=run.id)
    human = criteria.human_grading(parts.grading_facts(run_id=run.id, run_name=run.name, ppi=ppi), spec)
    results = [
        production_criteria.pilot_online_targets(facts.streak_facts(session=session, spec=spec, today=today), spec, today=today),
        production_criteria.no_confirmed_hallucinations(facts.hallucination_facts(session=session, spec=spec), spec, today=today),
        production_criteria.survey_net_positive(facts.survey_facts(session=session), spec),
        production_criteria.eval_set_criterion(stored_report.with_human(parts.production_criteria, human), parts.case_count, spec),
    ]
    return GateReport("production", run.id, run.name, results, utcnow(), figures_state=state, report_state=state)


def report(*, session: Session, spec: EvalSpec, gate: str, run: Run) -> GateReport:
    """Evaluate the named gate."""
    if gate == "pilot":
        return pilot_report(session=session, spec=spec, run=run)
    if gate == "production":
        return production_report(session=session, spec=spec, run=run)
    raise GateError(f"gate: must be pilot or production, not {gate!r}")


SIGNING_ROLES: tuple[str, ...] = ("pm", "ml_lead", "lead")


def signing_role(principal: Principal, spec: EvalSpec) -> str | None:
    """Return the role a person signs as: the first role the plan requires that they hold, else the team lead."""
    for role in (*spec.gates.signoff_roles, *SIGNING_ROLES):
        if principal.has_role(role):
            return role
    return None


@dataclass(frozen=True)
class SignoffState:
    """Whether a gate decision has the go of every role the plan requires (PM and ML lead)."""

    required: tuple[str, ...]
    signed_go: dict[str, GateSignoff]  # the first go per required role
    no_go: list[GateSignoff]

    @property
    def missing(self) -> list[str]:
        return [r for r in self.required if r not in self.signed_go]

    @property
    def approved(self) -> bool:
        """Every required role signed go and nobody signed no-go."""
        return not self.missing and not self.no_go


def signoff_state(*, spec: EvalSpec, signed: list[GateSignoff]) -> SignoffState:
    """Read a gate's sign-offs against the roles the plan requires."""
    required = tuple(spec.gates.signoff_roles)
    go: dict[str, GateSignoff] = {}
    for s in sorted(signed, key=lambda s: s.signed_at):
        if s.decision == "go" and s.role in required:
            go.setdefault(s.role, s)
    return SignoffState(required, go, [s for s in signed if s.decision != "go"])


def sign_off(
    *, session: Session, spec: EvalSpec, gate: str, run: Run, principal: Principal, decision: str, note: str = ""
) -> GateSignoff:
    """Record a PM's, ML lead's or team lead's go/no-go on a gate with the report as it is now."""
    if decision not in ("go", "no_go"):
        raise GateError("decision: must be go or no_go")
    role = signing_role(principal, spec)
    if role is None:
        raise GateError("role: only the PM, the ML lead and the team lead sign off a gate")
    # SQLite: a sign-off is a POST, whose transaction holds the write lock from its first statement
    # (webapp/core/db.py), so simultaneous sign-offs queue and each sees the one before it.
    # PostgreSQL: the unique index decides between two that passed the check together.
    earlier = signoff_by(session=session, gate=gate, run_id=stored_id(run.id), user_id=principal.user_id)
    if earlier is not None:
        raise _already_signed(gate, earlier)
    rep = report(session=session, spec=spec, gate=gate, run=run)
    if not rep.current:
        # a decision rests on the figures as they are: the reaction recomputes them within seconds
        what = "figures" if rep.report_state != "current" else "human-grading figures"
        why = "checks, grades or draws" if rep.report_state != "current" else "grades or draws"
        raise FiguresUpdating(
            f"signoff: the {gate} gate's {what} are {rep.figures_state} ({why} changed since they "
            "were computed); sign again in a few seconds, once the report is current"
        )
    if decision == "go" and not rep.passed:
        raise GateError(f"decision: the {gate} gate does not pass ({rep.status}); only a no-go can be signed")
    row = GateSignoff(
        gate=gate,
        run_id=stored_id(run.id),
        user_id=principal.user_id,
        role=role,
        verdict=rep.status,
        decision=decision,
        note=note.strip(),
        report=gate_report_public(rep).model_dump(mode="json"),
    )
    try:
        with session.begin_nested():  # a savepoint: the loser of a race keeps a usable transaction
            session.add(row)
            session.flush()
    except IntegrityError:
        winner = signoff_by(session=session, gate=gate, run_id=stored_id(run.id), user_id=principal.user_id)
        if winner is None:  # some other constraint failed: not a double sign-off
            raise
        raise _already_signed(gate, winner) from None
    audit.record(
        session=session, action="gate.sign", actor_id=principal.user_id,
        target=f"{gate} gate, run {run.name}", detail=f"{decision} as {role}",
    )  # fmt: skip
    return row


def _already_signed(gate: str, earlier: GateSignoff) -> SignoffConflict:
    said = "go" if earlier.decision == "go" else "no-go"
    return SignoffConflict(
        f"signoff: you already signed the {gate} gate for this run as {_ROLE_NAMES.get(earlier.role, earlier.role)} "
        f"({said}, {as_utc(earlier.signed_at):%Y-%m-%d %H:%M} UTC); each person signs a gate once, in one role"
    )


_ROLE_NAMES = {"pm": "PM", "ml_lead": "ML lead", "lead": "team lead"}


def signoff_by(*, session: Session, gate: str, run_id: int, user_id: int) -> GateSignoff | None:
    """Return this person's sign-off of a gate for a run, if they signed it."""
    return session.exec(
        select(GateSignoff).where(
            GateSignoff.gate == gate, GateSignoff.run_id == run_id, GateSignoff.user_id == user_id
        )
    ).first()


def signoffs(*, session: Session, gate: str, run_id: int) -> list[GateSignoff]:
    """List the sign-offs of a gate for a run, newest first."""
    return list(
        session.exec(
            select(GateSignoff)
            .where(GateSignoff.gate == gate, GateSignoff.run_id == run_id)
            .order_by(col(GateSignoff.signed_at).desc())
        ).all()
    )


def runs_for_gates(*, session: Session) -> list[Run]:
    """List runs over eval datasets, newest first, for the gates index (a production-week run is no launch candidate)."""
    return list(session.exec(select(Run).where(Run.source != PRODUCTION_SOURCE).order_by(col(Run.created_at).desc(), col(Run.id).desc())).all())
