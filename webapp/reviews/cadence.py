"""The review cadence of the plan as due items: which review is due for which period, and who did it.

The plan ("Review cadence"):
- Pilot (weeks 1-2): daily review of online metrics and agent feedback.
- Post-launch month 1: weekly eval review.
- Post-launch steady state: bi-weekly eval review.
(The weekly and monthly draft-vs-sent samples are the review pages of this domain; the plan's
"results reviewed by PM and ML lead before deploy" is the gates' sign-off.)

Decisions where the plan is silent, and why:
- The phase is `review.phase` of the spec, the same switch that sets the sample cadence.
- "Daily" in the pilot means every business day of the pilot window (`online_metrics.pilot`,
  weekends and the spec's holidays off): the pilot's targets are judged on business days too.
- The plan gives no launch date, so post-launch periods count from the Monday after the pilot
  ends: ISO weeks for the weekly review, two-week blocks from that Monday for the bi-weekly one.
- The metrics review is done when one of the support lead, the PM or the team lead marks it (the
  plan names nobody); an eval review is done when the PM and the ML lead have each marked it
  ("results reviewed by PM and ML lead").
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from webapp.auth.models import User
from webapp.auth.service import Principal
from webapp.core.spec import EvalSpec
from webapp.metrics.streaks import is_business_day
from webapp.reviews.models import CadenceReview

KINDS: dict[str, str] = {
    "metrics_daily": "Daily review of online metrics and agent feedback",
    "eval_weekly": "Weekly eval review",
    "eval_biweekly": "Bi-weekly eval review",
}
SHORT: dict[str, str] = {"metrics_daily": "Daily metrics review", "eval_weekly": "Weekly eval review", "eval_biweekly": "Bi-weekly eval review"}
# Who may mark each review done; `NEEDS` lists the roles that must each mark it (empty: anyone of MARKERS).
MARKERS: dict[str, tuple[str, ...]] = {
    "metrics_daily": ("support_lead", "pm", "lead"),
    "eval_weekly": ("pm", "ml_lead"),
    "eval_biweekly": ("pm", "ml_lead"),
}
NEEDS: dict[str, tuple[str, ...]] = {"metrics_daily": (), "eval_weekly": ("pm", "ml_lead"), "eval_biweekly": ("pm", "ml_lead")}
ALL_MARKERS: tuple[str, ...] = ("support_lead", "pm", "lead", "ml_lead")


class CadenceError(ValueError):
    """A request to mark a review that cannot be honoured; the message names the field."""


@dataclass(frozen=True)
class Mark:
    """One person's mark on a review."""

    user_id: int
    name: str
    role: str
    done_at: dt.datetime
    note: str


@dataclass(frozen=True)
class DueReview:
    """One review of the cadence for one period, with the marks it has."""

    kind: str
    period: str
    start: dt.date
    end: dt.date
    marks: list[Mark]

    @property
    def label(self) -> str:
        return KINDS[self.kind]

    @property
    def needs(self) -> tuple[str, ...]:
        return NEEDS[self.kind]

    @property
    def missing(self) -> list[str]:
        """Roles that still have to mark it (none once done)."""
        if not self.needs:
            return [] if self.marks else list(MARKERS[self.kind][:1])
        return [r for r in self.needs if r not in {m.role for m in self.marks}]

    @property
    def done(self) -> bool:
        return bool(self.marks) and not self.missing

    @property
    def when(self) -> str:
        if self.start == self.end:
            return f"{self.start:%a %Y-%m-%d}"
        return f"{self.start:%Y-%m-%d} – {self.end:%Y-%m-%d}"


def _monday(day: dt.date) -> dt.date:
    return day - dt.timedelta(days=day.weekday())


def periods(*, spec: EvalSpec, today: dt.date) -> list[tuple[str, str, dt.date, dt.date]]:
    """Return the cadence's periods that have started by today, oldest first: (kind, period, start, end)."""
    pilot = spec.online_metrics.pilot
    out: list[tuple[str, str, dt.date, dt.date]] = []
    if spec.review.phase == "pilot":
        day = pilot.start
        while day <= min(today, pilot.end):
            if is_business_day(day, spec):
                out.append(("metrics_daily", day.isoformat(), day, day))
            day += dt.timedelta(days=1)
        return out
    first = _monday(pilot.end) + dt.timedelta(days=7)
    step = 7 if spec.review.phase == "post_launch_month1" else 14
    kind = "eval_weekly" if step == 7 else "eval_biweekly"
    start = first
    while start <= today:
        end = start + dt.timedelta(days=step - 1)
        iso = start.isocalendar()
        name = f"{iso.year}-W{iso.week:02d}" if step == 7 else start.isoformat()
        out.append((kind, name, start, end))
        start += dt.timedelta(days=step)
    return out


def due_reviews(*, session: Session, spec: EvalSpec, today: dt.date) -> list[DueReview]:
    """Return every review of the cadence due by today, newest first, with who marked it and when."""
    rows = session.exec(
        select(CadenceReview, User).join(User, col(User.id) == col(CadenceReview.user_id)).order_by(col(CadenceReview.done_at))
    ).all()
    marks: dict[tuple[str, str], list[Mark]] = {}
    for row, user in rows:
        marks.setdefault((row.kind, row.period), []).append(Mark(row.user_id, user.name or user.email, row.role, row.done_at, row.note))
    return [
        DueReview(kind, period, start, end, marks.get((kind, period), []))
        for kind, period, start, end in reversed(periods(spec=spec, today=today))
    ]


def mark_done(
    *, session: Session, spec: EvalSpec, principal: Principal, kind: str, period: str, today: dt.date, note: str = ""
) -> CadenceReview:
    """Record that this person did the review of `kind` for `period` (once per person)."""
    if kind not in KINDS:
        raise CadenceError(f"kind: must be one of {', '.join(KINDS)}, not {kind!r}")
    role = next((r for r in MARKERS[kind] if principal.has_role(r)), None)
    if role is None:
        raise CadenceError(f"role: the {KINDS[kind].lower()} is marked by {', '.join(MARKERS[kind])}")
    if (kind, period) not in {(k, p) for k, p, _s, _e in periods(spec=spec, today=today)}:
        raise CadenceError(f"period: {period!r} is not a {KINDS[kind].lower()} due by {today}")
    row = CadenceReview(kind=kind, period=period, user_id=principal.user_id, role=role, note=note.strip()[:2000])
    try:
        with session.begin_nested():
            session.add(row)
            session.flush()
    except IntegrityError as exc:
        raise CadenceError(f"period: you already marked the {KINDS[kind].lower()} of {period} done") from exc
    return row
