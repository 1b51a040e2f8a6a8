"""Where the end-to-end latency tail comes from: the broker's stalls lined up with the slow records.

    .venv/bin/python bench/e2e_stalls.py [--runs 3] [--records 100000] [--throughput 10000]
                                         [--slow-ms 5] [--keep DIR] [-- extra `odradek perf e2e` options]

Starts `odradek serve` with probes (this file re-run with ``--probed-serve``, so the
broker itself carries no instrumentation), runs `odradek perf e2e --latency-log`
against it ``--runs`` times and prints, per run:

- the latency percentiles, and for the records slower than ``--slow-ms`` where their
  time went: producer to append (client, network, the broker reading the request),
  append to the fetch read that returned them (purgatory wake-up, a queued fetch),
  fetch read to the consumer's poll (response send, consumer client);
- the broker's event-loop stalls: how late a 1 ms sleep woke, and of that how long the
  loop thread waited for a CPU (run-queue delay from /proc/thread-self/schedstat) and
  how long it ran;
- samples of the loop thread blocked in the kernel (state D, with its system call number
  and wchan), taken every 2 ms by a watcher thread;
- garbage collections (generation, duration) and the background pass's steps
  (flush_dirty_logs in its thread, retention, clean_logs, checkpoint) with durations;
- the machine's CPU pressure (/proc/pressure/cpu, "some") during the run;
- which of those overlapped the slow records.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import csv
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from array import array
from pathlib import Path

from odradek.cli.perf import percentile

PY = sys.executable
#: Loop wake-ups later than this are kept (with their run-queue delay); the rest only counted.
LAG_KEPT_NS = 500_000
PROBE_PERIOD_S = 0.001


# ---------------------------------------------------------------- the probed broker (child process)


class Probes:
    """Everything recorded inside the broker, in CLOCK_MONOTONIC nanoseconds (one clock for every
    process of the machine, the one `odradek perf e2e` stamps records with)."""

    def __init__(self) -> None:
        self.lags: list[
            tuple[int, int, int, int]
        ] = []  # (woke, lag, run-queue wait, on-CPU) during the sleep
        self.wakeups = 0
        self.gcs: list[tuple[int, int, int, int]] = []  # (start, generation, duration, collected)
        self.background: list[
            tuple[str, int, int, int]
        ] = []  # (step, start, duration, CPU of its thread)
        self.appends: dict[str, array] = {}  # topic -> (time, first offset, last offset) triples
        self.reads: dict[
            str, array
        ] = {}  # topic -> (time, fetch offset, high watermark) of reads with data
        #: (time, how late the watcher itself woke, loop thread state, its system call, its wchan): samples
        #: of the loop thread blocked in the kernel (state D), or of the watcher kept from the GIL.
        self.blocked: list[tuple[int, int, str, str, str]] = []
        self._gc_start = 0
        #: Modules imported after the ready line: their first use reads files on the loop thread.
        self.ready_modules: set[str] = set()

    def on_gc(self, phase: str, info: dict) -> None:
        now = time.monotonic_ns()
        if phase == "start":
            self._gc_start = now
        else:
            self.gcs.append(
                (self._gc_start, info["generation"], now - self._gc_start, info["collected"])
            )

    async def loop_lag(self) -> None:
        fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY)  # the loop's thread

        def schedstat() -> tuple[int, int]:
            on_cpu, waited, _ = os.pread(fd, 128, 0).split()
            return int(on_cpu), int(waited)

        period = int(PROBE_PERIOD_S * 1e9)
        while True:
            before = time.monotonic_ns()
            cpu0, wait0 = schedstat()
            await asyncio.sleep(PROBE_PERIOD_S)
            woke = time.monotonic_ns()
            self.wakeups += 1
            lag = woke - before - period
            if lag > LAG_KEPT_NS:
                cpu1, wait1 = schedstat()
                self.lags.append((woke, lag, wait1 - wait0, cpu1 - cpu0))

    def watch_blocked(self, tid: int) -> None:
        """Every 2 ms, from a thread of its own: is the loop thread in uninterruptible sleep (a
        disk write, a page fault), and in which system call? A blocked system call that holds the
        GIL (a page fault on a memory map) also keeps this thread from running: it wakes late."""
        task = f"/proc/self/task/{tid}"
        while True:
            before = time.monotonic_ns()
            time.sleep(0.002)
            now = time.monotonic_ns()
            late = now - before - 2_000_000
            try:
                with open(f"{task}/stat") as f:
                    state = f.read().rpartition(")")[2].split()[0]
                if state == "D" or late > 5_000_000:
                    with open(f"{task}/syscall") as f:
                        syscall = f.read().split(" ", 1)[0]
                    with open(f"{task}/wchan") as f:
                        wchan = f.read()
                    self.blocked.append((now, late, state, syscall, wchan))
            except OSError:
                return

    def timed(self, step: str, func):
        """``func`` (sync) recording its wall time and its thread's CPU time under ``step``."""

        def wrapper(*args, **kwargs):
            start, cpu = time.monotonic_ns(), time.thread_time_ns()
            try:
                return func(*args, **kwargs)
            finally:
                self.background.append(
                    (step, start, time.monotonic_ns() - start, time.thread_time_ns() - cpu)
                )

        return wrapper

    def timed_async(self, step: str, func):
        async def wrapper(*args, **kwargs):
            start = time.monotonic_ns()
            try:
                return await func(*args, **kwargs)
            finally:
                self.background.append((step, start, time.monotonic_ns() - start, -1))

        return wrapper

    def dump(self, path: Path) -> None:
        path.write_text(
            json.dumps(
                {
                    "lags": self.lags,
                    "wakeups": self.wakeups,
                    "gcs": self.gcs,
                    "background": self.background,
                    "blocked": self.blocked,
                    "imported_after_ready": sorted(set(sys.modules) - self.ready_modules)
                    if self.ready_modules
                    else [],
                    "appends": {t: a.tolist() for t, a in self.appends.items()},
                    "reads": {t: a.tolist() for t, a in self.reads.items()},
                }
            )
        )


