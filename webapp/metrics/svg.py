"""Draw a chart's plotly figure as inline SVG on the server, so the chart is on screen with the HTML.

The metrics page shows this picture first and replaces it with the interactive plotly chart once
plotly.js (4.8 MB, over a second to parse) has loaded; without JavaScript it stays. Both come from
the same figure dict (webapp/metrics/charts.py), so they cannot disagree. Only what the charts use
is drawn: scatter lines (a None or NaN value breaks the line) and markers, bars, rectangle and line
shapes, annotations, a date or numeric x axis, the title and the legend.

The root <svg> has no viewBox: its width is the container's, its height the figure's, so text keeps
its size at any width. x positions are percentages of the width, y positions pixels; the lines of a
trace are one path in a nested <svg> whose viewBox is 1000 wide (x = 10 × percentage) stretched to
the width, drawn with a non-scaling stroke.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup, escape

from webapp.metrics.units import Unit

PAD = 2.0  # the plot area starts and ends this many percent in from the chart's edges
TOP = 40  # pixels above the plot area: the title
AXIS = 30  # pixels under it: the x tick labels
LEGEND_ROW = 15  # pixels per row of the legend: room for two entries a row (at a phone's width)
_EPOCH = dt.datetime(1970, 1, 1)
_DASH = {"dash": "6 4", "dot": "2 3", "dashdot": "6 3 2 3"}
_MONTHS = (1, 2, 3, 6, 12)


def _n(v: float) -> str:
    """Write a coordinate with at most two decimals."""
    return f"{v:.2f}".rstrip("0").rstrip(".")


def _x(v: Any) -> float:
    """Return an x value as a number: days since 1970 for a date or datetime text."""
    if isinstance(v, str):
        return (dt.datetime.fromisoformat(v) - _EPOCH).total_seconds() / 86400
    return float(v)


def _ok(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


@dataclass(frozen=True)
class Frame:
    """The plot area: data ranges and where they go (x in percent of the width, y in pixels)."""

    x0: float
    x1: float
    y0: float
    y1: float
    top: float
    bottom: float

    def px(self, v: Any) -> float:
        """Return the percentage of the width where an x value goes."""
        return PAD + (100 - 2 * PAD) * (_x(v) - self.x0) / (self.x1 - self.x0)

    def py(self, v: float) -> float:
        """Return the pixel row of a y value."""
        return self.bottom - (self.bottom - self.top) * (v - self.y0) / (self.y1 - self.y0)


def nice_step(span: float, count: int, smallest: float) -> float:
    """Return a tick step of 1, 2, 2.5 or 5 × 10^k giving at most about `count` ticks, at least `smallest`."""
    raw = max(span / count, smallest, 1e-12)
    base = 10 ** math.floor(math.log10(raw))
    return max(next(m * base for m in (1, 2, 2.5, 5, 10) if m * base >= raw * (1 - 1e-9)), smallest)


def y_range(figure: dict[str, Any]) -> tuple[float, float]:
    """Return the y range: the layout's, or every value (and 0 for bars or rangemode tozero) with 5% room."""
    axis = figure["layout"].get("yaxis", {})
    if axis.get("range"):
        return float(axis["range"][0]), float(axis["range"][1])
    values = [v for t in figure["data"] for v in (t.get("y") or []) if _ok(v)]
    if axis.get("rangemode") == "tozero" or any(t["type"] == "bar" for t in figure["data"]):
        values.append(0.0)
    if not values or max(values) == min(values) == 0:
        return 0.0, 1.0
    lo, hi = min(values), max(values)
    if lo == hi:
        return lo - (abs(lo) or 1) / 2, hi + (abs(hi) or 1) / 2
    room = (hi - lo) * 0.05
    return (lo if lo == 0 and axis.get("rangemode") == "tozero" else lo - room), hi + room


