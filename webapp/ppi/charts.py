"""The weekly human-graded quality chart on /metrics: each week's criteria with their 95% intervals, and the team's targets.

Decisions (issue 34): the plan sets no weekly production quality target, so the targets are the
team's (`team_targets.weekly_human_quality`), one per rubric criterion, each read as the pilot
gate reads it (factual accuracy as the average with pass = 5, fail = 1). The chart draws one
series per criterion, side by side within each week, and one dashed line per distinct target,
labelled "the team's target" with the criteria it applies to. A week's alert is the same line:
a final week alerts when a criterion's upper bound is below its target, so a second line at the
same height would only hide the first. Provisional weeks (grades pending) are drawn hollow, and a
criterion below its target is drawn in the alert colour.
"""

from __future__ import annotations

import json
import math

from webapp.ppi.judge_runs import RunAgreement
from webapp.ppi.production import WeekQuality
from webapp.ppi.schemas import EstimatePublic, FigurePublic
from webapp.ppi.sequence_path import SequencePath
from webapp.ppi.signals import FIGURE_RANGE

Json = dict[str, object]  # a plotly figure or part of one, JSON-ready
COLORS = {"value": "#2456c7", "provisional": "#8a94a6", "target": "#17803d", "alert": "#b42318"}
SERIES = ("#2456c7", "#7a3fb0", "#0f766e", "#a15c07")  # one per criterion, in rubric order
SYMBOLS = ("circle", "square", "diamond", "triangle-up")


def _criterion_trace(weeks: list[WeekQuality], k: int) -> Json | None:
    """Return the scatter trace of the k-th criterion over the weeks that have its estimate."""
    shown = [(w, w.criteria[k]) for w in weeks if k < len(w.criteria) and w.criteria[k].estimate is not None]
    if not shown:
        return None
    color = SERIES[k % len(SERIES)]
    name = shown[0][1].name
    below = {w.week for w in weeks for c in w.below_criteria if c.key == shown[0][1].key}
    colors = [COLORS["alert"] if w.week in below else color for w, _ in shown]
    symbol = SYMBOLS[k % len(SYMBOLS)]
    return {
        "type": "scatter", "mode": "markers", "name": name, "x": [w.week for w, _ in shown],
        "y": [c.estimate.estimate for _, c in shown if c.estimate is not None],
        "error_y": {
            "type": "data", "symmetric": False, "color": color, "thickness": 1.5, "width": 4,
            "array": [c.estimate.high - c.estimate.estimate for _, c in shown if c.estimate is not None],
            "arrayminus": [c.estimate.estimate - c.estimate.low for _, c in shown if c.estimate is not None],
        },
        "marker": {
            "size": 8, "color": colors, "line": {"width": 2, "color": colors},
            "symbol": [symbol + "-open" if w.provisional else symbol for w, _ in shown],
        },
        "customdata": [
            [c.estimate.low, c.estimate.high, w.graded, w.drafts, w.pending, c.target,
             " · alert: upper bound below the team's target" if w.week in below else " · provisional" if w.provisional else ""]
            for w, c in shown if c.estimate is not None
        ],
        "hovertemplate": "%{x} " + name + ": %{y:.2f} [%{customdata[0]:.2f}, %{customdata[1]:.2f}] · the team's target "
        "%{customdata[5]:.2f} · %{customdata[2]} human grades of %{customdata[3]} drafts · %{customdata[4]} pending"
        "%{customdata[6]}<extra></extra>",
    }


