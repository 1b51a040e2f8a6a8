"""What `odradek perf` shows while it runs and writes when done: a progress line, JSON, a plot.

The progress line goes to stderr, and only when stderr is a terminal (and not with
``--quiet``): piped or redirected output, and bench/run.py's JSON on stdout, stay clean.
It is drawn by a thread of its own four times a second from a count the measuring loop
keeps (an int it already has, or one slot per producer process in shared memory), so the
loop being measured does no formatting and no writes.

The latency distribution goes to JSON (``--json FILE``: the summary, percentiles from
p0 to p100 and a histogram with logarithmic buckets, what a later comparison needs
without the raw samples) and to a PNG (``--plot FILE.png``, matplotlib from the ``plot``
extra): the histogram on a logarithmic latency axis with p50/p99/p99.9 marked, beside the
percentile curve on a "nines" axis, where the tail that averages hide is spread out.
"""

from __future__ import annotations

import json
import logging
import math
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from odradek.cli.errors import ToolError

#: Percentiles written to JSON and drawn on the percentile curve.
PERCENTILES = (0, 1, 5, 10, 25, 50, 75, 90, 95, 99, 99.5, 99.9, 99.95, 99.99, 100)
#: Histogram buckets per factor of ten of latency.
BUCKETS_PER_DECADE = 10
REFRESH_S = 0.25


class Progress:
    """A self-refreshing ``kind: done/total records, rate, elapsed`` line on a terminal."""

    def __init__(
        self,
        kind: str,
        total: int,
        count: Callable[[], int],
        enabled: bool,
        stream: TextIO | None = None,
    ) -> None:
        self.kind = kind
        self.total = total
        self._count = count
        self._stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start = time.perf_counter()

    @staticmethod
    def wanted(quiet: bool, stream: TextIO | None = None) -> bool:
        """Whether to draw: on a terminal, unless told to be quiet."""
        stream = stream if stream is not None else sys.stderr
        return not quiet and stream.isatty()

    def line(self, done: int, elapsed: float) -> str:
        share = f" ({100 * done / self.total:.0f}%)" if self.total else ""
        rate = done / elapsed if elapsed > 0 else 0.0
        return (
            f"{self.kind}: {done:,}/{self.total:,} records{share}, "
            f"{rate:,.0f} records/s, {elapsed:.1f} s"
        )

    def _draw(self) -> None:
        text = self.line(self._count(), time.perf_counter() - self._start)
        self._stream.write(f"\r\x1b[K{text}")
        self._stream.flush()

    def _run(self) -> None:
        while not self._stop.wait(REFRESH_S):
            self._draw()

    def __enter__(self) -> Progress:
        self._start = time.perf_counter()
        if self.enabled:
            self._draw()
            self._thread = threading.Thread(target=self._run, daemon=True, name="perf-progress")
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            self._stream.write("\r\x1b[K")  # the summary line takes its place
            self._stream.flush()


def percentile(ordered: list[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted list (``q`` in 0..1)."""
    rank = math.ceil(q * len(ordered) - 1e-9)  # the epsilon absorbs float error such as 0.99 * 100
    index = min(len(ordered) - 1, max(0, rank - 1))
    return ordered[index]


def histogram(ordered: list[float]) -> list[dict[str, float | int]]:
    """Counts in logarithmic buckets (BUCKETS_PER_DECADE per decade) from the smallest sample's
    decade to the largest's: ``{"le_ms": upper bound, "count": samples in (previous, le]}``."""
    if not ordered:
        return []
    low = math.floor(math.log10(max(ordered[0], 1e-6)))
    high = math.ceil(math.log10(max(ordered[-1], 1e-6)))
    bounds = [
        10 ** (low + i / BUCKETS_PER_DECADE)
        for i in range(1, (high - low) * BUCKETS_PER_DECADE + 1)
    ]
    bounds[-1] = max(bounds[-1], ordered[-1])
    out, i = [], 0
    for bound in bounds:
        start = i
        while i < len(ordered) and ordered[i] <= bound:
            i += 1
        out.append({"le_ms": round(bound, 6), "count": i - start})
    return out


def distribution(latencies_ms: list[float]) -> dict:
    """The latency block of the JSON file."""
    ordered = sorted(latencies_ms)
    if not ordered:
        return {"samples": 0, "percentiles_ms": {}, "histogram": []}
    return {
        "samples": len(ordered),
        "mean_ms": round(sum(ordered) / len(ordered), 6),
        "percentiles_ms": {f"p{p:g}": round(percentile(ordered, p / 100), 6) for p in PERCENTILES},
        "histogram": histogram(ordered),
    }


def write_json(path: Path, summary: dict, latencies_ms: list[float]) -> None:
    """The run's summary and, when it timed records, its latency distribution."""
    document: dict = {"summary": summary}
    if latencies_ms:
        document["latency"] = distribution(latencies_ms)
    path.write_text(json.dumps(document, indent=2) + "\n")


def write_plot(path: Path, summary: dict, latencies_ms: list[float]) -> None:
    """The latency histogram and percentile curve as a PNG."""
    if not latencies_ms:
        raise ToolError(f"no latencies to plot: the {summary['test']} run timed no record")
    try:
        import matplotlib

        logging.getLogger("matplotlib").setLevel(logging.WARNING)  # not its font cache notes
        matplotlib.use("Agg")  # files only: no display needed
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FixedLocator, FuncFormatter
    except ImportError:
        raise ToolError(
            "--plot needs matplotlib: pip install 'odradek[plot]' (make install has it)"
        ) from None
    ordered = sorted(latencies_ms)
    marks = {
        name: percentile(ordered, q) for name, q in (("p50", 0.5), ("p99", 0.99), ("p99.9", 0.999))
    }
    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8), layout="constrained")
    figure.suptitle(
        f"odradek perf {summary['test']}: {summary['records']:,} records, "
        f"{summary['records_per_s']:,.0f} records/s, {len(ordered):,} latencies timed",
        fontsize=12,
    )
    buckets = histogram(ordered)
    edges = [buckets[0]["le_ms"] / 10 ** (1 / BUCKETS_PER_DECADE)] + [b["le_ms"] for b in buckets]
    left.hist(ordered, bins=edges, color="#4c72b0")
    left.set_xscale("log")
    left.set_xlabel("latency (ms, log scale)")
    left.set_ylabel("records")
    left.set_title("Latency distribution")
    for (name, value), color in zip(marks.items(), ("#2ca02c", "#ff7f0e", "#d62728"), strict=True):
        left.axvline(
            value, color=color, linestyle="--", linewidth=1.2, label=f"{name} {value:.3g} ms"
        )
    left.legend(loc="upper right")
    left.grid(True, which="major", alpha=0.3)

    # The percentile curve: x is the number of nines, -log10(1 - q), so p90, p99, p99.9 are evenly spaced.
    n = len(ordered)
    nines = [-math.log10(1 - (i + 0.5) / n) for i in range(n)]
    right.plot(nines, ordered, color="#4c72b0", linewidth=1.5)
    right.set_yscale("log")
    right.set_xlabel("percentile")
    right.set_ylabel("latency (ms, log scale)")
    right.set_title("Latency by percentile")
    ticks = [q for q in (0, 1, 2, 3, 4, 5) if q <= max(nines) + 0.5]
    right.xaxis.set_major_locator(FixedLocator(ticks))
    right.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: f"p{100 * (1 - 10.0**-x):g}"))
    right.grid(True, which="both", alpha=0.3)
    figure.savefig(path, dpi=100)
    plt.close(figure)
