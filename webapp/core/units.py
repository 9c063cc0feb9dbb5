"""One unit and one format per figure: every page, alert, CSV column, chart and gate formats through here.

The JSON API keeps base units (rates as fractions 0-1, seconds, US dollars) at full precision;
whatever people read uses `text()` (value with its unit), `number()` (the same digits without
the unit, for CSV cells), `threshold()` ("< 65.0%") and `delta()` (signed change, neutral at 0).
Handle time is shown in seconds to one decimal (like the spec, the chart axis and the CSV).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Tone = Literal["up", "down", ""]


@dataclass(frozen=True)
class Unit:
    """How a figure is written: scale from the base unit, decimals, prefix/suffix, CSV column suffix."""

    scale: float = 1.0
    digits: int = 3
    prefix: str = ""
    suffix: str = ""
    column: str = ""  # appended to the CSV column name ("_pct", "_usd")
    d3: str = ".3f"  # the same format for plotly (hover and axis)
    delta_suffix: str = ""  # unit of a difference ("pts" for percentages)

    def number(self, value: float | None) -> str:
        """Return the value in this unit with its decimals, without the unit ('' when None)."""
        if value is None:
            return ""
        x = round(value * self.scale, self.digits)
        if x == 0:
            x = 0.0  # never "-0.0"
        return f"{x:.{self.digits}f}"

    def text(self, value: float | None) -> str:
        """Return the value with its unit, or an em dash when there is none."""
        if value is None:
            return "—"
        return f"{self.prefix}{self.number(value)}{self.suffix}"


PERCENT = Unit(scale=100, digits=1, suffix="%", column="_pct", d3=".1%", delta_suffix=" pts")
RATIO = Unit(digits=3, d3=".3f")
SECONDS_1 = Unit(digits=1, suffix=" s", d3=".1f", delta_suffix=" s")
SECONDS_2 = Unit(digits=2, suffix=" s", d3=".2f", delta_suffix=" s")
USD = Unit(digits=4, prefix="$", column="_usd", d3="$.4f")
COUNT = Unit(digits=0, d3="d")

# metric -> unit; the online metrics of the spec plus the automated-check pass rate
UNITS: dict[str, Unit] = {
    "accept_rate": PERCENT,
    "reject_rate": PERCENT,
    "edit_distance": RATIO,
    "escalation_rate": PERCENT,
    "handle_time_s": SECONDS_1,
    "latency_p95_s": SECONDS_2,
    "hallucination_reports": COUNT,
    "cost_per_draft": USD,
    "pass_rate": PERCENT,
}


def unit(metric: str) -> Unit:
    """Return the unit of a metric; an unknown name is a programming error."""
    try:
        return UNITS[metric]
    except KeyError:
        raise KeyError(f"metric: no unit registered for {metric!r}") from None


def text(metric: str, value: float | None) -> str:
    """Return a metric's value as people read it, e.g. '94.3%', '212.4 s', '$0.0210'."""
    return unit(metric).text(value)


def number(metric: str, value: float | None) -> str:
    """Return a metric's value in its unit without the symbol (a CSV cell), e.g. '94.3'."""
    return unit(metric).number(value)


def csv_column(metric: str) -> str:
    """Return the CSV column name of a metric, carrying its unit (accept_rate_pct, cost_per_draft_usd)."""
    return metric + unit(metric).column


def threshold(metric: str, op: str, value: float) -> str:
    """Return a comparison in the metric's unit, e.g. '< 65.0%'."""
    return f"{op} {text(metric, value)}"


def percent(value: float | None) -> str:
    """Return a share as a percentage with one decimal (the pass-rate format)."""
    return PERCENT.text(value)


@dataclass(frozen=True)
class Delta:
    """A signed change as shown: its text and whether it went up, down, or (rounded) nowhere."""

    text: str
    tone: Tone


def delta(value: float | None, u: Unit = PERCENT) -> Delta:
    """Return a change in the unit's decimals: '+1.2 pts', '-3.0 pts', or a neutral '0.0 pts'."""
    if value is None:
        return Delta("—", "")
    shown = u.number(abs(value))
    if float(shown) == 0:
        return Delta(f"{u.prefix}{shown}{u.delta_suffix}", "")
    sign = "+" if value > 0 else "-"
    return Delta(f"{sign}{u.prefix}{shown}{u.delta_suffix}", "up" if value > 0 else "down")


def score_delta(value: float | None) -> Delta:
    """Return a change of a rubric mean (1-5 scale) with two decimals, neutral when it rounds to 0."""
    return delta(value, Unit(digits=2))