def probed_serve(probe_file: Path, serve_args: list[str]) -> int:
    """`odradek serve` with the probes installed by wrapping, not by editing, the broker's code."""
    from odradek.cli.main import without_test_libraries

    without_test_libraries()
    from odradek.cli.main import main
    from odradek.replication.replica_manager import ReplicaManager
    from odradek.server import broker as broker_module
    from odradek.server.handlers import fetch
    from odradek.storage.cleaner import LogCleaner
    from odradek.storage.log_manager import LogManager

    probes = Probes()
    gc.callbacks.append(probes.on_gc)
    for step in ("flush_dirty_logs", "cleanup_logs", "checkpoint"):
        setattr(LogManager, step, probes.timed(step, getattr(LogManager, step)))
    LogManager.clean_logs = probes.timed_async("clean_logs", LogManager.clean_logs)
    LogCleaner.cleanable_range = probes.timed("cleanable_range", LogCleaner.cleanable_range)

    append = ReplicaManager.append_records

    def append_records(self, tp, *args, **kwargs):
        info = append(self, tp, *args, **kwargs)
        probes.appends.setdefault(tp.topic, array("q")).extend(
            (time.monotonic_ns(), info.first_offset, info.last_offset)
        )
        return info

    ReplicaManager.append_records = append_records
    read = fetch._read

    def probed_read(broker, wanted, *args, **kwargs):
        results = read(broker, wanted, *args, **kwargs)
        now = time.monotonic_ns()
        for tp, result in results.items():
            if result.records:
                probes.reads.setdefault(tp.topic, array("q")).extend(
                    (now, wanted[tp].fetch_offset, result.high_watermark)
                )
        return results

    fetch._read = probed_read
    start = broker_module.Broker.start

    async def probed_start(self):
        await start(self)
        probes.ready_modules = set(sys.modules)
        self._loop_lag_probe = asyncio.get_running_loop().create_task(probes.loop_lag())
        threading.Thread(
            target=probes.watch_blocked, args=(threading.get_native_id(),), daemon=True
        ).start()

    broker_module.Broker.start = probed_start
    atexit.register(probes.dump, probe_file)
    return main(["serve", *serve_args])


# ---------------------------------------------------------------- the harness (parent process)


