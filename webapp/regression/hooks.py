"""What the regression alerts ask of ppi, which sits above regression (webapp/core/hooks.py).

The alerts page and API list the sampled pass-rate differences (a run's human-graded sample
against its baseline's); ppi computes them and answers (webapp/ppi/provides.py).
"""

from __future__ import annotations

from sqlmodel import Session

from webapp.core.hooks import hook
from webapp.core.spec import EvalSpec
from webapp.regression.alerts import PassRateDifference


@hook
def pass_rate_readings(*, session: Session, spec: EvalSpec, baseline_id: int | None = None) -> list[PassRateDifference]:
    """Return the sampled pass-rate difference of every run with a sample whose baseline has one (the alerts page).

    With `baseline_id`: only the runs measured against that baseline.
    """
    ...
