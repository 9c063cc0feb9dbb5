"""Home cards of grading: drafts waiting for my grade, grades returned to me, disagreements, references."""

from __future__ import annotations

from sqlmodel import Session

from webapp.auth.service import Principal
from webapp.core.spec import EvalSpec
from webapp.grading.adjudication import list_adjudications
from webapp.grading.grades import returned_grades
from webapp.grading.progress import waiting_for_grader
from webapp.grading.references import references_to_approve
from webapp.grading.scores import GRADER_ROLES
from webapp.web.cards import HomeCard


def home_cards(*, session: Session, principal: Principal, spec: EvalSpec) -> list[HomeCard]:
    """Return what grading has waiting for this user."""
    cards: list[HomeCard] = []
    if principal.has_role(*GRADER_ROLES):
        waiting = waiting_for_grader(session=session, spec=spec, grader_id=principal.user_id)
        cards.append(
            HomeCard(
                title="Grading",
                body=f"{waiting} draft{'s' if waiting != 1 else ''} waiting for your grade.",
                href="/grading",
                action="Grade next",
                count=waiting,
                tone="todo" if waiting else "ok",
            )
        )
        returned = len(returned_grades(session=session, grader_id=principal.user_id))
        if returned:
            cards.append(
                HomeCard(
                    title="Returned for rework",
                    body=f"{returned} grade{'s' if returned != 1 else ''} returned to you by the lead.",
                    href="/grading#returned",
                    action="Rework",
                    count=returned,
                    tone="alert",
                )
            )
    if principal.has_role("lead"):
        open_n = len(list_adjudications(session=session, status="open"))
        cards.append(
            HomeCard(
                title="Adjudication",
                body=f"{open_n} disagreement{'s' if open_n != 1 else ''} to adjudicate.",
                href="/grading/adjudication",
                action="Adjudicate",
                count=open_n,
                tone="todo" if open_n else "ok",
            )
        )
        refs = len(references_to_approve(session=session))
        cards.append(
            HomeCard(
                title="References",
                body=f"{refs} reference{'s' if refs != 1 else ''} to approve.",
                href="/grading/references?show=to_approve",
                action="Review",
                count=refs,
                tone="todo" if refs else "ok",
            )
        )
    return cards