def cpu_pressure_sampler(samples: list[tuple[int, int]], stop: threading.Event) -> None:
    """(time, cumulative µs during which some runnable task waited for a CPU) every 100 ms."""
    try:
        with open("/proc/pressure/cpu") as f:
            while not stop.is_set():
                f.seek(0)
                some = f.readline().split()
                samples.append((time.monotonic_ns(), int(some[-1].partition("=")[2])))
                stop.wait(0.1)
    except OSError:
        return


def delivery_times(reads: list[int]) -> dict[int, int]:
    """offset -> time of the first fetch read that returned it."""
    first: dict[int, int] = {}
    for i in range(0, len(reads), 3):
        at, fetch_offset, hw = reads[i : i + 3]
        for offset in range(fetch_offset, hw):
            first.setdefault(offset, at)
    return first


def overlaps(windows: list[tuple[int, int]], start: int, end: int) -> bool:
    """Whether any (start, end) window overlaps [start, end]."""
    return any(s <= end and e >= start for s, e in windows)


def ms(ns: float) -> str:
    return f"{ns / 1e6:.2f}"


def analyse(
    latency_log: Path, probes: dict, topic: str, pressure: list[tuple[int, int]], slow_ms: float
) -> dict:
    rows = [
        (int(r["offset"]), int(r["send_monotonic_ns"]), float(r["latency_us"]) * 1000)
        for r in csv.DictReader(latency_log.open())
    ]
    if not rows:
        return {}
    lat = sorted(r[2] for r in rows)
    t0, t1 = rows[0][1], max(r[1] + r[2] for r in rows)

    appended = {}
    a = probes["appends"].get(topic, [])
    for i in range(0, len(a), 3):
        for offset in range(a[i + 1], a[i + 2] + 1):
            appended[offset] = a[i]
    delivered = delivery_times(probes["reads"].get(topic, []))
    stalls = sorted(
        (w - lag, w, wait, cpu) for w, lag, wait, cpu in probes["lags"] if t0 <= w <= t1
    )
    gcs = sorted((s, s + d, g, c) for s, g, d, c in probes["gcs"] if t0 <= s <= t1)
    background = sorted(
        (s, s + d, step, cpu) for step, s, d, cpu in probes["background"] if t0 <= s <= t1
    )
    slow = [r for r in rows if r[2] > slow_ms * 1e6]
    legs = {"produce->append": [], "append->read": [], "read->consumer": []}
    causes = {"loop stall >1 ms": 0, "gc": 0, "background step": 0, "none of these": 0}
    windows = {
        "loop stall >1 ms": [(s, e) for s, e, *_ in stalls if e - s > 1_000_000],
        "gc": [(s, e) for s, e, *_ in gcs],
        "background step": [(s, e) for s, e, *_ in background],
    }
    for offset, sent, latency in slow:
        at, read_at = appended.get(offset), delivered.get(offset)
        if at is not None and read_at is not None:
            legs["produce->append"].append(at - sent)
            legs["append->read"].append(read_at - at)
            legs["read->consumer"].append(sent + latency - read_at)
        hits = [cause for cause, spans in windows.items() if overlaps(spans, sent, sent + latency)]
        for cause in hits or ["none of these"]:
            causes[cause] += 1
    window = [p for p in pressure if t0 <= p[0] <= t1]
    cpu_pressure = (
        (window[-1][1] - window[0][1]) * 1000 / (window[-1][0] - window[0][0])
        if len(window) > 1
        else None
    )
    by_step: dict[str, list[int]] = {}
    for s, e, step, _ in background:
        by_step.setdefault(step, []).append(e - s)
    big_stalls = [s for s in stalls if s[1] - s[0] > 2_000_000]
    return {
        "records": len(rows),
        "p50_ms": percentile(lat, 0.5) / 1e6,
        "p99_ms": percentile(lat, 0.99) / 1e6,
        "p99.9_ms": percentile(lat, 0.999) / 1e6,
        "max_ms": lat[-1] / 1e6,
        "slow": len(slow),
        "slow_legs_median_ms": {
            k: statistics.median(v) / 1e6 if v else None for k, v in legs.items()
        },
        "slow_legs_max_ms": {k: max(v) / 1e6 if v else None for k, v in legs.items()},
        "slow_overlapping": causes,
        "loop_stalls_over_2ms": len(big_stalls),
        "loop_stall_max_ms": max((s[1] - s[0]) / 1e6 for s in stalls) if stalls else 0.0,
        "loop_stalls_over_2ms_runqueue_share": (
            sum(s[2] for s in big_stalls) / sum(s[1] - s[0] for s in big_stalls)
            if big_stalls
            else None
        ),
        "worst_stalls": [
            (ms(s[0] - t0), ms(s[1] - s[0]), ms(s[2]), ms(s[3]))
            for s in sorted(stalls, key=lambda s: s[0] - s[1])[:5]
        ],
        "gcs": len(gcs),
        "gc_by_generation": {g: sum(1 for x in gcs if x[2] == g) for g in (0, 1, 2)},
        "gc_max_ms": max((g[1] - g[0]) / 1e6 for g in gcs) if gcs else 0.0,
        "gc_total_ms": sum(g[1] - g[0] for g in gcs) / 1e6,
        "background_max_ms": {k: max(v) / 1e6 for k, v in by_step.items()},
        "loop_blocked_samples": _count(
            f"{state} {syscall} {wchan}"
            for at, _, state, syscall, wchan in probes["blocked"]
            if t0 <= at <= t1 and state == "D"
        ),
        "watcher_late_over_5ms": [
            (ms(at - t0), ms(late), state, syscall, wchan)
            for at, late, state, syscall, wchan in probes["blocked"]
            if t0 <= at <= t1 and late > 5_000_000
        ][:8],
        "cpu_pressure_some": cpu_pressure,
    }


