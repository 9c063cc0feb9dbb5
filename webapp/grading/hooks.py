"""What the grading pages ask of the evaluator, which sits above grading (webapp/core/hooks.py).

The grading screen shows the LLM judge's verdict once a grader may see the model signals; the
evaluator records the verdicts and answers where they are read (webapp/evaluator/provides.py).
"""

from __future__ import annotations

from webapp.core.hooks import hook
from webapp.grading.evidence import JudgeLookup


@hook
def judge_lookup() -> JudgeLookup:
    """Return where the grading pages read a draft's judge verdict."""
    ...
