"""Blind grading: who may see a draft's model signals, and when. The one rule every page and API route follows.

A draft's *model signals* are what the machine thinks of it: the model's confidence (and the raw
output that carries it), the LLM judge's scores and rationale, and the automated checks' results
on that draft. A grader who sees them before grading anchors on them, so they stay hidden from a
blind viewer until that viewer has graded the draft (`grading.show_model_signals_before_grading`
in the spec shows them before). Which drafts a viewer has graded is grading's to say: grading's
`evidence.signals_view` (and `webapp.runs.hooks.signals_view` for the domains below grading) asks it
and returns a `SignalsView`; this module holds only the rule, so that every layer can apply it.
Decisions and reasons: docs/grading.md, "Blind means blind".
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Protocol

from webapp.core.spec import EvalSpec


class Viewer(Protocol):
    """Who looks at a draft: anything that tells its roles (auth's Principal; core imports no domain)."""

    def has_role(self, *roles: str) -> bool:
        """Tell whether the viewer holds any of `roles`."""
        ...

# Roles whose work needs every draft's signals, so their holders are never blind outside the
# grading screen: the lead adjudicates (and answers for the runs), the PM and the admin do not
# grade, and the support lead reads the regression suite and the metrics to act on alerts.
# A principal holding `labeler` and none of these is a blind grader.
SIGHTED_ROLES: tuple[str, ...] = ("lead", "pm", "admin", "support_lead", "ml_lead")

def is_blind(principal: Viewer | None) -> bool:
    """Tell whether a viewer is a blind grader: a labeler holding none of the sighted roles."""
    return principal is not None and principal.has_role("labeler") and not principal.has_role(*SIGHTED_ROLES)


def signals_visible(*, spec: EvalSpec, principal: Viewer | None, has_graded: bool, grading: bool = False) -> bool:
    """Tell whether a viewer sees a draft's model signals: the one blind-grading rule.

    Shown once the viewer has graded the draft, or always when the spec says so; otherwise hidden
    from a blind grader (`is_blind`), and on the grading screen (`grading=True`) from whoever is
    about to grade the draft, the lead included, so that every first grade is blind.
    """
    if has_graded or spec.grading.show_model_signals_before_grading:
        return True
    return not grading and not is_blind(principal)


@dataclass(frozen=True)
class SignalsView:
    """Which drafts' model signals a viewer sees: every draft, or only those they have graded."""

    everything: bool
    graded: frozenset[int] = frozenset()

    @classmethod
    def for_viewer(cls, *, spec: EvalSpec, principal: Viewer | None, graded: Collection[int]) -> SignalsView:
        """Apply the rule to a viewer who has graded the drafts in `graded` (of those they look at)."""
        return cls(everything=signals_visible(spec=spec, principal=principal, has_graded=False), graded=frozenset(graded))

    def shows(self, draft_id: int | None) -> bool:
        """Tell whether this draft's signals are shown (signals_visible, with has_graded read from `graded`)."""
        return self.everything or (draft_id is not None and draft_id in self.graded)

    def hides(self, draft_id: int | None) -> bool:
        """Tell whether this draft's signals are hidden until the viewer grades it."""
        return not self.shows(draft_id)


# The view of a caller no rule restricts (the command line, a spec that shows signals).
ALL_SIGNALS = SignalsView(everything=True)