def _count(items) -> dict[str, int]:
    counts: dict[str, int] = {}
    for item in items:
        counts[item] = counts.get(item, 0) + 1
    return counts


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--probed-serve":
        return probed_serve(Path(argv[1]), argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--throughput", type=int, default=10_000)
    parser.add_argument(
        "--slow-ms", type=float, default=5.0, help="records slower than this are analysed"
    )
    parser.add_argument("--keep", type=Path, help="keep the latency logs and the probe dump here")
    parser.add_argument("perf_args", nargs="*", help="more `odradek perf e2e` options (after --)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="odradek-e2e-stalls-") as tmp:
        out = args.keep or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        probe_file = out / "probes.json"
        broker = subprocess.Popen(
            [
                PY,
                str(Path(__file__).resolve()),
                "--probed-serve",
                str(probe_file),
                "--data-dir",
                str(Path(tmp) / "data"),
                "--host",
                "127.0.0.1",
                "--port",
                "0",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert broker.stdout is not None
        line = broker.stdout.readline()
        if "bootstrap_servers=" not in line:
            print(f"the broker did not start: {line}", file=sys.stderr)
            return 1
        bootstrap = line.split("bootstrap_servers=")[1].split()[0]
        pressure: list[tuple[int, int]] = []
        stop = threading.Event()
        sampler = threading.Thread(target=cpu_pressure_sampler, args=(pressure, stop), daemon=True)
        sampler.start()
        runs = []
        try:
            for r in range(args.runs):
                load = os.getloadavg()
                log = out / f"latency-{r}.csv"
                done = subprocess.run(
                    [
                        PY,
                        "-m",
                        "odradek",
                        "perf",
                        "e2e",
                        "--bootstrap-server",
                        bootstrap,
                        "--topic",
                        f"stalls-{r}",
                        "--records",
                        str(args.records),
                        "--throughput",
                        str(args.throughput),
                        "--json",
                        "--latency-log",
                        str(log),
                        *args.perf_args,
                    ],
                    capture_output=True,
                    text=True,
                    timeout=args.records / args.throughput + 120,
                )
                if done.returncode != 0:
                    print(done.stderr, file=sys.stderr)
                    return 1
                runs.append((f"stalls-{r}", log, load))
        finally:
            stop.set()
            broker.terminate()
            broker.wait(60)
        probes = json.loads(probe_file.read_text())
        for topic, log, load in runs:
            report = analyse(log, probes, topic, pressure, args.slow_ms)
            print(
                json.dumps(
                    {"run": topic, "load": [round(x, 2) for x in load], **report}, default=str
                )
            )
        if args.keep is None:
            shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
