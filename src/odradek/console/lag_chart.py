"""The geometry of the group page's lag chart: samples in, coordinates and labels out.

The chart is inline SVG written by the page's template from a ``Chart``: no chart library
and no script, so it shows with JavaScript off and in a screenshot, and the group page's
refresh redraws it. Time runs left to right over the span of the samples (at least a
minute, at most the history's window) ending now; lag runs up from 0 to a round number at
or above the largest sample, so the axis labels read well. Sans-I/O: plain numbers in.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from odradek.console.lag_history import LagPoint

WIDTH = 640
HEIGHT = 180
#: Room for the axis labels: left for the lag, bottom for the times.
LEFT, RIGHT, TOP, BOTTOM = 56, 12, 12, 24
#: The shortest time span drawn, so that the first samples do not fill the width.
MIN_SPAN_MS = 60_000


@dataclass(frozen=True)
class ChartPoint:
    x: float
    y: float
    lag: int
    at_ms: int
    label: str


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    points: list[ChartPoint]
    #: The SVG polyline's ``points`` attribute ("x,y x,y ..."), '' for fewer than two points.
    line: str
    y_max: int
    start_label: str
    #: Plot area: left and right x, top and bottom y.
    left: int
    right: int
    top: int
    bottom: int


def round_up(value: int) -> int:
    """The smallest of 1, 2, 5 x 10^n at or above ``value`` (1 for 0): the lag axis' top."""
    top = 1
    while True:
        for step in (1, 2, 5):
            if step * top >= value:
                return step * top
        top *= 10


def _clock(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%H:%M:%S")


def layout(samples: list[LagPoint], now_ms: int, window_ms: int) -> Chart:
    """Where each sample goes on the chart, for samples taken up to ``now_ms``."""
    right, bottom = WIDTH - RIGHT, HEIGHT - BOTTOM
    first = samples[0].at_ms if samples else now_ms
    span = min(max(now_ms - first, MIN_SPAN_MS), window_ms)
    start = now_ms - span
    y_max = round_up(max((s.lag for s in samples), default=0))
    points = [
        ChartPoint(
            round(LEFT + (right - LEFT) * (s.at_ms - start) / span, 1),
            round(bottom - (bottom - TOP) * s.lag / y_max, 1),
            s.lag,
            s.at_ms,
            f"{_clock(s.at_ms)} UTC: lag {s.lag}",
        )
        for s in samples
        if s.at_ms >= start
    ]
    line = " ".join(f"{p.x},{p.y}" for p in points) if len(points) > 1 else ""
    return Chart(WIDTH, HEIGHT, points, line, y_max, _clock(start), LEFT, right, TOP, bottom)
