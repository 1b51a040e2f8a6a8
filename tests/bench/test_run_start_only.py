"""bench/run.py --start-only: the table has the rows that were measured and no others."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import run


def test_the_table_leaves_out_workloads_that_did_not_run() -> None:
    rounds = [{"start_empty_s": 0.2, "start_spread_s": 0.6, "produce_spread_rps": 90_000.0}]
    null = [{"start_empty_s": 0.1, "start_spread_s": 0.1, "produce_spread_rps": 180_000.0}]
    text = run.table({"odradek": rounds, "null": null}, run.FULL)
    rows = [line for line in text.splitlines() if line.startswith("| ") and "Workload" not in line]
    assert [row.split(" | ")[0] for row in rows] == [
        "| Start to ready, empty data dir",
        "| Start to ready, 1,000 partitions on disk",
        "| Produce 100 B round-robin over 1,000 partitions",
    ]
    assert "| 0.600 | 0.100 | 6.00 | <= 2 s | yes |" in text


def test_a_metrics_broker_gets_columns_of_its_own() -> None:
    rows = {
        "odradek": [{"consume_100b_rps": 900_000.0}],
        run.ODRADEK_WITH_METRICS: [{"consume_100b_rps": 800_000.0}],
        "null": [{"consume_100b_rps": 1_000_000.0}],
    }
    text = run.table(rows, run.FULL)
    header, rule, row = text.splitlines()
    assert "| Odradek, metrics on | Metrics on ÷ null |" in header
    assert header.count("|") == rule.count("|") == row.count("|")
    assert "| 900,000 | 800,000 | 0.80 | 1,000,000 | 0.90 |" in row
