"""Smoke test of bench/e2e_stalls.py: the probed broker records appends, fetch reads, loop wake-ups
and collections, and the analysis lines them up with every timed record. Never how fast."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_slow_record_is_split_into_its_legs(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "e2e_stalls.py"),
            "--runs",
            "1",
            "--records",
            "300",
            "--throughput",
            "3000",
            "--slow-ms",
            "0",
            "--keep",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["records"] == 270 and report["slow"] == 270  # --slow-ms 0: every timed record
    for leg in ("produce->append", "append->read", "read->consumer"):
        assert report["slow_legs_median_ms"][leg] is not None, leg
    overlapping = report["slow_overlapping"]
    assert sum(overlapping.values()) >= 270
    probes = json.loads((tmp_path / "probes.json").read_text())
    assert probes["wakeups"] > 0
    assert probes["appends"]["stalls-0"] and probes["reads"]["stalls-0"]
