"""A run's "grade until decided" state as the API answers it and the run page shows it (issue 43).

Per gate criterion: the confidence sequence's call at this look (`webapp.ppi.report.decide`, as the
gate reads it), the reason in words, the stored decision that holds (its time and the grades it
rested on), the decisions re-opened by later grades (when, by whom, why), and "about K more": the
further final grades the sequence needs to decide if the estimate stays where it is
(`webapp.ppi.anytime.grades_to_decide`, counted from the grades given so far, drawn drafts still
waiting included; the page's "about K more drafts to draw" counts beyond the drawn ones instead).
"""

from __future__ import annotations

from sqlmodel import Session, col, select

from webapp.auth.models import User
from webapp.core.spec import EvalSpec
from webapp.core.timeutil import as_utc
from webapp.ppi.anytime import MIN_GRADES, UNBOUNDED, grades_to_decide
from webapp.ppi.estimator import Estimate
from webapp.ppi.models import PpiDecision, PpiUntilDecided
from webapp.ppi.report import FIGURES, GateCall, RunReport
from webapp.ppi.schemas import CriterionCallPublic, DecisionPublic, UntilDecidedPublic
from webapp.ppi.stored_figures import run_figures
from webapp.ppi.until_decided import calls
from webapp.ppi.views import TITLES, gate_threshold

SHARES = ("factual_accuracy", "pass_rate")


def _num(key: str, value: float) -> str:
    """Return a bound or threshold as the reason says it: a share to 3 decimals, a grade to 2."""
    return f"{value:.3f}" if key in SHARES else f"{value:.2f}"


def reason(key: str, call: GateCall, threshold: float, *, stored: bool) -> str:
    """Say why the call is what it is: the bound that clears the threshold, or why there is no call yet."""
    t = _num(key, threshold)
    if call.low is None or call.high is None:
        return "no estimate yet: too few final grades"
    if call.verdict == "pass":
        said = f"the sequence's lower bound {_num(key, call.low)} is above the threshold {t}"
    elif call.verdict == "fail":
        said = f"the sequence's upper bound {_num(key, call.high)} is at or below the threshold {t}"
    elif call.grades < MIN_GRADES:
        return f"{call.grades} final grades: the sequence makes no call before {MIN_GRADES}"
    else:
        return f"the sequence [{_num(key, call.low)}, {_num(key, call.high)}] straddles the threshold {t}"
    if not stored:
        said += "; not stored yet: drawn drafts still wait for grades and the run is not graded in its random draw order"
    return said


def more_grades(e: Estimate | None, threshold: float) -> int | None:
    """Return about how many further final grades the sequence needs to decide, counted from those given (None: no estimate)."""
    if e is None:
        return None
    drafts = e.n_drafts if e.estimand == "run" else UNBOUNDED
    needed = grades_to_decide(
        estimate=e.estimate, se=e.se, carriers=e.df + 1.0, graded=e.n_labels, drafts=min(drafts, e.n_drafts), threshold=threshold
    )
    if needed is None:
        return None
    return min(max(0, needed - e.n_labels), max(e.n_drafts - e.n_labels, 0))


def _decision(row: PpiDecision, emails: dict[int, str]) -> DecisionPublic:
    return DecisionPublic(
        verdict="pass" if row.verdict == "pass" else "fail", sequence_low=row.low, sequence_high=row.high, grades=row.grades,
        rested_on=None if row.rested_on is None else list(row.rested_on),
        decided_at=as_utc(row.decided_at), reopened_at=None if row.reopened_at is None else as_utc(row.reopened_at),
        reopened_by=None if row.reopened_by is None else emails.get(row.reopened_by), reopen_reason=row.reopen_reason,
    )


def _emails(session: Session, ids: set[int]) -> dict[int, str]:
    if not ids:
        return {}
    return {u.id: u.email for u in session.exec(select(User).where(col(User.id).in_(ids))).all() if u.id is not None}


def until_decided_public(
    *, session: Session, spec: EvalSpec, run_id: int, run_name: str, report: RunReport | None = None
) -> UntilDecidedPublic | None:
    """Return the run's setting and each gate criterion's call with its stored decisions; None when the run has no sample.

    `report`: the run's report when the caller has it (the page), so it is not computed twice.
    """
    report = report or run_figures(session=session, spec=spec, run_id=run_id).value  # stored: never a cross-fit on read
    if report is None:
        return None
    setting = session.exec(select(PpiUntilDecided).where(PpiUntilDecided.run_id == run_id)).first()
    rows = session.exec(select(PpiDecision).where(PpiDecision.run_id == run_id).order_by(col(PpiDecision.id))).all()
    people = {r.reopened_by for r in rows if r.reopened_by is not None} | ({setting.set_by} if setting and setting.set_by else set())
    emails = _emails(session, people)
    current = calls(spec, report)
    criteria = []
    for key in FIGURES:
        threshold = gate_threshold(spec, key)
        if key not in current or threshold is None:
            continue
        call = current[key]
        held = [r for r in rows if r.criterion == key and r.reopened_at is None]
        decision = _decision(held[-1], emails) if held else None
        criteria.append(
            CriterionCallPublic(
                key=key, title=TITLES[key], threshold=threshold, verdict=call.verdict, decided=decision is not None,
                reason=reason(key, call, threshold, stored=decision is not None), sequence_low=call.low, sequence_high=call.high,
                grades=call.grades, more_grades=None if call.verdict != "undecided" else more_grades(report.figures[key].estimate, threshold),
                decision=decision,
                reopened=[_decision(r, emails) for r in rows if r.criterion == key and r.reopened_at is not None],
            )
        )
    return UntilDecidedPublic(
        run_id=run_id, run_name=run_name, on=setting is not None, cap=None if setting is None else setting.cap,
        set_by=None if setting is None or setting.set_by is None else emails.get(setting.set_by),
        set_at=None if setting is None else as_utc(setting.set_at),
        closed=setting is not None and setting.closed_at is not None,
        closed_at=None if setting is None or setting.closed_at is None else as_utc(setting.closed_at),
        closed_reason=None if setting is None else setting.closed_reason,
        drafts=report.drafts, drawn=report.drawn, graded=report.graded, pending=report.pending, criteria=criteria,
    )
