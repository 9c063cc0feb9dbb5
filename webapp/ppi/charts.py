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

from typing import Any

from webapp.ppi.production import WeekQuality

COLORS = {"value": "#2456c7", "provisional": "#8a94a6", "target": "#17803d", "alert": "#b42318"}
SERIES = ("#2456c7", "#7a3fb0", "#0f766e", "#a15c07")  # one per criterion, in rubric order
SYMBOLS = ("circle", "square", "diamond", "triangle-up")


def _criterion_trace(weeks: list[WeekQuality], k: int) -> dict[str, Any] | None:
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


def quality_figure(weeks: list[WeekQuality], targets: dict[str, float]) -> dict[str, Any]:
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