def date_ticks(x0: float, x1: float, most: int = 6) -> list[tuple[float, str]]:
    """Return date ticks (days since 1970, label) between two x values: every 1, 2, 7 or 14 days, or months."""
    first = _EPOCH.date() + dt.timedelta(days=math.ceil(x0))
    last = _EPOCH.date() + dt.timedelta(days=math.floor(x1))
    n = (last - first).days + 1
    for step in (1, 2, 7, 14):
        if n / step <= most:
            start = first if step < 7 else first + dt.timedelta(days=-first.weekday() % 7)  # weeks start on Monday
            days = [start + dt.timedelta(days=k) for k in range(0, (last - start).days + 1, step)]
            return [((d - _EPOCH.date()).days, f"{d:%b} {d.day}") for d in days]
    step = next((m for m in _MONTHS if n / (30.4 * m) <= most), 12 * math.ceil(n / (365 * most)))
    out, k = [], first.year * 12 + first.month - 1 + (first.day > 1)  # the first 1st of a month in range
    while (d := dt.date(k // 12, k % 12 + 1, 1)) <= last:
        if k % step == 0:
            out.append(((d - _EPOCH.date()).days, f"{d:%b %Y}"))
        k += 1
    return out


def number_ticks(lo: float, hi: float, unit: Unit, dtick: float | None = None, count: int = 4) -> list[tuple[float, str]]:
    """Return ticks at multiples of a step between lo and hi, labelled in the unit (as the page writes it)."""
    step = dtick or nice_step(hi - lo, count, 10.0**-unit.digits / unit.scale)
    first = math.ceil(lo / step - 1e-9)
    ticks = [k * step for k in range(first, math.floor(hi / step + 1e-9) + 1)]
    return [(v, unit.text(v)) for v in ticks]


def _text(x: str, y: float, body: str, *, size: int = 11, anchor: str = "start", fill: str = "#1d2430", halo: bool = False) -> str:
    extra = ' stroke="#fff" stroke-width="3" paint-order="stroke"' if halo else ""
    return (f'<text x="{x}" y="{_n(y)}" font-size="{size}" text-anchor="{anchor}" fill="{escape(fill)}"{extra}>'
            f"{escape(body)}</text>")


def _list(v: Any, i: int) -> Any:
    return v[i] if isinstance(v, list) else v


def _marker(cx: str, cy: float, color: str, size: float, symbol: str) -> str:
    fill = "#fff" if symbol.endswith("-open") else escape(color)
    return f'<circle cx="{cx}" cy="{_n(cy)}" r="{_n(size / 2)}" fill="{fill}" stroke="{escape(color)}" stroke-width="1.5"/>'


def _trace(t: dict[str, Any], f: Frame, paths: list[str]) -> None:
    """Draw one trace (bars, lines, markers) into `paths`, in the stretched viewBox: in trace order, like plotly."""
    xs, ys = t.get("x") or [], t.get("y") or []
    color = t.get("marker", {}).get("color") or t.get("line", {}).get("color") or "#2456c7"
    if t["type"] == "bar":
        half = float(t.get("width", 0.8)) / 2
        for x, y in zip(xs, ys, strict=True):
            if _ok(y) and x is not None:
                a, b = f.px(_x(x) - half), f.px(_x(x) + half)
                top, base = sorted((f.py(y), f.py(0.0)))
                paths.append(f'<rect x="{_n(10 * a)}" y="{_n(top)}" width="{_n(10 * (b - a))}" height="{_n(base - top)}" fill="{escape(color)}"/>')
        return
    mode = t.get("mode", "lines+markers")
    if "lines" in mode:
        line = t.get("line", {})
        segments: list[list[str]] = [[]]
        for x, y in zip(xs, ys, strict=True):
            if _ok(y) and x is not None:
                segments[-1].append(f"{_n(10 * f.px(x))} {_n(f.py(y))}")
            elif segments[-1]:
                segments.append([])  # a day without a value: the line stops, as plotly's connectgaps=False
        d = " ".join("M" + " L".join(s) for s in segments if s)
        if d:
            dash = _DASH.get(line.get("dash", ""), "")
            paths.append(f'<path d="{d}" fill="none" stroke="{escape(line.get("color", color))}" stroke-width="{line.get("width", 2)}"'
                         f'{f" stroke-dasharray={chr(34)}{dash}{chr(34)}" if dash else ""} vector-effect="non-scaling-stroke"/>')
    if "markers" in mode:
        # markers as zero-length round-capped segments of one path per size and symbol, in the stretched
        # viewBox with a non-scaling stroke: round dots at any width, and far fewer elements than circles
        m = t.get("marker", {})
        edge = float(m.get("line", {}).get("width", 0))
        groups: dict[tuple[float, bool], list[str]] = {}
        for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
            if _ok(y) and x is not None:
                key = (float(_list(m.get("size", 6), i)), str(_list(m.get("symbol", "circle"), i)).endswith("-open"))
                groups.setdefault(key, []).append(f"M{_n(10 * f.px(x))} {_n(f.py(y))}h0")
        for (size, hollow), dots in groups.items():
            paths.append(_dots("".join(dots), color, size + edge))
            if hollow:
                paths.append(_dots("".join(dots), "#fff", size - edge))


def _dots(d: str, color: str, width: float) -> str:
    return (f'<path class="metrics-svg-dots" d="{d}" stroke="{escape(color)}" stroke-width="{_n(width)}" stroke-linecap="round"'
            f' fill="none" vector-effect="non-scaling-stroke"/>')


def legend(figure: dict[str, Any]) -> list[tuple[str, str]]:
    """Return the legend entries (name, swatch markup: 24 wide, centred on y = 0) plotly would show, in its order."""
    out: list[tuple[str, str]] = []
    for t in figure["data"]:
        if t.get("showlegend") is False or not t.get("name"):
            continue
        m, line, mode = t.get("marker", {}), t.get("line", {}), t.get("mode", "")
        color = m.get("color") or line.get("color") or "#2456c7"
        if t["type"] == "bar":
            swatch = f'<rect x="0" y="-5" width="14" height="10" fill="{escape(color)}"/>'
        elif "lines" in mode:
            dash = _DASH.get(line.get("dash", ""), "none")
            swatch = f'<line x1="0" y1="0" x2="20" y2="0" stroke="{escape(line.get("color", color))}" stroke-width="2" stroke-dasharray="{dash}"/>'
        else:
            swatch = _marker("8", 0, color, float(_list(m.get("size", 8), 0)), str(_list(m.get("symbol", "circle"), 0)))
        out.append((t["name"], swatch))
    for s in figure["layout"].get("shapes", []):
        if s.get("showlegend") and s.get("name"):
            out.append((s["name"], f'<rect x="0" y="-5" width="16" height="10" fill="{escape(s.get("fillcolor", "#ccc"))}" stroke="#c9d2e0"/>'))
    return out


def describe(figure: dict[str, Any], y_unit: Unit) -> str:
    """Say in words what the chart shows (its <desc>): the series, its last value, the lines and shaded periods."""
    parts = []
    for t in figure["data"]:
        pts = [(x, y) for x, y in zip(t.get("x") or [], t.get("y") or [], strict=True) if _ok(y) and x is not None]
        if not pts:
            continue
        if t.get("mode") == "lines" and len(pts) == 2 and pts[0][1] == pts[1][1]:
            parts.append(f"{t.get('name', '')} at {y_unit.text(pts[0][1])}")
        else:
            parts.append(f"{t.get('name', '')}: {len(pts)} values from {pts[0][0]} to {pts[-1][0]}, last {y_unit.text(pts[-1][1])}")
    names = [s.get("name", "") for s in figure["layout"].get("shapes", []) if s.get("type") == "rect"]
    parts += [f"{names.count(n)} shaded {n} period{'s' if names.count(n) > 1 else ''}" for n in dict.fromkeys(names)]
    parts += [a["text"] for a in figure["layout"].get("annotations", [])]
    return "; ".join(parts) + "."


def render(figure: dict[str, Any], *, y_unit: Unit, x_unit: Unit | None = None) -> Markup:
    """Return the figure as an inline <svg>; x is a date axis unless `x_unit` says how to write its numbers."""
    layout, data = figure["layout"], figure["data"]
    height = int(layout.get("height", 280))
    title = str(layout.get("title", {}).get("text", ""))
    x_axis, y_axis = layout.get("xaxis", {}), layout.get("yaxis", {})
    x_title = x_axis.get("title", {}).get("text", "")
    entries = legend(figure)
    rows = (len(entries) + 1) // 2
    xr = [_x(v) for v in x_axis.get("range") or []] or [_x(x) for t in data for x in t.get("x") or [] if x is not None]
    x0, x1 = (min(xr), max(xr)) if xr else (0.0, 1.0)
    y0, y1 = y_range(figure)
    bottom = height - AXIS - LEGEND_ROW * (rows + bool(x_title))
    f = Frame(x0, x1 if x1 > x0 else x0 + 1, y0, y1, TOP, bottom)
    grid, under, paths, over, text = [], [], [], [], []
    for v, label in number_ticks(y0, y1, y_unit, y_axis.get("dtick")):
        y = f.py(v)
        grid.append(f'<line x1="{_n(PAD)}%" x2="{_n(100 - PAD)}%" y1="{_n(y)}" y2="{_n(y)}" stroke="#eceff3"/>')
        text.append(_text(f"{_n(PAD)}%", y - 3, label, size=10, fill="#5b6473", halo=True))  # inside the plot: no margin to size
    for v, label in number_ticks(x0, x1, x_unit, x_axis.get("dtick")) if x_unit else date_ticks(x0, x1):
        p = f.px(v)
        grid.append(f'<line x1="{_n(p)}%" x2="{_n(p)}%" y1="{_n(bottom)}" y2="{_n(bottom + 4)}" stroke="#9aa3b2"/>')
        anchor = "start" if p < 6 else "end" if p > 94 else "middle"
        text.append(_text(f"{_n(p)}%", bottom + 16, label, size=10, anchor=anchor, fill="#5b6473"))
    grid.append(f'<line x1="{_n(PAD)}%" x2="{_n(100 - PAD)}%" y1="{_n(bottom)}" y2="{_n(bottom)}" stroke="#9aa3b2"/>')
    if x_title:
        text.append(_text("50%", bottom + 31, x_title, size=11, anchor="middle"))
    if y_title := y_axis.get("title", {}).get("text", ""):
        text.append(_text(f"{_n(100 - PAD)}%", TOP - 4, f"↑ {y_title}", size=11, anchor="end"))
    for s in layout.get("shapes", []):
        a, b = f.px(s["x0"]), f.px(s["x1"])
        if s["type"] == "rect":  # a period (the pilot window, an alert firing): under the grid and the lines
            under.append(f'<rect x="{_n(a)}%" y="{_n(f.top)}" width="{_n(b - a)}%" height="{_n(bottom - f.top)}"'
                         f' fill="{escape(s.get("fillcolor", "#eee"))}"/>')
        elif s["type"] == "line":
            line = s.get("line", {})
            over.append(f'<line x1="{_n(a)}%" x2="{_n(b)}%" y1="{_n(f.top)}" y2="{_n(bottom)}" stroke="{escape(line.get("color", "#666"))}"'
                        f' stroke-dasharray="{_DASH.get(line.get("dash", ""), "none")}"/>')
    for t in data:
        _trace(t, f, paths)
    for a in layout.get("annotations", []):
        y, p = f.top + 10 - float(a.get("yshift", 0)), f.px(a["x"])
        color = a.get("font", {}).get("color", "#6b7280")
        right = p > 60  # on the right, the label goes left of its line so that it stays inside the chart
        text.append(_text(f"{_n(p - 0.5 if right else p + 0.5)}%", y, str(a["text"]), size=10, fill=color, halo=True,
                          anchor="end" if right else "start"))
    if entries:  # HTML inside the SVG: its entries wrap to the width, which only the browser knows
        keys = "".join(f'<span class="metrics-svg-key"><svg width="24" height="10" aria-hidden="true"><g transform="translate(0 5)">'
                       f"{swatch}</g></svg>{escape(name)}</span>" for name, swatch in entries)
        text.append(f'<foreignObject x="{_n(PAD)}%" y="{height - LEGEND_ROW * rows - 4}" width="{_n(100 - 2 * PAD)}%"'
                    f' height="{LEGEND_ROW * rows + 4}"><div class="metrics-svg-legend">{keys}</div></foreignObject>')
    text.append(_text(f"{_n(PAD)}%", 22, title, size=14))
    return Markup(
        f'<svg class="metrics-svg" width="100%" height="{height}" role="img" aria-label="{escape(title)}">'
        f"<title>{escape(title)}</title><desc>{escape(describe(figure, y_unit))}</desc>"
        + "".join(under + grid)
        + f'<svg width="100%" height="{height}" viewBox="0 0 1000 {height}" preserveAspectRatio="none" overflow="visible">'
        + "".join(paths) + "</svg>" + "".join(over + text) + "</svg>"
    )