def quality_figure(weeks: list[WeekQuality], targets: dict[str, float]) -> Json:
    """Return the plotly figure (a JSON-ready dict): per week each criterion's estimate with error bars to its 95% bounds."""
    x = [w.week for w in weeks]
    n = max((len(w.criteria) for w in weeks), default=0)
    traces = [t for t in (_criterion_trace(weeks, k) for k in range(n)) if t is not None]
    names = {c.key: c.name for w in weeks for c in w.criteria}
    by_value: dict[float, list[str]] = {}
    for key, value in targets.items():
        by_value.setdefault(value, []).append(names.get(key, key))
    # across the whole plot (paper x), so one week alone still shows it
    shapes = [
        {
            "type": "line", "xref": "paper", "x0": 0, "x1": 1, "yref": "y", "y0": value, "y1": value,
            "line": {"color": COLORS["target"], "dash": "dash", "width": 1.5}, "showlegend": True,
            "name": f"the team's target: above {value:g}"
            + (" (every criterion)" if len(crits) == len(targets) else f" ({', '.join(crits)})")
            + "; alert: a final week's upper bound below it",
        }
        for value, crits in sorted(by_value.items())
    ]
    layout = {
        # no title: the card's heading names the chart
        "height": 300,
        "margin": {"l": 50, "r": 10, "t": 15, "b": 95},
        "legend": {"orientation": "h", "y": -0.25, "font": {"size": 10}},
        "shapes": shapes,
        # the criteria of a week side by side, not on top of each other
        "scattermode": "group",
        # weeks as categories: one slot per week that has a run, in week order
        "xaxis": {"type": "category", "categoryorder": "array", "categoryarray": x, "range": [-0.5, len(x) - 0.5]},
        "yaxis": {"range": [1, 5], "title": {"text": "as the pilot gate reads it (1–5)"}, "hoverformat": ".2f"},
        "paper_bgcolor": "#fff", "plot_bgcolor": "#fff",
        "font": {"family": "system-ui, sans-serif", "color": "#1d2430"},
    }
    return {"data": traces, "layout": layout}


# --- the run's forest plot and the judge's agreement across runs (issue 35 item 4) --------------------------

KINDS = (("single", "single score", "#2456c7", "circle"), ("learned", "learned predictor", "#7a3fb0", "diamond"))
SHARES = ("factual_accuracy", "pass_rate")


def _forest_trace(figures: list[FigurePublic], kind: str, name: str, color: str, symbol: str, axis: str) -> Json | None:
    """Return one kind's (single or learned) markers with 95% error bars on one panel; None when no figure has that estimate."""
    rows = [(i, f, getattr(f, kind)) for i, f in enumerate(figures) if getattr(f, kind) is not None]
    shown = [(i, f, e) for i, f, e in rows if isinstance(e, EstimatePublic)]
    if not shown:
        return None
    offset = 0.15 if kind == "single" else -0.15
    fmt = ".0%" if figures[0].key in SHARES else ".2f"
    return {
        "type": "scatter", "mode": "markers", "name": name, "legendgroup": kind, "showlegend": axis == "",
        "xaxis": "x" + axis, "yaxis": "y" + axis,
        "x": [e.estimate for _, _, e in shown], "y": [i + offset for i, _, _ in shown],
        "error_x": {
            "type": "data", "symmetric": False, "color": color, "thickness": 1.5, "width": 4,
            "array": [e.high - e.estimate for _, _, e in shown], "arrayminus": [e.estimate - e.low for _, _, e in shown],
        },
        # filled: the estimate the gate uses; hollow: the other one
        "marker": {"size": 9, "color": color, "line": {"width": 2, "color": color},
                   "symbol": [symbol if (kind == "learned") == f.uses_learned else symbol + "-open" for _, f, _ in shown]},
        "customdata": [[f.title, e.low, e.high, e.worth_human_grades if math.isfinite(e.worth_human_grades) else None,
                        " · the gate uses this one" if (kind == "learned") == f.uses_learned else ""] for _, f, e in shown],
        "hovertemplate": "%{customdata[0]} (" + name + "): %{x:" + fmt + "} [%{customdata[1]:" + fmt + "}, %{customdata[2]:"
        + fmt + "}] · worth %{customdata[3]:.0f} human-only grades%{customdata[4]}<extra></extra>",
    }


