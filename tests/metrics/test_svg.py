"""The server-drawn SVG charts (webapp/metrics/svg.py) against coordinates worked out by hand.

Layout of a 280-pixel chart: the plot area runs from y = 40 (under the title) down to
280 - 30 (x tick labels) - 15 per legend row; x goes from 2% to 98% of the width, and a path's x
is 10 × that percentage (its viewBox is 1000 wide).
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from typing import Any

import pytest

from webapp.metrics import svg, units

NS = "{http://www.w3.org/2000/svg}"


def _fig(traces: list[dict[str, Any]], **layout: Any) -> dict[str, Any]:
    base = {"height": 280, "title": {"text": "Chart"}, "xaxis": {"type": "date"}, "yaxis": {"range": [0, 1]}}
    return {"data": traces, "layout": {**base, **layout}}


def _series(y: list[float | None], days: int) -> dict[str, Any]:
    x = [f"2026-11-{d:02d}" for d in range(1, days + 1)]
    return {"type": "scatter", "x": x, "y": y, "mode": "lines+markers", "showlegend": False, "line": {"color": "#2456c7"}}


def _xrange(days: int) -> dict[str, Any]:
    # half a day before the first day and after the last, like charts.py
    return {"type": "date", "range": ["2026-10-31T12:00:00", f"2026-11-{days:02d}T12:00:00"]}


def _parse(markup: str) -> ET.Element:
    # the SVG is well-formed XML; only the namespace the HTML parser implies has to be added
    return ET.fromstring(str(markup).replace('<svg class="metrics-svg"', '<svg xmlns="http://www.w3.org/2000/svg" class="metrics-svg"', 1))


def _paths(root: ET.Element) -> list[ET.Element]:
    return list(root.iter(f"{NS}path"))


def test_three_points_map_to_worked_out_coordinates() -> None:
    out = svg.render(_fig([_series([0.2, 0.4, 0.6], 3)], xaxis=_xrange(3)), y_unit=units.PERCENT)
    root = _parse(out)
    # no legend: the plot spans y 40..250 (210 px) for 0..1, so 0.2 -> 250 - 42 = 208, 0.4 -> 166, 0.6 -> 124;
    # the x range is 3 days, so Nov 1/2/3 sit at 1/6, 3/6, 5/6 of it: 2 + 96/6 = 18%, 50%, 82%
    path, dots = _paths(root)
    assert path.get("d") == "M180 208 L500 166 L820 124"
    # the markers: round dots (zero-length segments), 6 wide
    assert dots.get("d") == "M180 208h0M500 166h0M820 124h0" and dots.get("stroke-width") == "6"


def test_a_day_without_a_value_breaks_the_line_in_two() -> None:
    fig = _fig([_series([0.2, 0.4, None, 0.6, math.nan], 5)], xaxis=_xrange(5))
    path, _ = _paths(_parse(svg.render(fig, y_unit=units.PERCENT)))
    # five days: tenths 1, 3, 5, 7, 9 of the range -> 2 + 9.6 = 11.6%, 30.8%, (50%), 69.2%, (88.4%)
    assert path.get("d") == "M116 208 L308 166 M692 124"
    assert path.get("d", "").count("M") == 2


def test_target_and_threshold_lines_sit_at_their_values() -> None:
    edges = ["2026-10-31T12:00:00", "2026-11-03T12:00:00"]
    fig = _fig(
        [
            _series([0.2, 0.4, 0.6], 3),
            {"type": "scatter", "x": edges, "y": [0.7, 0.7], "name": "target", "mode": "lines", "line": {"color": "#17803d", "dash": "dash"}},
            {"type": "scatter", "x": edges, "y": [0.65, 0.65], "name": "alert threshold", "mode": "lines", "line": {"color": "#b42318", "dash": "dot"}},
        ],
        xaxis=_xrange(3),
    )
    root = _parse(svg.render(fig, y_unit=units.PERCENT))
    _, _, target, threshold = _paths(root)
    # one legend row: the plot spans 40..235 (195 px); 0.7 -> 235 - 136.5 = 98.5; 0.65 -> 235 - 126.75 = 108.25
    assert target.get("d") == "M20 98.5 L980 98.5" and target.get("stroke-dasharray") == "6 4"
    assert threshold.get("d") == "M20 108.25 L980 108.25" and threshold.get("stroke") == "#b42318"
    legend = "".join(root.find(f".//{NS}foreignObject").itertext())  # type: ignore[union-attr]
    assert "target" in legend and "alert threshold" in legend


def test_text_is_escaped() -> None:
    fig = _fig([{**_series([0.5], 1), "name": "<script>x</script>", "showlegend": True}], title={"text": 'A <b>"&'})
    fig["layout"]["annotations"] = [{"x": "2026-11-01", "text": "model: <i>m</i>"}]
    out = str(svg.render(fig, y_unit=units.PERCENT))
    assert "<script>" not in out and "<b>" not in out and "<i>" not in out
    assert "&lt;script&gt;x&lt;/script&gt;" in out
    assert 'aria-label="A &lt;b&gt;&#34;&amp;"' in out and "<title>A &lt;b&gt;&#34;&amp;</title>" in out
    assert "model: &lt;i&gt;m&lt;/i&gt;" in out
    _parse(out)  # still well-formed


def test_bars_and_shaded_periods() -> None:
    fig = {
        "data": [{"type": "bar", "x": [0.25], "y": [0.5], "width": 0.1, "name": "accept rate", "marker": {"color": "#2456c7"}}],
        "layout": {"height": 280, "xaxis": {"range": [0, 1], "dtick": 0.1}, "yaxis": {"range": [0, 1]},
                   "shapes": [{"type": "rect", "x0": 0.5, "x1": 0.75, "fillcolor": "rgba(180,35,24,0.13)", "name": "firing"}]},
    }
    root = _parse(svg.render(fig, y_unit=units.PERCENT, x_unit=units.Unit(digits=1)))
    [bar] = [r for r in root.iter(f"{NS}rect") if r.get("fill") == "#2456c7" and r.get("x") != "0"]  # not the legend's
    [shade] = [r for r in root.iter(f"{NS}rect") if r.get("fill", "").startswith("rgba")]
    # one legend row: plot 40..235; the bar spans x 0.2..0.3 -> 2 + 19.2 = 21.2%, 9.6% wide (x 10 in the
    # viewBox, 1000 wide); 0.5 -> 137.5
    assert (bar.get("x"), bar.get("width"), bar.get("y"), bar.get("height")) == ("212", "96", "137.5", "97.5")
    assert (shade.get("x"), shade.get("width"), shade.get("y"), shade.get("height")) == ("50%", "24%", "40", "195")
    labels = [t.text for t in root.iter(f"{NS}text")]
    assert [f"{k / 10:.1f}" for k in range(11)] == [t for t in labels if t and t[0].isdigit() and "%" not in t]
    assert {"0.0%", "50.0%", "100.0%"} <= set(labels)  # the page's percent format (units.PERCENT)
    assert "1 shaded firing period" in (root.find(f"{NS}desc").text or "")  # type: ignore[union-attr]


def test_y_range() -> None:
    fig = _fig([_series([0.02, 0.08], 2)], yaxis={"rangemode": "tozero"})
    assert svg.y_range(fig) == pytest.approx((0.0, 0.084))  # from 0, the top 5% of 0.08 above the highest
    assert svg.y_range(_fig([_series([0.5, 0.7], 2)], yaxis={})) == pytest.approx((0.49, 0.71))  # 5% of 0.2 each side
    assert svg.y_range(_fig([_series([0.0, 0.0], 2)], yaxis={"rangemode": "tozero"})) == (0.0, 1.0)  # all zero
    assert svg.y_range(_fig([_series([None, None], 2)], yaxis={})) == (0.0, 1.0)  # nothing to show


def test_ticks() -> None:
    # 0.55..1.02 in four steps or fewer: a step of 0.2 (1, 2, 2.5 or 5 x 10^k)
    ticks = svg.number_ticks(0.55, 1.02, units.PERCENT)
    assert [t for _, t in ticks] == ["60.0%", "80.0%", "100.0%"]
    assert [v for v, _ in ticks] == pytest.approx([0.6, 0.8, 1.0])
    # counts never get a tick between whole numbers
    assert [t for _, t in svg.number_ticks(-0.05, 1.05, units.COUNT)] == ["0", "1"]
    day = (svg.dt.date(2026, 11, 1) - svg._EPOCH.date()).days
    assert [t for _, t in svg.date_ticks(day - 0.5, day + 2.5)] == ["Nov 1", "Nov 2", "Nov 3"]
    # six weeks: ticks on Mondays (2026-10-12 is one)
    monday = (svg.dt.date(2026, 10, 12) - svg._EPOCH.date()).days
    assert [t for _, t in svg.date_ticks(monday - 0.5, monday + 41.5)] == ["Oct 12", "Oct 19", "Oct 26", "Nov 2", "Nov 9", "Nov 16"]
    assert [t for _, t in svg.date_ticks(monday - 0.5, monday + 179.5)] == ["Nov 2026", "Dec 2026", "Jan 2027", "Feb 2027", "Mar 2027", "Apr 2027"]
