"""Plotly figures for the metrics page: values, target and alert lines, firing periods, version markers."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from typing import TypeAlias

import plotly.io as pio

from webapp.core import units
from webapp.core.spec import METRIC_NAMES, EvalSpec
from webapp.metrics.alert_states import AlertStatus
from webapp.metrics.calibration import Calibration
from webapp.metrics.daily import DayMetrics
from webapp.metrics.targets import METRIC_LABELS, alert_threshold_value, target_lines
from webapp.metrics.versions import VersionChange

# A plotly figure is a JSON document in plotly's schema (validated by the tests through go.Figure):
# typed as JSON, read-only (Mapping and Sequence), so lists of text or numbers fit in.
PlotlyJson: TypeAlias = "str | int | float | bool | None | Sequence[PlotlyJson] | Mapping[str, PlotlyJson]"
Figure: TypeAlias = "dict[str, PlotlyJson]"

RATE_METRICS = frozenset(m for m in METRIC_NAMES if units.unit(m) is units.PERCENT)
_HALF_DAY = dt.timedelta(hours=12)
_COLORS = {"value": "#2456c7", "target": "#17803d", "alert": "#b42318", "firing": "rgba(180,35,24,0.13)", "version": "#6b7280",
           "pilot": "rgba(36,86,199,0.08)"}

# what the hover says each metric's day value is based on, when that is not simply "events"
_BASIS = {
    "accept_rate": "drafts shown", "reject_rate": "drafts shown", "edit_distance": "sent drafts with a distance",
    "handle_time_s": "tickets with a handle time", "cost_per_draft": "drafts with a cost",
}


# A small white template: plotly's built-in ones are deep-copied into every figure, which costs
# tens of milliseconds per chart.
_TEMPLATE: Figure = {
    "layout": {
        "paper_bgcolor": "#fff", "plot_bgcolor": "#fff", "font": {"family": "system-ui, sans-serif", "color": "#1d2430"},
        "xaxis": {"gridcolor": "#eceff3", "linecolor": "#dde2ea", "zeroline": False},
        "yaxis": {"gridcolor": "#eceff3", "linecolor": "#dde2ea", "zeroline": False},
    }
}


# plotly's default legend rank is 1000; entries ranked higher come after the traces
LEGEND_LAST = 1100


def _trace(kind: str, **props: PlotlyJson) -> Figure:
    return {"type": kind, **props}


def _figure(traces: list[Figure], layout: Figure) -> Figure:
    # A plain dict in plotly's figure schema: building go.Figure objects for nine charts took most of
    # the page's time budget. The tests load every figure into go.Figure, which validates it fully.
    return {"data": traces, "layout": layout}


def _edge(day: dt.date, side: int) -> str:
    # half a day before (side -1) or after (+1) a day's point, so a one-day period is a visible band
    return (dt.datetime.combine(day, dt.time()) + side * _HALF_DAY).isoformat()


def _plain(text: str) -> str:
    # plotly renders a small HTML subset in annotations; version names are shown as plain text
    return re.sub(r"[<>&]", "", text)[:40]


def _basis(metric: str, d: DayMetrics) -> str:
    """Say how many events (and, for a mean or rate over fewer, how many of them) are behind a day's value."""
    text = f"{d.events} event{'' if d.events == 1 else 's'}"
    if metric in _BASIS and metric in d.parts:
        n = int(d.parts[metric][1])
        if n != d.events:
            text += f" ({n} {_BASIS[metric]})"
    return text


def metric_figure(
    metric: str,
    days: list[DayMetrics],
    spec: EvalSpec,
    alert: AlertStatus | None,
    changes: list[VersionChange],
    *,
    pilot: tuple[dt.date, dt.date] | None = None,
    low_volume: int = 0,
) -> Figure:
    """Return the plotly figure (as a JSON-ready dict) of one metric over the days: the daily values,
    the target and alert threshold lines, the pilot window and firing periods, the version changes."""
    start, end = days[0].day, days[-1].day
    edges = [_edge(start, -1), _edge(end, 1)] if days else []
    # a day with few events is drawn hollow: its value moves a lot from one ticket to the next
    low = [0 < d.events < low_volume for d in days]
    traces = [_value_trace(metric, days, low, low_volume), *_limit_traces(metric, spec, edges)]
    if any(low):
        traces.append(_hollow_legend(low_volume))
    shapes = [*_pilot_shapes(pilot, start, end), *_firing_shapes(alert, start, end)]
    shapes += [_version_line(c) for c in changes]
    annotations = [_version_label(i, c) for i, c in enumerate(changes)]
    return _figure(traces, _metric_layout(metric, edges, shapes, annotations))


