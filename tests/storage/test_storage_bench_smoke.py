"""bench/storage_bench.py still runs (with tiny sizes): a benchmark nobody runs rots, as this one
did when appends began to check CreateTime against the broker's clock."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).parents[2] / "bench" / "storage_bench.py"


def test_storage_bench_runs_and_prints_every_ratio(tmp_path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            str(BENCH),
            "--append-mib",
            "2",
            "--read-mib",
            "4",
            "--recovery-mib",
            "4",
            "--dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    ratio_table, per_batch_table = out.split("\n\n")
    rows = [line for line in ratio_table.splitlines()[1:] if line.strip()]
    assert [row.split()[0] for row in rows] == [
        "append",
        "append",
        "idempotent",
        "idempotent",
        "indexed",
        "recovery",
    ]
    for row in rows:
        ratio = float(row.split()[-5])
        assert ratio > 0
    rows = [line for line in per_batch_table.splitlines()[1:] if line.strip()]
    assert [row.split()[2] for row in rows] == ["16", "1"]  # idempotent append 16 KB / 1 MB batches
    for row in rows:  # os.write, append, idempotent append, the difference
        assert all(float(us) > 0 for us in row.split()[-4:-1])
