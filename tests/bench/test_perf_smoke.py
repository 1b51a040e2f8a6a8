"""Smoke tests of the benchmark tools: `odradek perf` against the null broker and against Odradek.

They check that records arrive and are counted, never how fast.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek import EmbeddedBroker
from odradek.cli.perf import Throttle, percentile

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


def perf(bootstrap: str, *args: str) -> dict:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "odradek",
            "perf",
            *args,
            "--bootstrap-server",
            bootstrap,
            "--json",
            "--timeout",
            str(TIMEOUT),
        ],
        capture_output=True,
        text=True,
        timeout=TIMEOUT * 2,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


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
