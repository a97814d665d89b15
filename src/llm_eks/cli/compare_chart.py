"""`llm-eks plan --compare --chart FILE.svg`: cost per million output tokens against the time-per-output-token
estimate, one labelled point per instance type, as an SVG for a design review.

Written by hand, not with a plotting library: `llm-eks plan` must start in well under a second and the package stays
free of heavy dependencies (matplotlib alone imports for about a second and pulls in numpy). A scatter plot with
axes, ticks and labels is a few dozen SVG elements. SVG only: a PNG would need a rasterizer (a new heavy dependency);
browsers, design-review tools and `rsvg-convert` open or convert the SVG.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape  # not xml.sax.saxutils: that imports urllib.request (~80 ms at start-up)
from pathlib import Path

WIDTH, HEIGHT = 960, 600
# Plot area margins: room for the title (top), tick labels and axis titles (left, bottom), point labels (right).
LEFT, RIGHT, TOP, BOTTOM = 80, 150, 60, 70
FONT = "font-family='Helvetica, Arial, sans-serif'"
# Label box estimate for the overlap check: ~0.6 em per character at 11 px.
LABEL_PX, CHAR_PX, LINE_PX = 11, 6.6, 13
MEETS_COLOUR, MISSES_COLOUR = "#1f77b4", "#d62728"


@dataclass(frozen=True)
class Point:
    label: str
    x: float
    y: float
    # Filled when the point meets the request's targets, hollow when it does not.
    meets: bool


@dataclass(frozen=True)
class Axis:
    """Data range [low, high] mapped onto pixels, on a linear or log scale, with its tick values."""

    low: float
    high: float
    log: bool
    ticks: tuple[float, ...]

    def fraction(self, value: float) -> float:
        if self.log:
            return (math.log10(value) - math.log10(self.low)) / (math.log10(self.high) - math.log10(self.low))
        return (value - self.low) / (self.high - self.low)


def axis(values: Sequence[float]) -> Axis:
    """Linear from 0 to a round number at or above the largest value; log (1-2-5 ticks) when values span 10x or
    more."""
    lo, hi = min(values), max(values)
    if lo > 0 and hi / lo >= 10:
        ticks = _one_two_five(lo, hi)
        return Axis(ticks[0], ticks[-1], True, ticks)
    step = _nice_step(hi / 5) if hi > 0 else 1.0
    count = max(1, math.ceil(round(hi / step, 9)))
    return Axis(0.0, count * step, False, tuple(round(i * step, 10) for i in range(count + 1)))


def _nice_step(raw: float) -> float:
    """The smallest 1, 2 or 5 x 10^k at or above `raw`."""
    exponent = math.floor(math.log10(raw))
    return next(m * 10.0**exponent for m in (1, 2, 5, 10) if m * 10.0**exponent >= raw * (1 - 1e-9))


def _one_two_five(lo: float, hi: float) -> tuple[float, ...]:
    """1-2-5 values from the largest at or below `lo` to the smallest at or above `hi`."""
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    values = [round(m * 10.0**e, 10) for e in range(first, last + 1) for m in (1, 2, 5)]
    start = max(i for i, v in enumerate(values) if v <= lo)
    end = min(i for i, v in enumerate(values) if v >= hi)
    return tuple(values[start : end + 1])


def _tick_text(v: float) -> str:
    return f"{v:g}" if v >= 0.01 or v == 0 else f"{v:.0e}"


def render_svg(points: Sequence[Point], title: str, x_title: str, y_title: str, note: str = "") -> str:
    """The chart as an SVG document: title, axes with ticks and titles, one circle and label per point."""
    if not points:
        raise ValueError("a chart needs at least one point")
    xa, ya = axis([p.x for p in points]), axis([p.y for p in points])
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(p: Point) -> tuple[float, float]:
        return LEFT + xa.fraction(p.x) * plot_w, TOP + (1 - ya.fraction(p.y)) * plot_h

    out = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{WIDTH}' height='{HEIGHT}' viewBox='0 0 {WIDTH} {HEIGHT}' "
        f"{FONT} font-size='12'>",
        f"<rect width='{WIDTH}' height='{HEIGHT}' fill='white'/>",
        f"<text x='{WIDTH / 2}' y='28' text-anchor='middle' font-size='16' font-weight='bold'>{escape(title)}</text>",
    ]
    if note:
        out.append(f"<text x='{WIDTH / 2}' y='46' text-anchor='middle' fill='#555'>{escape(note)}</text>")
    out.append(f"<g class='x-axis' data-low='{xa.low:g}' data-high='{xa.high:g}' data-scale='{_scale(xa)}'>")
    for t in xa.ticks:
        x = LEFT + xa.fraction(t) * plot_w
        out.append(f"<line x1='{x:.1f}' y1='{TOP}' x2='{x:.1f}' y2='{TOP + plot_h}' stroke='#e5e5e5'/>")
        out.append(
            f"<text class='tick' x='{x:.1f}' y='{TOP + plot_h + 18}' text-anchor='middle'>{_tick_text(t)}</text>"
        )
    out.append(
        f"<text class='title' x='{LEFT + plot_w / 2}' y='{HEIGHT - 22}' text-anchor='middle'>{escape(x_title)}</text>"
    )
    out.append("</g>")
    out.append(f"<g class='y-axis' data-low='{ya.low:g}' data-high='{ya.high:g}' data-scale='{_scale(ya)}'>")
    for t in ya.ticks:
        y = TOP + (1 - ya.fraction(t)) * plot_h
        out.append(f"<line x1='{LEFT}' y1='{y:.1f}' x2='{LEFT + plot_w}' y2='{y:.1f}' stroke='#e5e5e5'/>")
        out.append(f"<text class='tick' x='{LEFT - 8}' y='{y + 4:.1f}' text-anchor='end'>{_tick_text(t)}</text>")
    out.append(
        f"<text class='title' transform='translate(22,{TOP + plot_h / 2}) rotate(-90)' text-anchor='middle'>"
        f"{escape(y_title)}</text>"
    )
    out.append("</g>")
    out.append(
        f"<rect x='{LEFT}' y='{TOP}' width='{plot_w}' height='{plot_h}' fill='none' stroke='#333' stroke-width='1'/>"
    )
    # The legend's box first, so no label covers it.
    legend_x = WIDTH - RIGHT + 16
    placed: list[tuple[float, float, float, float]] = [(legend_x - 6, TOP, legend_x + 100, TOP + 36)]
    for p in sorted(points, key=lambda p: (px(p)[1], px(p)[0])):
        x, y = px(p)
        colour = MEETS_COLOUR if p.meets else MISSES_COLOUR
        fill = colour if p.meets else "white"
        out.append(
            f"<circle class='point' cx='{x:.1f}' cy='{y:.1f}' r='4.5' fill='{fill}' stroke='{colour}' "
            f"stroke-width='1.5' data-label='{escape(p.label)}' data-x='{p.x:g}' data-y='{p.y:g}'/>"
        )
        lx, ly, anchor = _label_position(x, y, len(p.label), placed)
        if abs(ly - (y + 4)) > LINE_PX / 2:  # moved off its point to avoid another label: a leader line shows whose
            end = lx - 2 if anchor == "start" else lx + 2
            out.append(
                f"<line class='leader' x1='{x:.1f}' y1='{y:.1f}' x2='{end:.1f}' y2='{ly - 4:.1f}' stroke='#999' "
                "stroke-width='0.7'/>"
            )
        out.append(
            f"<text class='label' x='{lx:.1f}' y='{ly:.1f}' text-anchor='{anchor}' font-size='{LABEL_PX}'>"
            f"{escape(p.label)}</text>"
        )
    out += _legend()
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _scale(a: Axis) -> str:
    return "log" if a.log else "linear"


def _label_position(
    x: float, y: float, chars: int, placed: list[tuple[float, float, float, float]]
) -> tuple[float, float, str]:
    """Right of the point if free, else below or above it, else left: the first spot whose box overlaps no label."""
    w = chars * CHAR_PX
    candidates = [(x + 7, y + 4, "start"), (x - 7, y + 4, "end")]
    for k in range(1, 6):
        candidates += [(x + 7, y + 4 + k * LINE_PX, "start"), (x + 7, y + 4 - k * LINE_PX, "start")]
    for lx, ly, anchor in candidates:
        left = lx if anchor == "start" else lx - w
        box = (left, ly - LABEL_PX, left + w, ly + 2)
        if not any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3] for b in placed):
            placed.append(box)
            return lx, ly, anchor
    lx, ly, anchor = candidates[0]
    placed.append((lx, ly - LABEL_PX, lx + w, ly + 2))
    return lx, ly, anchor


def _legend() -> list[str]:
    x, y = WIDTH - RIGHT + 16, TOP + 10  # the box kept free in render_svg
    return [
        f"<circle cx='{x}' cy='{y}' r='4.5' fill='{MEETS_COLOUR}' stroke='{MEETS_COLOUR}'/>",
        f"<text x='{x + 9}' y='{y + 4}' font-size='{LABEL_PX}'>meets targets</text>",
        f"<circle cx='{x}' cy='{y + 18}' r='4.5' fill='white' stroke='{MISSES_COLOUR}' stroke-width='1.5'/>",
        f"<text x='{x + 9}' y='{y + 22}' font-size='{LABEL_PX}'>misses targets</text>",
    ]


def write_chart(path: Path, points: Sequence[Point], title: str, x_title: str, y_title: str, note: str = "") -> None:
    path.write_text(render_svg(points, title, x_title, y_title, note), encoding="utf-8")