def _value_trace(metric: str, days: list[DayMetrics], low: list[bool], low_volume: int) -> Figure:
    """The daily values: a line with a marker per day (hollow on a low-volume day), the basis on hover."""
    note = f" · fewer than {low_volume}: low volume"
    return _trace(
        "scatter", x=[d.day.isoformat() for d in days], y=[d.value(metric) for d in days], name=METRIC_LABELS.get(metric, metric),
        mode="lines+markers", connectgaps=False,
        line={"color": _COLORS["value"], "width": 2}, showlegend=False,  # the title names it; its legend
        # symbol would be the first day's, hollow or not
        marker={"color": _COLORS["value"], "size": [8 if lo else 6 for lo in low], "symbol": ["circle-open" if lo else "circle" for lo in low],
                "line": {"width": 2, "color": _COLORS["value"]}},
        customdata=[[_basis(metric, d), note if lo else ""] for d, lo in zip(days, low, strict=True)],
        hovertemplate=f"%{{y:{units.unit(metric).d3}}} · %{{customdata[0]}}%{{customdata[1]}}<extra></extra>",
    )


def _limit_traces(metric: str, spec: EvalSpec, edges: list[str]) -> list[Figure]:
    """The target line (two for a band) and the alert threshold line, across the range."""
    traces = [
        _trace(
            "scatter", x=edges, y=[value, value], name="target" if i == 0 else "target (band)", mode="lines",
            line={"color": _COLORS["target"], "dash": "dash", "width": 1.5}, hoverinfo="name+y",
            showlegend=i == 0, legendgroup="target",
        )
        for i, value in enumerate(target_lines(metric, spec))
    ]
    threshold = alert_threshold_value(metric, spec)
    if threshold is not None:
        traces.append(
            _trace(
                "scatter", x=edges, y=[threshold, threshold], name="alert threshold", mode="lines",
                line={"color": _COLORS["alert"], "dash": "dot", "width": 1.5}, hoverinfo="name+y",
            )
        )
    return traces


def _hollow_legend(low_volume: int) -> Figure:
    """A legend entry only: says what a hollow marker means."""
    return _trace(
        "scatter", x=[None], y=[None], mode="markers", name=f"hollow: fewer than {low_volume} events",
        marker={"symbol": "circle-open", "size": 8, "color": _COLORS["value"], "line": {"width": 2}},
        hoverinfo="skip",
        # last in the legend (after the pilot window): on a phone the legend is two columns
        # (static/js/metrics.js) and this, the longest entry, ends the right one under its short name
        legendrank=LEGEND_LAST, meta={"narrow_name": f"hollow: < {low_volume} events"},
    )


def _band(a: dt.date, b: dt.date, start: dt.date, end: dt.date, color: str, name: str) -> Figure:
    """A shaded band over the days [a, b], clipped to the range, behind the line."""
    return {
        "type": "rect", "xref": "x", "yref": "paper", "x0": _edge(max(a, start), -1),
        "x1": _edge(min(b, end), 1), "y0": 0, "y1": 1, "fillcolor": _COLORS[color],
        "line": {"width": 0}, "layer": "below", "name": name,
    }


def _pilot_shapes(pilot: tuple[dt.date, dt.date] | None, start: dt.date, end: dt.date) -> list[Figure]:
    """The pilot window's band (with a legend entry), when it overlaps the range."""
    if pilot is None or not (pilot[0] <= end and pilot[1] >= start):
        return []
    return [_band(pilot[0], pilot[1], start, end, "pilot", "pilot window") | {"showlegend": True, "legendrank": LEGEND_LAST - 1}]


