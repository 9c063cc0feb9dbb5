"""What the metrics page and its home card ask of ppi, which sits above metrics (webapp/core/hooks.py).

The metrics page shows the production weeks' human-graded quality beside the online metrics, and
its "alerts firing" count (and home's) includes the weekly quality alert; ppi computes the weeks
and answers (webapp/ppi/provides.py). Metrics reads a week through `QualityWeek`: what it counts
(the template reads the rest of ppi's `WeekQuality`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Protocol

from sqlmodel import Session

from webapp.core.hooks import hook
from webapp.core.spec import EvalSpec


class QualityWeek(Protocol):
    """A production week's human-graded quality, as metrics counts it."""

    @property
    def week(self) -> str:
        """The ISO week ("2026-W46")."""
        ...

    @property
    def below_target(self) -> bool:
        """Whether the week's quality alert fires."""
        ...


@hook
def weekly_quality(*, session: Session, spec: EvalSpec) -> Sequence[QualityWeek]:
    """Return every production week's human-graded quality, oldest first."""
    ...


@hook
def production_quality(*, session: Session, spec: EvalSpec, start: dt.date, end: dt.date) -> tuple[Sequence[QualityWeek], str]:
    """Return the production weeks overlapping start..end with their quality estimates, and their chart as plotly JSON."""
    ...
