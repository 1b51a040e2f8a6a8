"""Smoke tests of the benchmark tools: `odradek perf` against the null broker and against Odradek.

They check that records arrive and are counted, never how fast.
"""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek import EmbeddedBroker
from odradek.cli.perf import Throttle, percentile
from odradek.cli.perf_report import Progress, histogram

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 60


@pytest.fixture(scope="module")
def null_broker() -> Iterator[str]:
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "null_broker.py"), "--num-partitions", "3"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        match = re.search(r"ready bootstrap_servers=(\S+)", process.stdout.readline())
        assert match, "null broker did not print its ready line"
        yield match.group(1)
    finally:
        process.terminate()
        process.wait(TIMEOUT)


@pytest.fixture(scope="module")
def odradek() -> Iterator[str]:
    with EmbeddedBroker() as broker:
        yield broker.bootstrap_servers


def perf_command(bootstrap: str, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "odradek",
        "perf",
        *args,
        "--bootstrap-server",
        bootstrap,
        "--timeout",
        str(TIMEOUT),
    ]


def perf(bootstrap: str, *args: str) -> dict:
    done = subprocess.run(
        [*perf_command(bootstrap, *args), "--json"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT * 2,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def on_a_terminal(command: list[str]) -> tuple[int, str, str]:
    """Run ``command`` with stderr on a pseudo-terminal: (exit status, stdout, terminal output)."""
    controller, terminal = pty.openpty()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=terminal, text=True)
    os.close(terminal)
    seen = bytearray()
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # EIO: every writer closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    os.close(controller)
    out, _ = process.communicate(timeout=TIMEOUT * 2)
    return process.returncode, out, seen.decode(errors="replace")


@pytest.mark.parametrize("target", ["null_broker", "odradek"])
def test_produce_then_consume_counts_every_record(
    target: str, request: pytest.FixtureRequest
) -> None:
    bootstrap = request.getfixturevalue(target)
    produced = perf(
        bootstrap,
        "produce",
        "--topic",
        "smoke",
        "--partitions",
        "3",
        "--records",
        "3000",
        "--record-size",
        "50",
        "--acks",
        "all",
    )
    assert produced["records"] == 3000 and produced["errors"] == 0
    assert produced["bytes"] == 3000 * 50 and produced["latency_samples"] > 0
    consumed = perf(bootstrap, "consume", "--topic", "smoke", "--records", "3000")
    assert consumed["records"] == 3000 and consumed["errors"] == 0
    assert consumed["bytes"] == 3000 * 50


@pytest.mark.parametrize("target", ["null_broker", "odradek"])
def test_e2e_receives_every_record(target: str, request: pytest.FixtureRequest) -> None:
    bootstrap = request.getfixturevalue(target)
    result = perf(
        bootstrap, "e2e", "--topic", "smoke-e2e", "--records", "300", "--throughput", "3000"
    )
    assert result["records"] == 300 and result["errors"] == 0
    assert result["latency_samples"] == 300 - 30


def test_e2e_latency_log_has_every_timed_record(odradek: str, tmp_path: Path) -> None:
    log = tmp_path / "latency.csv"
    result = perf(
        odradek,
        "e2e",
        "--topic",
        "smoke-e2e-log",
        "--records",
        "300",
        "--throughput",
        "3000",
        "--latency-log",
        str(log),
    )
    header, *rows = log.read_text().splitlines()
    assert header == "offset,send_monotonic_ns,latency_us"
    assert len(rows) == result["latency_samples"] == 270
    offsets = [int(row.split(",")[0]) for row in rows]
    assert offsets == list(
        range(30, 300)
    )  # a new topic: the records after the 30 of warm-up, in order
    sends = [int(row.split(",")[1]) for row in rows]
    assert sends == sorted(sends)
    assert all(float(row.split(",")[2]) > 0 for row in rows)


def test_throttle_sleeps_only_in_steps_of_two_ms() -> None:
    """As Kafka's ThroughputThrottler: no sleep until the sender is 2 ms ahead, then until on schedule."""
    throttle = Throttle(10_000, start=100.0)
    assert throttle.delay(19, now=100.0) == 0.0  # 1.9 ms ahead: send on
    assert throttle.delay(20, now=100.0) == pytest.approx(0.002)
    assert throttle.delay(100, now=100.005) == pytest.approx(0.005)
    assert throttle.delay(10, now=101.0) == 0.0  # behind schedule
    assert Throttle(-1, start=100.0).delay(10**6, now=100.0) == 0.0  # no cap


def test_two_producers_share_the_records(null_broker: str) -> None:
    result = perf(
        null_broker,
        "produce",
        "--topic",
        "smoke-many",
        "--records",
        "1001",
        "--producers",
        "2",
        "--round-robin",
        "--partitions",
        "3",
        "--compression",
        "lz4",
    )
    assert result["records"] == 1001 and result["errors"] == 0


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 0.5) == 50.0
    assert percentile(values, 0.99) == 99.0
    assert percentile(values, 0.999) == 100.0
    assert percentile([7.0], 0.999) == 7.0


def test_json_file_and_plot_hold_the_latency_distribution(odradek: str, tmp_path: Path) -> None:
    report, plot = tmp_path / "latency.json", tmp_path / "latency.png"
    done = subprocess.run(
        perf_command(
            odradek,
            "produce",
            "--topic",
            "smoke-report",
            "--records",
            "2000",
            "--json",
            str(report),
            "--plot",
            str(plot),
        ),
        capture_output=True,
        text=True,
        timeout=TIMEOUT * 2,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("produce: 2000 records")  # the line for people stays
    document = json.loads(report.read_text())
    summary, latency = document["summary"], document["latency"]
    assert summary["records"] == 2000 and summary["errors"] == 0
    assert latency["samples"] == summary["latency_samples"] == 2000
    assert sum(bucket["count"] for bucket in latency["histogram"]) == 2000
    assert latency["percentiles_ms"]["p50"] == pytest.approx(summary["p50_ms"], abs=0.001)
    assert latency["percentiles_ms"]["p100"] == pytest.approx(summary["max_ms"], abs=0.001)
    import matplotlib.image

    pixels = matplotlib.image.imread(str(plot))
    assert pixels.shape[0] >= 400 and pixels.shape[1] >= 1000  # a real image, 12 x 4.8 in


def test_progress_line_on_a_terminal_only(odradek: str) -> None:
    command = perf_command(odradek, "produce", "--topic", "smoke-progress", "--records", "3000")
    status, out, terminal = on_a_terminal(command)
    assert status == 0, terminal
    assert "produce: 0/3,000 records (0%)" in terminal
    assert out.startswith("produce: 3000 records")
    status, _, terminal = on_a_terminal([*command, "--quiet"])
    assert status == 0 and "records/s" not in terminal
    piped = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT * 2)
    assert piped.returncode == 0 and "records/s" not in piped.stderr


def test_progress_line_reads_the_count_it_is_given() -> None:
    progress = Progress("consume", 2000, lambda: 500, enabled=False)
    assert progress.line(500, 2.0) == "consume: 500/2,000 records (25%), 250 records/s, 2.0 s"


def test_histogram_buckets_hold_every_sample_once() -> None:
    samples = sorted([0.05, 0.3, 0.3, 1.0, 7.5, 7.5, 99.0, 250.0])
    buckets = histogram(samples)
    assert sum(b["count"] for b in buckets) == len(samples)
    bounds = [b["le_ms"] for b in buckets]
    assert bounds == sorted(bounds) and bounds[-1] >= 250.0
    assert histogram([]) == []
