"""Demo survey: one pilot round in which most agents find the assistant helpful."""

from __future__ import annotations

from sqlmodel import Session

from webapp.core.demo_context import DemoContext
from webapp.core.spec import EvalSpec
from webapp.survey import service

COMMENTS = {
    "yes": ["Saves me a lot of typing on billing questions.", "Citations make it quick to double-check.", ""],
    "no": ["Too long for simple questions.", "I rewrite most of them anyway."],
    "neutral": ["Fine for routine tickets, not for edge cases.", ""],
}


def seed(*, session: Session, spec: EvalSpec, ctx: DemoContext) -> None:
    """Open the pilot survey round and record the eight pilot agents' answers."""
    service.open_round(session=session, name="Pilot survey")
    answers = ["yes", "yes", "yes", "yes", "yes", "no", "no", "neutral"]
    for i, helpful in enumerate(answers, start=1):
        service.record_answer(
            session=session, agent_id=f"agent-{i:02d}", helpful=helpful, comment=ctx.rng.choice(COMMENTS[helpful])
        )
