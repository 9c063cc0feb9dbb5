"""The demo does not contradict itself: what a grader, an agent or a reviewer says about a draft is true of it.

One test per kind of contradiction the walk found: a grader quoting the greeting as a fabricated claim, a
hallucination report naming something its draft does not say, an "edit" whose sent text is the draft, and
a review calling "good" a pair whose agent had to take a refund promise out.
"""

from __future__ import annotations

import re

import Levenshtein
import pytest
from sqlmodel import Session, col, select

from webapp.grading.models import Grade
from webapp.metrics.models import Event, HallucinationReport
from webapp.reviews.models import ReviewItem
from webapp.runs.models import Draft

# A reply's opening pleasantry: the salutation line ("Hi Dana,") or a courtesy sentence; never a factual claim.
GREETING = re.compile(r"^\s*(hi|hello|dear|hey|thanks|thank you|happy to help|glad to help|sorry|so sorry|we are sorry|i'm sorry)\b", re.I)
# The refund promise planted in the demo's refund drafts ("I have started the refund", "I've processed your refund").
REFUND_PROMISE = re.compile(r"\b(started|processed|issued)\b[^.]*\brefund\b", re.I)
# A report quotes the draft's words between double quotation marks.
QUOTED = re.compile(r"[\"“]([^\"”]{6,})[\"”]")
# What a note may say only of a pair the agent changed.
CHANGED = re.compile(r"\b(fixed|edit|edits|edited|changed|removed|took it out|reworded|adjusted|softened|had to add)\b", re.I)


@pytest.fixture
def db_url(demo_db_url: str) -> str:
    """Every test here reads a copy of the seeded demo."""
    return demo_db_url


def _greeting(draft: str) -> str:
    """Return the draft's salutation line when it has one ("Hi Dana," before a blank line), else ''."""
    first, _, rest = draft.partition("\n")
    return first if rest.startswith("\n") and len(first) < 60 else ""


def test_a_fabricated_claim_quote_is_in_its_draft_and_is_not_its_greeting(session: Session) -> None:
    rows = session.exec(select(Grade.unsupported_claim, Draft.id, Draft.draft_text).join(Draft, col(Draft.id) == Grade.draft_id)).all()
    quotes = [(claim, draft_id, text or "") for claim, draft_id, text in rows if claim]
    assert len(quotes) >= 10  # the demo has factual fails, so the rule is exercised
    for claim, draft_id, text in quotes:
        assert claim in text, f"draft {draft_id}: the quote {claim!r} is not in the draft"
        assert not GREETING.match(claim), f"draft {draft_id}: the quote {claim!r} is a greeting"
        greeting = _greeting(text)
        assert not greeting or greeting not in claim, f"draft {draft_id}: the quote {claim!r} holds the greeting {greeting!r}"


def test_a_hallucination_report_quotes_a_claim_its_draft_makes(session: Session) -> None:
    reports = session.exec(
        select(HallucinationReport.id, HallucinationReport.note, Event.draft_text).join(
            Event, col(Event.event_id) == HallucinationReport.event_id
        )
    ).all()
    assert len(reports) >= 2
    for report_id, note, draft in reports:
        quoted = QUOTED.findall(note)
        assert quoted, f"report {report_id}: the note {note!r} quotes nothing of the draft"
        for claim in quoted:
            assert claim in (draft or ""), f"report {report_id}: {claim!r} is not in its draft {draft!r}"


def test_an_edited_draft_differs_from_what_was_sent(session: Session) -> None:
    edits = session.exec(
        select(Event.event_id, Event.draft_text, Event.sent_text, Event.edit_distance).where(
            Event.action == "edit"
        )
    ).all()
    assert len(edits) > 100
    same = [e for e, draft, sent, _ in edits if Levenshtein.distance(draft or "", sent or "") == 0]
    assert not same, f"{len(same)} 'edit' events sent their draft unchanged, e.g. {same[:3]}"
    assert all(distance is not None and distance > 0 for *_, distance in edits)


def test_a_reviewed_pair_with_a_refund_promise_is_not_good_and_notes_match_the_pair(session: Session) -> None:
    rows = session.exec(
        select(ReviewItem, Event).join(Event, col(Event.event_id) == ReviewItem.event_id).where(col(ReviewItem.verdict).is_not(None))
    ).all()
    pairs = [(item.id, item.verdict, item.notes, event.draft_text, event.sent_text) for item, event in rows]
    promising = [p for p in pairs if REFUND_PROMISE.search(p[3] or "")]
    assert promising, "the reviewed sample has no draft with a refund promise"
    for item_id, verdict, notes, _draft, _sent in promising:
        assert verdict != "good", f"review item {item_id}: a draft promising a refund is marked good ({notes!r})"
    for item_id, verdict, notes, draft, sent in pairs:
        if "refund" in notes.lower():
            assert REFUND_PROMISE.search(draft or ""), f"review item {item_id}: the note {notes!r} names a refund the draft lacks"
        if draft == sent:
            assert not CHANGED.search(notes), f"review item {item_id}: sent as drafted, yet {verdict} {notes!r}"
        else:
            assert "as drafted" not in notes, f"review item {item_id}: edited, yet {notes!r}"
