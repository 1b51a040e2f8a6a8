"""Storage benchmarks: printed ratios against the plain system calls doing the same I/O.

  append 16 KB / 1 MB batches   Log.append vs os.write of the same bytes   (target >= 0.8 / 0.95)
  idempotent append 16 KB / 1 MB  the same with one idempotent producer's batches, also printed in us
                                per batch beside os.write and the plain append of the same run
  indexed read + sendfile       Log.read + os.sendfile vs os.sendfile      (target >= 0.95)
  recovery after unclean stop   Log load of ~1 GiB vs reading it with CRC  (target >= 0.8)

A ratio is baseline time / Odradek time (1.0 = as fast as the bare syscalls); each
benchmark takes the median of a few interleaved runs of both (taking turns to go
first), and with --rounds the median ratio of the rounds is printed.
Usage: python bench/storage_bench.py [--rounds 5] [--only append16k ...] [--recovery-mib 1024] [--append-mib 256]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fastcrc.crc32 import iscsi as crc32c  # CRC-32C (Castagnoli), as v2 batches use

sys.path.insert(0, str(Path(__file__).parents[1] / "tests" / "storage"))
from spec import build_batch

from odradek.storage import Log, LogConfig

#: The batches carry this CreateTime; appends happen "now" so the timestamps are in range.
NOW_MS = 1_700_000_000_000
#: What a run is timed with: wall-clock time, or with --clock cpu this process's CPU time
#: (user + system: the copies into the page cache count), which other processes' load
#: disturbs far less on a shared machine.
clock = time.perf_counter
BIG = LogConfig(segment_bytes=1 << 30, max_message_bytes=8 << 20)


def make_batch(size: int) -> bytes:
    value = b"x" * 1000
    n = max(1, size // 1030)
    return build_batch([(b"key", value, NOW_MS)] * n)


def compare(runs: int, *contenders) -> tuple[float, ...]:
    """Median time of each contender. Runs are interleaved and take turns going first, so
    that load from other processes and the state of the page cache (dirty pages of the
    previous run being written back) hit all alike."""
    times: list[list[float]] = [[] for _ in contenders]
    for i in range(runs):
        for k in range(len(contenders)):
            j = (i + k) % len(contenders)
            times[j].append(contenders[j]())
    return tuple(statistics.median(t) for t in times)


def bench_append(tmp: Path, batch_size: int, total: int) -> tuple[float, float]:
    batch = make_batch(batch_size)
    count = total // len(batch)

    def plain() -> float:
        # A new file in a new directory of the same file system, as the log's first segment is.
        path = Path(tempfile.mkdtemp(dir=tmp)) / "plain.bin"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        t = clock()
        for _ in range(count):
            os.write(fd, batch)
        elapsed = clock() - t
        os.close(fd)
        path.unlink()
        return elapsed

    def odradek() -> float:
        d = Path(tempfile.mkdtemp(dir=tmp)) / "bench-0"
        log = Log(d, BIG)
        t = clock()
        for _ in range(count):
            log.append(batch, leader_epoch=0, now_ms=NOW_MS)
        elapsed = clock() - t
        log.close()
        for f in d.iterdir():
            f.unlink()
        return elapsed

    return compare(5, plain, odradek)


def sequenced_chunks(template: bytes, count: int, records: int, producer_id: int):
    """The bytes of ``count`` batches like ``template``, in lists of at most 16 MiB, each
    batch a buffer of its own; with ``producer_id`` >= 0 they are one idempotent producer's
    consecutive batches (baseSequence patched, CRC recomputed)."""
    per_chunk = max(1, (16 << 20) // len(template))
    for start in range(0, count, per_chunk):
        chunk = []
        for i in range(start, min(count, start + per_chunk)):
            b = bytearray(template)
            if producer_id >= 0:
                struct.pack_into(">qhi", b, 43, producer_id, 0, (i * records) % 2**31)
                struct.pack_into(">I", b, 17, crc32c(memoryview(b)[21:]))
            chunk.append(bytes(b))
        yield chunk


def bench_idempotent_append(tmp: Path, batch_size: int, total: int) -> tuple[float, float, float]:
    """os.write, Log.append and an idempotent producer's Log.append of the same number of
    equal-sized batches; each batch is a buffer of its own, built outside the timed loops."""
    template = make_batch(batch_size)
    records = struct.unpack_from(">i", template, 57)[0]
    count = total // len(template)

    def timed(write, producer_id: int) -> float:
        elapsed = 0.0
        for chunk in sequenced_chunks(template, count, records, producer_id):
            t = clock()
            for batch in chunk:
                write(batch)
            elapsed += clock() - t
        return elapsed

    def plain() -> float:
        path = Path(tempfile.mkdtemp(dir=tmp)) / "plain.bin"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        elapsed = timed(lambda batch: os.write(fd, batch), 1)
        os.close(fd)
        path.unlink()
        return elapsed

    def appended(producer_id: int):
        def run() -> float:
            d = Path(tempfile.mkdtemp(dir=tmp)) / "bench-0"
            log = Log(d, BIG)
            elapsed = timed(
                lambda batch: log.append(batch, leader_epoch=0, now_ms=NOW_MS), producer_id
            )
            log.close()
            for f in d.iterdir():
                f.unlink()
            return elapsed

        return run

    times = compare(5, plain, appended(-1), appended(1))
    return tuple(t / count * 1e6 for t in times)


def bench_read(tmp: Path, total: int, fetch_bytes: int) -> tuple[float, float]:
    d = tmp / "read-0"
    log = Log(d, BIG)
    batch = make_batch(16 * 1024)
    for _ in range(total // len(batch)):
        log.append(batch, leader_epoch=0, now_ms=NOW_MS)
    leo = log.log_end_offset
    step = batch[57:61]  # recordsCount
    per_batch = struct.unpack(">i", step)[0]
    starts = list(range(0, leo - per_batch * 80, per_batch * 7))
    # The same ranges, located by Log.read once, for the plain sendfile baseline.
    ranges = []
    for s in starts:
        r = log.read(s, fetch_bytes).regions[0]
        ranges.append((r.file.fileno(), r.position, r.length))
    # The receiving end is another process (as a consumer would be), so no GIL is shared.
    a, b = socket.socketpair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    drainer = subprocess.Popen(["cat"], stdin=b, stdout=subprocess.DEVNULL)
    b.close()
    out = a.fileno()

    def send(fd: int, pos: int, length: int) -> None:
        while length:
            n = os.sendfile(out, fd, pos, length)
            pos += n
            length -= n

    def plain() -> float:
        t = clock()
        for fd, pos, length in ranges:
            send(fd, pos, length)
        return clock() - t

    def odradek() -> float:
        t = clock()
        for s in starts:
            for r in log.read(s, fetch_bytes).regions:
                send(r.file.fileno(), r.position, r.length)
        return clock() - t

    result = compare(7, plain, odradek)
    a.close()
    drainer.wait(timeout=30)
    log.close()
    return result


def bench_recovery(tmp: Path, total: int) -> tuple[float, float]:
    d = tmp / "recover-0"
    cfg = LogConfig(segment_bytes=256 << 20)
    log = Log(d, cfg)
    batch = make_batch(16 * 1024)
    for _ in range(total // len(batch)):
        log.append(batch, leader_epoch=0, now_ms=NOW_MS)
    log.flush()
    files = sorted(d.glob("*.log"))
    # an unclean stop: no clean-shutdown marker, no trusted indexes beyond recovery point 0
    del log

    def plain() -> float:
        # Read every file in 8 MiB preads (the I/O recovery does) and check each batch's CRC32C.
        t = clock()
        for f in files:
            fd = os.open(f, os.O_RDONLY)
            size, position = os.fstat(fd).st_size, 0
            while position < size:
                data = os.pread(fd, 8 << 20, position)
                view = memoryview(data)
                pos = 0
                while len(data) - pos >= 12:
                    end = pos + 12 + struct.unpack_from(">i", data, pos + 8)[0]
                    if end > len(data):
                        break
                    if crc32c(view[pos + 21 : end]) != struct.unpack_from(">I", data, pos + 17)[0]:
                        raise AssertionError("bad crc")
                    pos = end
                position += pos
            os.close(fd)
        return clock() - t

    def odradek() -> float:
        t = clock()
        recovered = Log(d, cfg, clean_shutdown=False, recovery_point=0)
        elapsed = clock() - t
        for seg in recovered.segments:
            seg.close()
        return elapsed

    return compare(3, plain, odradek)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--append-mib", type=int, default=256)
    parser.add_argument("--read-mib", type=int, default=256)
    parser.add_argument("--recovery-mib", type=int, default=1024)
    parser.add_argument("--dir", default=None, help="where to write (default: a temp dir)")
    parser.add_argument(
        "--rounds", type=int, default=1, help="repeat every benchmark; print the median ratio"
    )
    parser.add_argument(
        "--only",
        choices=("append16k", "append1m", "idempotent16k", "idempotent1m", "read", "recovery"),
        action="append",
        help="run only these benchmarks (repeatable)",
    )
    parser.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="time runs by wall clock (the targets' measure) or by this process's CPU time",
    )
    parser.add_argument(
        "--topic-config",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a topic config of the logs benchmarked (repeatable); e.g. "
        "message.timestamp.after.max.ms=9223372036854775807 with no before limit "
        "(Kafka 3's defaults) leaves records unread on append",
    )
    args = parser.parse_args()
    global clock, BIG
    BIG = LogConfig.from_properties(
        dict(item.split("=", 1) for item in args.topic_config), base=BIG
    )
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    benches = {
        "append16k": (
            "append 16 KB batches",
            0.8,
            lambda tmp: bench_append(tmp, 16 * 1024, args.append_mib << 20),
        ),
        "append1m": (
            "append 1 MB batches",
            0.95,
            lambda tmp: bench_append(tmp, 1024 * 1024, args.append_mib << 20),
        ),
        "idempotent16k": (
            "idempotent append 16 KB batches",
            0.8,
            lambda tmp: bench_idempotent_append(tmp, 16 * 1024, args.append_mib << 20),
        ),
        "idempotent1m": (
            "idempotent append 1 MB batches",
            0.95,
            lambda tmp: bench_idempotent_append(tmp, 1024 * 1024, args.append_mib << 20),
        ),
        "read": (
            "indexed read + sendfile (1 MiB fetches)",
            0.95,
            lambda tmp: bench_read(tmp, args.read_mib << 20, 1 << 20),
        ),
        "recovery": (
            f"recovery of {args.recovery_mib} MiB, unclean",
            0.8,
            lambda tmp: bench_recovery(tmp, args.recovery_mib << 20),
        ),
    }
    chosen = args.only or list(benches)
    ratios: dict[str, list[float]] = {name: [] for name in chosen}
    per_batch: dict[
        str, list[tuple[float, ...]]
    ] = {}  # the idempotent rows: us per batch of each contender
    loads = []
    for _ in range(args.rounds):
        for name in chosen:
            with tempfile.TemporaryDirectory(dir=args.dir) as tmp_name:
                loads.append(os.getloadavg()[0])
                times = benches[name][2](Path(tmp_name))
                ratios[name].append(times[0] / times[-1])
                if len(times) == 3:
                    per_batch.setdefault(name, []).append(times)
    print(
        f"{'benchmark':44} {'ratio':>6} {'min':>6} {'max':>6} {'target':>7}   ({args.rounds} rounds, "
        f"{args.clock} clock, 1-min load {min(loads):.1f}-{max(loads):.1f})"
    )
    for name in chosen:
        label, target, _ = benches[name]
        r = ratios[name]
        median = statistics.median(r)
        print(
            f"{label:44} {median:6.2f} {min(r):6.2f} {max(r):6.2f} {target:7.2f} {'ok' if median >= target else 'BELOW'}"
        )
    if per_batch:
        print(
            f"\n{'us per batch (medians of the rounds)':44} {'write':>8} {'append':>8} {'idempotent':>10} "
            f"{'+idempotence':>12}"
        )
        for name, rounds in per_batch.items():
            write, plain, idempotent = (statistics.median(t[i] for t in rounds) for i in range(3))
            print(
                f"{benches[name][0]:44} {write:8.2f} {plain:8.2f} {idempotent:10.2f} {idempotent - plain:+12.2f}"
            )


if __name__ == "__main__":
    main()
