"""The weekly human-graded quality chart on /metrics: each week's estimate with its 95% interval, and the target.

Decision: one line for the target and the alert. The plan has one number for human-graded
quality ("average above 3.5/5 across all four rubric dimensions", `gates.pilot.human_mean_above`);
the week's alert compares the interval's upper bound with that same number, so a second line at
the same height would only hide the first. The line is labelled with both meanings.
"""

from __future__ import annotations

from typing import Any

from webapp.ppi.production import WeekQuality

COLORS = {"value": "#2456c7", "provisional": "#8a94a6", "target": "#17803d", "alert": "#b42318"}


def quality_figure(weeks: list[WeekQuality], target: float) -> dict[str, Any]:
    """Return the plotly figure (a JSON-ready dict): per week the estimate with error bars to its 95% bounds."""
    x = [w.week for w in weeks]
    final = [w for w in weeks if not w.provisional and not w.below_target]
    below = [w for w in weeks if w.below_target]
    provisional = [w for w in weeks if w.provisional]
    traces: list[dict[str, Any]] = []
    for group, name, color, symbol in (
        (final, "estimate, 95% interval", COLORS["value"], "circle"),
        (below, "interval below target: alert", COLORS["alert"], "circle"),
        (provisional, "provisional (grades pending)", COLORS["provisional"], "circle-open"),
    ):
        shown = [w for w in group if w.estimate is not None]
        if not shown:
            continue
        traces.append(
            {
                "type": "scatter", "mode": "markers", "name": name, "x": [w.week for w in shown],
                "y": [w.estimate.estimate for w in shown if w.estimate is not None],
                "error_y": {
                    "type": "data", "symmetric": False, "color": color, "thickness": 1.5, "width": 6,
                    "array": [w.estimate.high - w.estimate.estimate for w in shown if w.estimate is not None],
                    "arrayminus": [w.estimate.estimate - w.estimate.low for w in shown if w.estimate is not None],
                },
                "marker": {"size": 9, "symbol": symbol, "line": {"width": 2, "color": color}, "color": color},
                "customdata": [
                    [w.estimate.low, w.estimate.high, w.graded, w.drafts, w.pending, " · alert: upper bound below target" if w.below_target else ""]
                    for w in shown if w.estimate is not None
                ],
                "hovertemplate": "%{x}: %{y:.2f} [%{customdata[0]:.2f}, %{customdata[1]:.2f}] · %{customdata[2]} human grades of "
                "%{customdata[3]} drafts · %{customdata[4]} pending%{customdata[5]}<extra></extra>",
            }
        )
    # across the whole plot (paper x), so one week alone still shows it
    shapes = [
        {
            "type": "line", "xref": "paper", "x0": 0, "x1": 1, "yref": "y", "y0": target, "y1": target,
            "line": {"color": COLORS["target"], "dash": "dash", "width": 1.5}, "showlegend": True,
            "name": f"target: above {target:g} (alert: a final week's upper bound below it)",
        }
    ]
    layout = {
        # no title: the card's heading names the chart
        "height": 280,
        "margin": {"l": 50, "r": 10, "t": 15, "b": 85},
        "legend": {"orientation": "h", "y": -0.25, "font": {"size": 10}},
        "shapes": shapes,
        # weeks as categories: one slot per week that has a run, in week order
        "xaxis": {"type": "category", "categoryorder": "array", "categoryarray": x, "range": [-0.5, len(x) - 0.5]},
        "yaxis": {"range": [1, 5], "title": {"text": "overall quality (1–5)"}, "hoverformat": ".2f"},
        "paper_bgcolor": "#fff", "plot_bgcolor": "#fff",
        "font": {"family": "system-ui, sans-serif", "color": "#1d2430"},
    }
    return {"data": traces, "layout": layout}
