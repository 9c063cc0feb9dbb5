"""Survey rounds and answers; the net score the production gate reads."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from webapp.core.db import stored_id
from webapp.core.timeutil import utcnow
from webapp.survey.models import HELPFUL_CHOICES, SurveyAnswer, SurveyRound


class SurveyError(ValueError):
    """A survey request that cannot be honoured; the message names the field."""


@dataclass(frozen=True)
class SurveyCounts:
    round_name: str | None
    yes: int
    no: int
    neutral: int

    @property
    def total(self) -> int:
        return self.yes + self.no + self.neutral

    @property
    def net(self) -> int:
        """Agents who find it helpful minus agents who do not."""
        return self.yes - self.no

    @property
    def net_positive(self) -> bool:
        return self.yes > self.no


def current_round(*, session: Session) -> SurveyRound | None:
    """Return the open round (the newest one not closed), or None."""
    return session.exec(
        select(SurveyRound).where(col(SurveyRound.closed_at).is_(None)).order_by(col(SurveyRound.id).desc())
    ).first()


def open_round(*, session: Session, name: str) -> SurveyRound:
    """Close any open round and open a new one."""
    name = name.strip()
    if not name:
        raise SurveyError("name: a survey round needs a name")
    if session.exec(select(SurveyRound).where(SurveyRound.name == name)).first():
        raise SurveyError(f"name: a round named {name!r} exists already")
    for r in session.exec(select(SurveyRound).where(col(SurveyRound.closed_at).is_(None))).all():
        r.closed_at = utcnow()
        session.add(r)
    rnd = SurveyRound(name=name)
    session.add(rnd)
    session.flush()
    return rnd


def record_answer(
    *, session: Session, agent_id: str, helpful: str, comment: str = "", round_name: str | None = None
) -> SurveyAnswer:
    """Record an agent's answer in the open (or named) round; a second answer replaces the first."""
    agent_id = (agent_id or "").strip()
    if not agent_id:
        raise SurveyError("agent_id: required")
    if len(agent_id) > 120:
        raise SurveyError("agent_id: at most 120 characters")
    if helpful not in HELPFUL_CHOICES:
        raise SurveyError(f"helpful: must be one of {', '.join(HELPFUL_CHOICES)}, not {helpful!r}")
    if round_name:
        rnd = session.exec(select(SurveyRound).where(SurveyRound.name == round_name)).first()
        if rnd is None:
            raise SurveyError(f"round: no survey round named {round_name!r}")
    else:
        rnd = current_round(session=session)
        if rnd is None:
            raise SurveyError("round: no survey round is open; a support lead opens one on the survey page")
    if rnd.closed_at is not None:
        raise SurveyError(f"round: the round {rnd.name!r} is closed")
    existing = session.exec(
        select(SurveyAnswer).where(SurveyAnswer.round_id == rnd.id, SurveyAnswer.agent_id == agent_id)
    ).first()
    if existing is None:
        try:
            with session.begin_nested():
                answer = SurveyAnswer(round_id=stored_id(rnd.id), agent_id=agent_id, helpful=helpful, comment=comment)
                session.add(answer)
                session.flush()
            return answer
        except IntegrityError:
            # Two answers from one agent at once: the other insert won; update it below.
            existing = session.exec(
                select(SurveyAnswer).where(SurveyAnswer.round_id == rnd.id, SurveyAnswer.agent_id == agent_id)
            ).one()
    existing.helpful = helpful
    existing.comment = comment
    existing.answered_at = utcnow()
    existing.times_answered += 1
    session.add(existing)
    session.flush()
    return existing


def counts(*, session: Session, round_id: int | None = None) -> SurveyCounts:
    """Count the answers of a round (default: the newest round, open or closed)."""
    rnd = session.get(SurveyRound, round_id) if round_id else session.exec(
        select(SurveyRound).order_by(col(SurveyRound.id).desc())
    ).first()
    if rnd is None:
        return SurveyCounts(None, 0, 0, 0)
    rows = dict(
        session.exec(
            select(SurveyAnswer.helpful, func.count()).where(SurveyAnswer.round_id == rnd.id).group_by(SurveyAnswer.helpful)
        ).all()
    )
    return SurveyCounts(rnd.name, rows.get("yes", 0), rows.get("no", 0), rows.get("neutral", 0))


def round_results(*, session: Session) -> list[tuple[SurveyRound, SurveyCounts]]:
    """List every round with its counts, newest first (earlier rounds stay readable after a new one opens)."""
    grouped = session.exec(
        select(SurveyAnswer.round_id, SurveyAnswer.helpful, func.count()).group_by(
            col(SurveyAnswer.round_id), col(SurveyAnswer.helpful)
        )
    ).all()
    by_round: dict[int, dict[str, int]] = {}
    for round_id, helpful, n in grouped:
        by_round.setdefault(round_id, {})[helpful] = n
    out: list[tuple[SurveyRound, SurveyCounts]] = []
    for rnd in rounds(session=session):
        c = by_round.get(stored_id(rnd.id), {})
        out.append((rnd, SurveyCounts(rnd.name, c.get("yes", 0), c.get("no", 0), c.get("neutral", 0))))
    return out


def answers(*, session: Session, round_id: int) -> list[SurveyAnswer]:
    """List a round's answers, newest first."""
    return list(
        session.exec(
            select(SurveyAnswer).where(SurveyAnswer.round_id == round_id).order_by(col(SurveyAnswer.answered_at).desc())
        ).all()
    )


def rounds(*, session: Session) -> list[SurveyRound]:
    """List survey rounds, newest first."""
    return list(session.exec(select(SurveyRound).order_by(col(SurveyRound.id).desc())).all())
