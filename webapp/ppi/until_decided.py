"""Grade until decided (issue 43): the call updated after every final grade, decisions stored, the run closed once decided.

`on_final_grade` is the one after-final-grade hook (webapp/ppi/reactions.py calls it, after
the commit). Decisions (docs/ppi.md, "Grade until decided"):
- After every final grade of a drawn draft, each gate criterion's call is `webapp.ppi.report.decide`
  on the run's figures, as the gate reads them. A call newly decided is stored (`PpiDecision`)
  with its time, its sequence bounds and the grades it rested on; the gate report shows both.
- A stored decision that the grades no longer support (a grade corrected after it, so the call
  is undecided again or the other way) is re-opened: its row keeps the decision and gains when,
  by whom (`who_saved`: the lead who adjudicated, else the grader whose grade change came last,
  from the grades' history) and why. A new decision, if any, is a new row. A run graded until
  decided that had closed as decided opens its queue again (not one closed at its cap).
- A run set to grade until decided (`set_until_decided`, with an optional cap on its final grades)
  is graded in a random order of its drawn drafts (`draw_order`, seeded by the sample's seed), so
  its calls hold while drawn drafts still wait (they are not provisional there), and it closes by
  itself with the reason as soon as every gate criterion is decided, or at the cap.
- A further sample (new inclusion probabilities) is refused once a run grades until decided and
  has a final grade (`new_probabilities_refusal`): changing pi after grades, on a run whose stopping
  depends on them, would mix two designs in one sequence. For the same reason a run whose pi
  changed after a grade (a further round drawn then, while it was not graded until decided) cannot
  be set to grade until decided (`design_refusal`).
- The setting is the lead's (`set_until_decided`, `unset_until_decided`; the page's form and
  `PUT /api/v1/ppi/runs/{run}/until-decided`): a cap is at least 1, at most the run's drafts and
  not below the final grades already given; setting a run already decided closes it at once.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import numpy as np
from sqlmodel import Session, col, func, select

from webapp.core.spec import EvalSpec
from webapp.core.timeutil import as_utc, utcnow
from webapp.grading.models import FinalGrade, Grade, GradeChange
from webapp.grading.plan import close_plan, reopen_plan, reorder_plan
from webapp.ppi.models import PpiDecision, PpiDraw, PpiUntilDecided
from webapp.ppi.report import GateCall, RunReport, decide, run_report
from webapp.ppi.signals import FIGURE_RANGE
from webapp.ppi.views import gate_threshold


class UntilDecidedError(ValueError):
    """Raised for a setting or sample that cannot be accepted; the message names the field."""


@dataclass(frozen=True)
class Outcome:
    """What one final grade changed: decisions made, decisions re-opened, and whether the run closed."""

    decided: tuple[str, ...]
    reopened: tuple[str, ...]
    closed_reason: str | None


def set_until_decided(
    *, session: Session, run_id: int, cap: int | None = None, user_id: int | None = None, now: dt.datetime | None = None,
    spec: EvalSpec | None = None,
) -> PpiUntilDecided:
    """Set a sampled run to grade until decided (again: the cap is updated and a closed run re-opened).

    Refused, naming the field: a cap below 1, above the run's drafts or below the final grades it
    has; a run without a sample, or whose inclusion probabilities changed after a grade
    (`design_refusal`). With `spec`, a run already decided (or at its new cap) closes at once.
    """
    if cap is not None and cap < 1:
        raise UntilDecidedError("cap: must be a positive number of grades, or none")
    if session.exec(select(PpiDraw.id).where(PpiDraw.run_id == run_id)).first() is None:
        raise UntilDecidedError("run: this run has no sample yet; draw one before grading until decided")
    drafts, graded = sample_counts(session=session, run_id=run_id)
    if cap is not None and cap > drafts:
        raise UntilDecidedError(f"cap: at most the run's {drafts} drafts (a cap of {cap} grades could never be reached)")
    if cap is not None and cap < graded:
        raise UntilDecidedError(f"cap: the run has {graded} final grades already; a cap of {cap} is below them")
    if (refusal := design_refusal(session=session, run_id=run_id)) is not None:
        raise UntilDecidedError(refusal)
    row = session.exec(select(PpiUntilDecided).where(PpiUntilDecided.run_id == run_id)).first()
    row = row or PpiUntilDecided(run_id=run_id)
    at = now or utcnow()
    row.cap, row.set_by, row.set_at, row.closed_at, row.closed_reason = cap, user_id, at, None, None
    session.add(row)
    session.flush()
    reopen_plan(session=session, run_id=run_id)
    sync_queue_order(session=session, run_id=run_id)
    if spec is not None and graded:
        report = run_report(session=session, spec=spec, run_id=run_id)
        if report is not None:
            _close_if_done(session=session, setting=row, report=report, current=calls(spec, report), at=at)
    return row


def apply_setting(
    *, session: Session, spec: EvalSpec, run_id: int, on: bool, cap: int | None, user_id: int | None, now: dt.datetime | None = None
) -> bool:
    """Set (`on`) or unset the run's grading until decided, as the API's PUT asks; return whether anything changed.

    Idempotent: a run already set with the same cap (closed or not), or already unset, is left as
    it is. A cap with `on` false is refused, naming the field.
    """
    if not on and cap is not None:
        raise UntilDecidedError("cap: only with on: true (a run not graded until decided has no cap)")
    row = session.exec(select(PpiUntilDecided).where(PpiUntilDecided.run_id == run_id)).first()
    if not on:
        if session.exec(select(PpiDraw.id).where(PpiDraw.run_id == run_id)).first() is None:
            raise UntilDecidedError("run: this run has no sample yet; nothing to grade until decided")
        return unset_until_decided(session=session, run_id=run_id)
    if row is not None and row.cap == cap:
        return False
    set_until_decided(session=session, run_id=run_id, cap=cap, user_id=user_id, now=now, spec=spec)
    return True


def unset_until_decided(*, session: Session, run_id: int) -> bool:
    """Stop grading the run until decided: the queue serves the whole sample again; return whether it was set.

    The stored decisions stay (the sequence held at every look); a further sample is allowed again
    as for any sampled run, but setting the run to grade until decided after one drawn after a
    grade is refused (`design_refusal`).
    """
    row = session.exec(select(PpiUntilDecided).where(PpiUntilDecided.run_id == run_id)).first()
    if row is None:
        return False
    session.delete(row)
    session.flush()
    reopen_plan(session=session, run_id=run_id)
    return True


def sample_counts(*, session: Session, run_id: int) -> tuple[int, int]:
    """Return (the run's drafts in its sample frame, the drawn drafts with a final grade)."""
    drafts = session.exec(select(func.count(func.distinct(PpiDraw.draft_id))).where(PpiDraw.run_id == run_id)).one()
    graded = session.exec(
        select(func.count(func.distinct(FinalGrade.draft_id)))
        .join(PpiDraw, col(PpiDraw.draft_id) == FinalGrade.draft_id)
        .where(PpiDraw.run_id == run_id, col(PpiDraw.drawn).is_(True))
    ).one()
    return int(drafts), int(graded)


def design_refusal(*, session: Session, run_id: int) -> str | None:
    """Return why the run cannot grade until decided because its inclusion probabilities changed after a grade; else None.

    A further round drawn after a drawn draft of an earlier round had its final grade changed the
    design mid-way: the drafts graded before it are not a random part of those drawn in the end, so
    the sequence's random order does not hold. (Before any grade a further round is fine.)
    """
    rounds = session.exec(
        select(PpiDraw.round, func.min(PpiDraw.created_at)).where(PpiDraw.run_id == run_id).group_by(col(PpiDraw.round))
    ).all()
    for round_no, drawn_at in sorted(rounds):
        if round_no <= 1:
            continue
        earlier = (
            select(PpiDraw.draft_id).where(PpiDraw.run_id == run_id, PpiDraw.round < round_no, col(PpiDraw.drawn).is_(True))
        )
        first = session.exec(select(func.min(FinalGrade.decided_at)).where(col(FinalGrade.draft_id).in_(earlier))).one()
        if first is not None and as_utc(first) < as_utc(drawn_at):
            return (
                f"sample: round {round_no} changed the inclusion probabilities after a final grade "
                f"({as_utc(first):%Y-%m-%d %H:%M} UTC); grading until decided needs one design from the first grade"
            )
    return None


def sync_queue_order(*, session: Session, run_id: int) -> None:
    """Rank a run's grading plan in `draw_order` when the run grades until decided (after the setting and after each further sample)."""
    if session.exec(select(PpiUntilDecided.id).where(PpiUntilDecided.run_id == run_id)).first() is not None:
        reorder_plan(session=session, run_id=run_id, draft_ids=draw_order(session=session, run_id=run_id))


def new_probabilities_refusal(*, session: Session, run_id: int) -> str | None:
    """Return why new inclusion probabilities (a further sample) are refused: a run grading until decided with a final grade; else None."""
    if session.exec(select(PpiUntilDecided.id).where(PpiUntilDecided.run_id == run_id)).first() is None:
        return None
    graded = session.exec(
        select(FinalGrade.id).join(PpiDraw, col(PpiDraw.draft_id) == FinalGrade.draft_id).where(PpiDraw.run_id == run_id)
    ).first()
    if graded is None:
        return None
    return "sample: this run grades until decided and has final grades; its inclusion probabilities cannot change now"


def calls(spec: EvalSpec, report: RunReport) -> dict[str, GateCall]:
    """Return each gate criterion's call, as the gate reads it."""
    out = {}
    for key, fig in report.figures.items():
        threshold = gate_threshold(spec, key)
        if threshold is not None:
            out[key] = decide(fig.estimate, threshold, pending=report.pending, undrawn=report.drafts - report.drawn, value_range=FIGURE_RANGE[key])
    return out


def open_decisions(*, session: Session, run_id: int) -> dict[str, PpiDecision]:
    """Return the run's decisions not re-opened, by criterion."""
    rows = session.exec(
        select(PpiDecision).where(PpiDecision.run_id == run_id, col(PpiDecision.reopened_at).is_(None)).order_by(col(PpiDecision.id))
    ).all()
    return {r.criterion: r for r in rows}


def on_final_grade(*, session: Session, spec: EvalSpec, draft_id: int, now: dt.datetime | None = None) -> Outcome | None:
    """Update the run's calls after a final grade of a drawn draft; store, re-open and close as the module docstring says.

    None when the draft is not in a sample.
    """
    draw = session.exec(select(PpiDraw).where(PpiDraw.draft_id == draft_id)).first()
    if draw is None:
        return None
    run_id = draw.run_id
    report = run_report(session=session, spec=spec, run_id=run_id)
    if report is None:
        return None
    at = now or utcnow()
    final = session.exec(select(FinalGrade).where(FinalGrade.draft_id == draft_id)).first()
    stored = open_decisions(session=session, run_id=run_id)
    decided: list[str] = []
    reopened: list[str] = []
    current = calls(spec, report)
    setting = session.exec(select(PpiUntilDecided).where(PpiUntilDecided.run_id == run_id)).first()
    # a run grading until decided is graded in its random draw order (`draw_order`), so the drafts graded so far are a
    # random part of those drawn and the sequence holds while others wait; elsewhere a call waits for the whole sample
    random_order = setting is not None
    rested_on = graded_drafts(session=session, run_id=run_id)
    for key, call in current.items():
        held = stored.get(key)
        verdict = None if call.verdict == "undecided" or (call.provisional and not random_order) else call.verdict
        # a stored call stands while the sequence still gives it: a call made provisional only (drafts of a further
        # sample waiting) is not re-opened; one the sequence no longer gives is
        if held is not None and held.verdict != call.verdict:
            held.reopened_at, held.reopened_by = at, who_saved(session=session, draft_id=draft_id, final=final)
            held.reopen_reason = reopen_reason(held, draft_id, call.verdict)
            session.add(held)
            reopened.append(key)
            held = None
        if held is None and verdict is not None and call.low is not None and call.high is not None:
            session.add(PpiDecision(
                run_id=run_id, criterion=key, verdict=verdict, low=call.low, high=call.high, grades=call.grades,
                rested_on=rested_on, decided_at=at,
            ))
            decided.append(key)
    if setting is not None and reopened and setting.closed_at is not None and (setting.cap is None or report.graded < setting.cap):
        # a call re-opened: the run is undecided again, so its queue serves the rest of the drawn drafts again
        setting.closed_at, setting.closed_reason = None, None
        session.add(setting)
        reopen_plan(session=session, run_id=run_id)
    reason = None if setting is None else _close_if_done(session=session, setting=setting, report=report, current=current, at=at)
    session.flush()
    return Outcome(tuple(decided), tuple(reopened), reason)


def graded_drafts(*, session: Session, run_id: int) -> list[int]:
    """Return the run's drawn drafts that have a final grade (ids, ascending): what a call made now rests on."""
    rows = session.exec(
        select(PpiDraw.draft_id)
        .join(FinalGrade, col(FinalGrade.draft_id) == PpiDraw.draft_id)
        .where(PpiDraw.run_id == run_id, col(PpiDraw.drawn).is_(True))
        .distinct()
    ).all()
    return sorted(int(r) for r in rows)


def reopen_reason(held: PpiDecision, draft_id: int, verdict: str) -> str:
    """Say why a stored decision no longer holds: a grade it rested on was corrected, or a further grade moved the sequence."""
    if held.rested_on is None or draft_id in held.rested_on:
        return f"grade of draft {draft_id} corrected after the decision (one it rested on): the call is now {verdict}"
    return f"a further grade (draft {draft_id}) moved the sequence after the decision: the call is now {verdict}"


def who_saved(*, session: Session, draft_id: int, final: FinalGrade | None) -> int | None:
    """Return who saved the grade that set the draft's final grade: the adjudicating lead, else the grader whose change came last."""
    if final is not None and final.decided_by is not None:
        return final.decided_by
    return session.exec(
        select(GradeChange.changed_by)
        .join(Grade, col(Grade.id) == GradeChange.grade_id)
        .where(Grade.draft_id == draft_id)
        .order_by(col(GradeChange.changed_at).desc(), col(GradeChange.id).desc())
        .limit(1)
    ).first()


ALL_GRADED = "every drawn draft graded"  # the all-graded closing's reason starts so (docs/ppi.md, "Grade until decided")


def _closing_reason(setting: PpiUntilDecided, report: RunReport, current: dict[str, GateCall]) -> str | None:
    """Return why a run grading until decided closes at this look: every criterion decided, its cap, or every drawn draft graded."""
    undecided = sum(c.verdict == "undecided" for c in current.values())
    if current and not undecided:
        return f"every gate criterion decided on {report.graded} grades"
    if setting.cap is not None and report.graded >= setting.cap:
        return f"the cap of {setting.cap} grades reached, {undecided} criteria undecided"
    if report.drawn and report.pending == 0:
        # nothing left to serve: say so rather than leave a queue that looks open
        return f"{ALL_GRADED} ({report.graded}), {undecided} criteria undecided"
    return None


def _close_if_done(
    *, session: Session, setting: PpiUntilDecided, report: RunReport, current: dict[str, GateCall], at: dt.datetime
) -> str | None:
    """Close a run grading until decided once every gate criterion is decided, at its cap, or with every drawn draft graded; return the reason.

    A run closed with every drawn draft graded stays closed, but its reason follows the calls when a
    correction changes them without re-opening a decision (say, decides the last criterion); None then,
    as the run closed earlier.
    """
    reason = _closing_reason(setting, report, current)
    if setting.closed_at is not None:
        if reason is not None and reason != setting.closed_reason and (setting.closed_reason or "").startswith(ALL_GRADED):
            setting.closed_reason = reason
            session.add(setting)
            close_plan(session=session, run_id=setting.run_id, reason=reason)
        return None
    if reason is not None:
        setting.closed_at, setting.closed_reason = at, reason
        session.add(setting)
        close_plan(session=session, run_id=setting.run_id, reason=reason)  # the queue serves none of the rest
    return reason


def draw_order(*, session: Session, run_id: int) -> list[int]:
    """Return the run's drawn drafts in the order the queue serves them when grading until decided: a random order seeded by the sample's seed.

    The order must not follow the drafts' ids (the cases' order in the dataset): the drafts graded
    so far must be a random part of the drawn ones for the sequence to hold while the rest wait.
    """
    rows = session.exec(select(PpiDraw).where(PpiDraw.run_id == run_id).order_by(col(PpiDraw.round), col(PpiDraw.draft_id))).all()
    if not rows:
        return []
    drawn = sorted({r.draft_id for r in rows if r.drawn})
    order = np.random.default_rng(rows[0].seed).permutation(len(drawn))
    return [drawn[i] for i in order]


def in_draw_order(*, session: Session, run_id: int) -> bool:
    """Tell whether the run is graded until decided, so in its random draw order: its calls hold while drawn drafts wait."""
    return session.exec(select(PpiUntilDecided.id).where(PpiUntilDecided.run_id == run_id)).first() is not None


def closed_reason(*, session: Session, run_id: int) -> str | None:
    """Return why the run's queue closed when it grades until decided and closed; else None (the gate says it)."""
    setting = session.exec(select(PpiUntilDecided).where(PpiUntilDecided.run_id == run_id)).first()
    return None if setting is None or setting.closed_at is None else setting.closed_reason


def is_open(*, session: Session, run_id: int) -> bool:
    """Tell whether the run's queue still serves drafts: not set to grade until decided, or set and not closed yet."""
    setting = session.exec(select(PpiUntilDecided).where(PpiUntilDecided.run_id == run_id)).first()
    return setting is None or setting.closed_at is None
