"""The lead's hallucination queue: each report with its evidence, its decision history, and undo.

A report shows the flagged draft beside the KB revisions it cited (as the drafting tool sent them
with the report), the word diff from the draft to what the agent sent, and every decision taken on
it. Decisions are appended, never edited: undoing one adds a decision that puts the report back in
the state it had before, so the history stays complete. Confirmed reports feed the daily metrics,
the alerts and the production gate, which read the report's current state, so an undo is reflected
at once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlmodel import Session, col, select

from webapp.auth.models import User
from webapp.core.textdiff import Segment, word_diff
from webapp.kb.models import KbRevision
from webapp.kb.service import CitedRevision, states_of
from webapp.metrics.daily import MetricsError
from webapp.metrics.models import Event, HallucinationDecision, HallucinationReport
from webapp.metrics.reports import apply_decision

DECISION_LABELS = {"confirmed": "confirmed", "dismissed": "dismissed", "pending": "back to pending"}


@dataclass
class DecisionView:
    """One row of a report's history, with who took it."""

    row: HallucinationDecision
    by: str

    @property
    def label(self) -> str:
        return ("undo: " if self.row.undoes else "") + DECISION_LABELS.get(self.row.decision, self.row.decision)


@dataclass
class ReportView:
    """A report with everything the lead needs to decide it."""

    report: HallucinationReport
    event: Event
    cited: list[CitedRevision]
    diff: list[Segment]
    history: list[DecisionView]
    filed_by: str = "—"
    minted_by: str | None = None  # the admin whose token for the reporter filed it

    @property
    def can_undo(self) -> bool:
        return bool(self.history)


def _cited(citations: Sequence[Mapping[str, object]] | None, revisions: dict[tuple[str, int], KbRevision],
           current: dict[str, KbRevision], states: dict[tuple[str, int], str]) -> list[CitedRevision]:
    out: list[CitedRevision] = []
    for c in citations or []:
        article_id = str(c.get("article_id", ""))
        rev = c.get("revision")
        revision = int(rev) if isinstance(rev, int) else None
        found = revisions.get((article_id, revision)) if revision else current.get(article_id)
        status = states[(found.article_id, found.revision)] if found is not None else None
        out.append(CitedRevision(article_id, revision, found, current.get(article_id), status))
    return out


def _kb_revisions(session: Session, reports: list[tuple[HallucinationReport, Event]]) -> list[KbRevision]:
    """Return every revision of the articles the reports cite (one query for the whole queue)."""
    ids = {str(c.get("article_id", "")) for r, _ in reports for c in (r.citations or [])}
    if not ids:
        return []
    return list(session.exec(select(KbRevision).where(col(KbRevision.article_id).in_(ids))).all())


def report_views(*, session: Session, reports: list[tuple[HallucinationReport, Event]]) -> list[ReportView]:
    """Return the queue's reports with their cited KB revisions, word diff and decision history."""
    ids = [r.id for r, _ in reports if r.id is not None]
    rows = list(
        session.exec(
            select(HallucinationDecision)
            .where(col(HallucinationDecision.report_id).in_(ids))
            .order_by(col(HallucinationDecision.id))
        ).all()
    ) if ids else []
    people = {d.decided_by for d in rows if d.decided_by} | {
        u for r, _ in reports for u in (r.reported_by, r.minted_by) if u is not None
    }
    names = {
        u.id: u.name or u.email for u in session.exec(select(User).where(col(User.id).in_(people))).all()
    } if people else {}
    kb = _kb_revisions(session, reports)
    revisions = {(k.article_id, k.revision): k for k in kb}
    states = states_of(kb)  # what each revision is now (stored revisions keep their stated status)
    current = {k.article_id: k for k in kb if states[(k.article_id, k.revision)] == "current"}
    by_report: dict[int, list[DecisionView]] = {}
    for d in rows:
        by_report.setdefault(d.report_id, []).append(DecisionView(d, names.get(d.decided_by, "—") if d.decided_by else "—"))
    return [
        ReportView(
            report=r,
            event=e,
            cited=_cited(r.citations, revisions, current, states),
            diff=word_diff(e.draft_text, e.sent_text),
            history=by_report.get(r.id or 0, []),
            filed_by=names.get(r.reported_by, "—") if r.reported_by else "—",
            minted_by=names.get(r.minted_by, "—") if r.minted_by else None,
        )
        for r, e in reports
    ]


def undo_last_decision(*, session: Session, report_id: int, decided_by: int | None, note: str = "") -> HallucinationReport:
    """Revert a report's newest decision by appending one that restores the state before it."""
    report = session.get(HallucinationReport, report_id)
    if report is None:
        raise MetricsError(f"report: no hallucination report {report_id}")
    history = list(
        session.exec(
            select(HallucinationDecision)
            .where(HallucinationDecision.report_id == report_id)
            .order_by(col(HallucinationDecision.id))
        ).all()
    )
    if not history:
        raise MetricsError(f"report: hallucination report {report_id} has no decision to undo")
    last = history[-1]
    before = history[-2].decision if len(history) > 1 else "pending"
    reason = note.strip() or f"undid decision {last.id} ({DECISION_LABELS.get(last.decision, last.decision)})"
    return apply_decision(session=session, report=report, decision=before, decided_by=decided_by, note=reason, undoes=last.id)
