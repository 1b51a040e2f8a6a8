"""Where Odradek's time goes: py-spy samples a fresh broker while `odradek perf` drives one workload.

    .venv/bin/python bench/profile_broker.py produce|consume|e2e [--records N] [--record-size 100] [--top 25] [--raw FILE]

Needs py-spy (`pip install -e '.[bench]'`). Prints the functions with the most
samples on the stack (inclusive) and at the top of it (self), as percentages of
the event loop thread's busy samples (idle time in the selector is not sampled),
then the busiest frames of the other threads (the storage thread pool), whose idle
workers py-spy does not always recognise as idle. py-spy stops the broker for each
sample: its --nonblocking mode reads torn stacks and pinned most samples on the
socket send in our runs, where perf showed the time in the interpreter.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import PY, Broker


def workload(test: str, records: int, record_size: int) -> list[list[str]]:
    """The perf commands to run: a consume or e2e run needs its topic filled first (not profiled)."""
    produce = [
        "produce",
        "--topic",
        "prof",
        "--partitions",
        "6",
        "--records",
        str(records),
        "--record-size",
        str(record_size),
    ]
    if test == "produce":
        return [produce]
    if test == "consume":
        return [produce, ["consume", "--topic", "prof", "--records", str(records)]]
    return [["e2e", "--topic", "prof-e2e", "--records", str(records), "--throughput", "10000"]]


def summarize(raw: Path, top: int) -> str:
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    others: Counter[str] = Counter()
    total = other_total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        n = int(count)
        frames = [f.strip() for f in stack.split(";") if f.strip()]
        if not frames:
            continue
        if not any("run_forever" in f for f in frames):  # not the event loop's thread
            other_total += n
            others[frames[-1]] += n
            continue
        total += n
        own[frames[-1]] += n
        for frame in set(frames):
            inclusive[frame] += n
    total = max(total, 1)
    lines = [f"{total} busy samples of the event loop thread", "", "inclusive:"]
    lines += [f"  {100 * n / total:5.1f}%  {frame}" for frame, n in inclusive.most_common(top)]
    lines += ["", "self:"]
    lines += [f"  {100 * n / total:5.1f}%  {frame}" for frame, n in own.most_common(top)]
    lines += ["", f"{other_total} samples of other threads (top of stack):"]
    lines += [f"  {n:6d}  {frame}" for frame, n in others.most_common(5)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("test", choices=("produce", "consume", "e2e"))
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--record-size", type=int, default=100)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--raw", type=Path, help="keep py-spy's raw (collapsed stack) output here")
    args = parser.parse_args(argv)
    py_spy = shutil.which("py-spy", path=str(Path(PY).parent)) or shutil.which("py-spy")
    if py_spy is None:
        print("py-spy is not installed: pip install -e '.[bench]'", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="odradek-profile-") as tmp:
        raw = args.raw or Path(tmp) / "profile.txt"
        broker = Broker("odradek", Path(tmp) / "data")
        broker.start()
        try:
            *setup, measured = workload(args.test, args.records, args.record_size)
            for cmd in setup:
                subprocess.run(
                    [PY, "-m", "odradek", "perf", *cmd, "--bootstrap-server", broker.bootstrap],
                    check=True,
                    timeout=600,
                )
            spy = subprocess.Popen(
                [
                    py_spy,
                    "record",
                    "-p",
                    str(broker.process.pid),
                    "-o",
                    str(raw),
                    "-f",
                    "raw",
                    "-r",
                    "200",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            time.sleep(1)  # py-spy attaches
            done = subprocess.run(
                [PY, "-m", "odradek", "perf", *measured, "--bootstrap-server", broker.bootstrap],
                capture_output=True,
                text=True,
                timeout=600,
            )
            print(done.stdout.strip() or done.stderr.strip())
            spy.send_signal(2)  # SIGINT: py-spy writes its output and exits
            spy.wait(60)
        finally:
            broker.stop()
        print(summarize(raw, args.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
