"""What the generator and the judge are sent: their messages and per-sample seeds."""

from __future__ import annotations

from webapp.datasets.loader import TestCase
from webapp.evaluator.json_types import ChatMessage
from webapp.evaluator.preparation import Prepared
from webapp.evaluator.rubric import judge_instructions
from webapp.evaluator.support import generator_user_message

Message = ChatMessage  # {"role": ..., "content": ...}, as Chat Completions takes it


def generator_messages(p: Prepared, case: TestCase) -> list[Message]:
    """Return the generator's messages for a case (system prompt, then the case input or the ticket form)."""
    if p.support:
        assert p.kb is not None and p.spec is not None  # prepare() loads both for support-draft rubrics
        user = generator_user_message(
            case, p.kb.for_case(case), list(p.spec.intents), p.spec.checks.confidence_fallback
        )
    else:
        user = case.input
    return [{"role": "system", "content": p.system_prompt}, {"role": "user", "content": user}]


def judge_messages(p: Prepared, case: TestCase, output_text: str) -> list[Message]:
    """Return the judge's messages: the rubric as instructions, then the case and the output to score."""
    parts = [f"TASK: {case.task}" if case.task else None, f"INPUT:\n{case.input}"]
    if case.expected_constraints:
        parts.append(f"EXPECTED CONSTRAINTS:\n{case.expected_constraints}")
    if case.reference:
        parts.append(f"REFERENCE OUTPUT:\n{case.reference}")
    if p.support and p.kb is not None:
        arts = p.kb.for_case(case)
        kb_text = "\n\n".join(f"[{a.article_id} revision {a.revision}] {a.title}\n{a.body}" for a in arts) or "(none)"
        parts.append(f"KB ARTICLES GIVEN TO THE WRITER:\n{kb_text}")
    parts.append(f"OUTPUT:\n{output_text}")
    return [
        {"role": "system", "content": judge_instructions(p.rubric)},
        {"role": "user", "content": "\n\n".join(x for x in parts if x)},
    ]


def generator_seed(seed: int | None, index: int) -> int | None:
    """Return sample `index`'s generator seed: with --seed the samples stay reproducible yet different."""
    return None if seed is None else seed + index


def judge_seed(seed: int | None, repeat: int) -> int | None:
    """Return judgement `repeat`'s seed: the first keeps the run's seed, each repeat gets its own draw."""
    return None if seed is None else seed + repeat