def _threshold_shapes(figures: list[FigurePublic], axis: str, first: bool) -> list[Json]:
    """Return a short dashed line at each figure's gate threshold, across that figure's row only."""
    shapes: list[Json] = []
    for i, f in enumerate(figures):
        if f.gate is None:
            continue
        shapes.append({
            "type": "line", "xref": "x" + axis, "yref": "y" + axis, "x0": f.gate.threshold, "x1": f.gate.threshold,
            "y0": i - 0.4, "y1": i + 0.4, "line": {"color": COLORS["alert"], "dash": "dash", "width": 2},
            "showlegend": first and not shapes, "name": "the gate's threshold",
        })
    return shapes


def forest_figure(figures: list[FigurePublic]) -> Json:
    """Return the forest plot: each figure's estimate with its 95% interval, single score and learned predictor side by side, and the gate's threshold.

    Two panels, because the figures have two scales: shares (factual accuracy, pass rate) on the
    left, 1-5 grades on the right.
    """
    shares = [f for f in figures if f.key in SHARES]
    grades = [f for f in figures if f.key not in SHARES]
    traces: list[Json] = []
    shapes: list[Json] = []
    for panel, axis in ((grades, ""), (shares, "2")):
        for kind, name, color, symbol in KINDS:
            t = _forest_trace(panel, kind, name, color, symbol, axis)
            if t is not None:
                traces.append(t)
        shapes += _threshold_shapes(panel, axis, first=axis == "")
    rows = max(len(shares), len(grades), 1)

    def y_axis(panel: list[FigurePublic]) -> Json:
        # short names ("Factual accuracy", not "... (pass share)"): the right panel's names sit between the panels
        return {"tickvals": list(range(len(panel))), "ticktext": [f.title.split(" (")[0] for f in panel],
                "range": [rows - 0.5, -0.5], "automargin": True, "fixedrange": True, "zeroline": False}

    layout: Json = {
        "height": 120 + 60 * rows,
        "margin": {"l": 10, "r": 10, "t": 10, "b": 70},
        "grid": {"rows": 1, "columns": 2},
        "xaxis": {"domain": [0, 0.45], "range": [0.9, 5.1], "title": {"text": "grade (1–5)"}, "hoverformat": ".2f", "zeroline": False},
        "yaxis": y_axis(grades),
        "xaxis2": {"domain": [0.62, 1], "range": [-0.03, 1.03], "tickformat": ".0%", "title": {"text": "share"}, "hoverformat": ".0%",
                   "zeroline": False},
        "yaxis2": {**y_axis(shares), "anchor": "x2"},
        "shapes": shapes,
        "legend": {"orientation": "h", "y": -0.35, "font": {"size": 11}},
        "paper_bgcolor": "#fff", "plot_bgcolor": "#fff",
        "font": {"family": "system-ui, sans-serif", "color": "#1d2430"},
    }
    return {"data": traces, "layout": layout}


def agreement_figure(history: list[RunAgreement], titles: dict[str, str]) -> Json:
    """Return the chart of the judge's agreement with people per figure across runs (x: run, oldest first)."""
    x = [h.run_name for h in history]
    traces: list[Json] = []
    for k, (key, title) in enumerate(titles.items()):
        points = [(h.run_name, h.agreement.get(key), h.graded, h.judge_version) for h in history]
        traces.append({
            "type": "scatter", "mode": "lines+markers", "name": title, "x": [p[0] for p in points], "y": [p[1] for p in points],
            "line": {"color": SERIES[k % len(SERIES)] if k < len(SERIES) else "#1d2430", "width": 1.5},
            "marker": {"size": 7, "symbol": SYMBOLS[k % len(SYMBOLS)]},
            "customdata": [[p[2], p[3]] for p in points],
            "hovertemplate": "%{x} · " + title + ": %{y:.0%} agree · %{customdata[0]} graded drafts · judge %{customdata[1]}<extra></extra>",
        })
    layout: Json = {
        "height": 320,
        "margin": {"l": 55, "r": 10, "t": 10, "b": 90},
        "xaxis": {"type": "category", "categoryorder": "array", "categoryarray": x, "title": {"text": "run (oldest first)"}},
        "yaxis": {"range": [0, 1.02], "tickformat": ".0%", "title": {"text": "judge agrees with people"}},
        "legend": {"orientation": "h", "y": -0.32, "font": {"size": 10}},
        "paper_bgcolor": "#fff", "plot_bgcolor": "#fff",
        "font": {"family": "system-ui, sans-serif", "color": "#1d2430"},
    }
    return {"data": traces, "layout": layout}