def _firing_shapes(alert: AlertStatus | None, start: dt.date, end: dt.date) -> list[Figure]:
    """A band per stretch of days on which the metric's alert was firing, within the range."""
    if alert is None:
        return []
    return [_band(a, b, start, end, "firing", "firing") for a, b in alert.firing_periods if not (b < start or a > end)]


def _version_line(c: VersionChange) -> Figure:
    return {
        "type": "line", "xref": "x", "yref": "paper", "x0": c.day.isoformat(), "x1": c.day.isoformat(),
        "y0": 0, "y1": 1, "line": {"color": _COLORS["version"], "dash": "dot", "width": 1}, "name": "version",
    }


def _version_label(i: int, c: VersionChange) -> Figure:
    label = "model" if c.kind == "model_version" else "prompt"
    return {
        "x": c.day.isoformat(), "xref": "x", "y": 1, "yref": "paper", "yanchor": "top", "xanchor": "left",
        "yshift": -13 * (i % 3), "bgcolor": "rgba(255,255,255,0.8)",  # staggered: nearby changes stay legible
        "text": f"{label}: {_plain(c.value)}", "showarrow": False, "font": {"size": 10, "color": _COLORS["version"]},
    }


def _metric_layout(metric: str, edges: list[str], shapes: list[Figure], annotations: list[Figure]) -> Figure:
    u = units.unit(metric)
    return {
        "title": {"text": METRIC_LABELS.get(metric, metric), "font": {"size": 14}, "x": 0.01},
        "height": 280,
        # room below for the tick labels and a one-row legend: a legend that does not fit pushes the
        # margin, and plotly then draws the whole chart a second time (about a fifth of the drawing)
        "margin": {"l": 50, "r": 10, "t": 40, "b": 80},
        "shapes": shapes,
        "annotations": annotations,
        "legend": {"orientation": "h", "y": -0.25, "font": {"size": 10}},
        "xaxis": {"type": "date", "range": edges or None},
        # hover values in the metric's unit and decimals, like the table (webapp/core/units.py)
        "yaxis": {"tickformat": ".0%", "hoverformat": u.d3} if metric in RATE_METRICS else {"rangemode": "tozero", "hoverformat": u.d3},
        "hovermode": "x unified",
        "template": _TEMPLATE,
    }


def calibration_figure(cal: Calibration) -> Figure:
    """Return the calibration chart: accept rate per confidence bin against the diagonal."""
    centers = [(b.lo + b.hi) / 2 for b in cal.bins]
    return _figure(
        [
            _trace(
                "bar", x=centers, y=[b.accept_rate for b in cal.bins], width=0.09, name="accept rate",
                marker={"color": _COLORS["value"]}, customdata=[b.n for b in cal.bins],
                hovertemplate="confidence %{x:.2f}<br>accept rate %{y:.1%}<br>%{customdata} drafts<extra></extra>",
            ),
            _trace(
                "scatter", x=centers, y=[b.mean_confidence for b in cal.bins], name="mean confidence", mode="markers",
                marker={"color": _COLORS["alert"], "size": 8},
            ),
            _trace("scatter", x=[0, 1], y=[0, 1], name="perfect calibration", mode="lines", line={"dash": "dash", "color": "#999"}),
        ],
        {
            "title": {"text": "Calibration: accept rate by confidence", "font": {"size": 14}, "x": 0.01},
            "height": 300, "margin": {"l": 50, "r": 10, "t": 40, "b": 85},  # as above: the legend fits "template": _TEMPLATE,
            "xaxis": {"range": [0, 1], "title": {"text": "confidence"}, "dtick": 0.1},
            "yaxis": {"range": [0, 1], "tickformat": ".0%", "title": {"text": "accept rate"}},
            "legend": {"orientation": "h", "y": -0.25},
        },
    )


def to_json(figure: Figure) -> str:
    """Serialize a figure dict for the page."""
    out = pio.to_json(figure, validate=False)
    if out is None:  # only without a figure; one is always given here
        raise ValueError("no figure to serialize")
    return out