def to_json(figure: Json) -> str:
    """Serialize a figure for the page's data-figure attribute (plain floats, strings and None)."""
    return json.dumps(figure, allow_nan=False)


def sequence_figure(path: SequencePath) -> Json:
    """Return one criterion's confidence-sequence path: the band of its bounds per look, the threshold, the decision marked."""
    x = [p.grades for p in path.points]
    band = COLORS["value"]
    traces: list[Json] = [
        {"type": "scatter", "mode": "lines", "name": "upper bound", "x": x, "y": [p.high for p in path.points],
         "line": {"color": band, "width": 1}, "hovertemplate": "%{x} grades: upper %{y:.2f}<extra></extra>"},
        {"type": "scatter", "mode": "lines", "name": "lower bound", "x": x, "y": [p.low for p in path.points],
         "line": {"color": band, "width": 1}, "fill": "tonexty", "fillcolor": "rgba(36, 86, 199, 0.18)",
         "hovertemplate": "%{x} grades: lower %{y:.2f}<extra></extra>"},
    ]
    if path.verdict is not None and path.decided_grades is not None and path.decided_low is not None and path.decided_high is not None:
        y = path.decided_low if path.verdict == "pass" else path.decided_high  # the bound that cleared the threshold
        traces.append({
            "type": "scatter", "mode": "markers+text", "name": f"decided: {'passes' if path.verdict == 'pass' else 'fails'}",
            "x": [path.decided_grades], "y": [y], "text": [f"{path.verdict} at {path.decided_grades}"],
            # the label on the side with room: left of a star in the chart's right half (it was cut at the edge)
            "textposition": "top left" if x and path.decided_grades > x[-1] / 2 else "top right",
            "marker": {"size": 11, "symbol": "star", "color": COLORS["target"] if path.verdict == "pass" else COLORS["alert"]},
            "hovertemplate": "decided %{text} grades<extra></extra>",
        })
    lo, hi = FIGURE_RANGE[path.key]
    layout: Json = {
        "height": 240,
        "margin": {"l": 50, "r": 10, "t": 30, "b": 45},
        "title": {"text": path.title, "font": {"size": 13}},
        "xaxis": {"title": {"text": "final grades so far"}, "rangemode": "tozero"},
        "yaxis": {"range": [lo, hi], "title": {"text": "bounds"}},
        "shapes": [{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "yref": "y", "y0": path.threshold, "y1": path.threshold,
                    "line": {"color": COLORS["target"], "dash": "dash", "width": 1.5}}],
        # the threshold's label on the other side of the line from a pass star (which sits just above it)
        "annotations": [{"xref": "paper", "x": 1, "y": path.threshold, "yref": "y", "xanchor": "right",
                         "yanchor": "top" if path.verdict == "pass" else "bottom",
                         "text": f"threshold {path.threshold:g}", "showarrow": False, "font": {"size": 10, "color": COLORS["target"]}}],
        "showlegend": False,
        "paper_bgcolor": "#fff", "plot_bgcolor": "#fff",
        "font": {"family": "system-ui, sans-serif", "color": "#1d2430"},
    }
    return {"data": traces, "layout": layout}
