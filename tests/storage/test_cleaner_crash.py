"""A process cleaning a log is killed with SIGKILL at random moments; every reopening finds a
consistent log: batches whole and CRC-valid, offsets increasing, every record as written,
the latest record of every key the last one written (or gone only when that was a tombstone)."""

from __future__ import annotations

import hashlib
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from codec_spec import parse

from odradek.storage import Log, LogConfig

NOW = 1_000_000
CFG = LogConfig(
    cleanup_policy=("compact",),
    segment_bytes=64 * 1024,
    min_cleanable_dirty_ratio=0.0,
    delete_retention_ms=10,
    index_interval_bytes=4096,
)


def record_at(offset: int) -> tuple[bytes, bytes | None]:
    """What the record at ``offset`` holds: a pure function, so the parent knows what the killed child wrote."""
    h = hashlib.blake2b(b"%d" % offset, digest_size=8).digest()
    key = b"key-%d" % (int.from_bytes(h[:4], "big") % 300)
    value = None if h[4] < 26 else b"%d:" % offset + h * (1 + h[5] % 8)
    return key, value


CHILD = """
import sys
from odradek.storage import Log, LogConfig
from odradek.storage.cleaner import LogCleaner
sys.path.insert(0, sys.argv[4])
from codec_spec import build
from test_cleaner_crash import record_at
path, segment_bytes, now = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
cfg = LogConfig(cleanup_policy=("compact",), segment_bytes=segment_bytes, min_cleanable_dirty_ratio=0.0,
                delete_retention_ms=10, index_interval_bytes=4096)
log = Log(path, cfg, now_ms=now)
cleaner = LogCleaner(dedupe_buffer_size=24 * 200, io_buffer_size=8192)
print("ready", flush=True)
n = 0
while True:
    now += 7
    for _ in range(20):
        start = log.log_end_offset
        count = 1 + (start * 7919) % 15
        records = [(*record_at(o), 1_000_000) for o in range(start, start + count)]
        log.append(build(records, codec=n % 5), leader_epoch=0, now_ms=1_000_000)
        n += 1
    plan = cleaner.prepare(log, now)
    if plan is not None:
        cleaner.install(log, plan, now)
"""


def check_consistent(path: Path) -> int:
    log = Log(path, CFG, clean_shutdown=False, now_ms=NOW)
    try:
        assert not list(path.glob("*.cleaned")) and not list(path.glob("*.swap"))
        data = b"".join(r.read_bytes() for r in log.read(log.log_start_offset, 1 << 30).regions)
        batches = parse(data)  # asserts CRCs and structure
        offsets = [r.offset for b in batches for r in b.records]
        assert offsets == sorted(set(offsets))
        written = {o: record_at(o) for o in range(log.log_end_offset)}
        latest_kept: dict[bytes, int] = {}
        for b in batches:
            for r in b.records:
                assert (r.key, r.value) == written[r.offset]
                latest_kept[r.key] = r.offset
        latest_written: dict[bytes, int] = {}
        for offset in sorted(written):
            latest_written[written[offset][0]] = offset
        for key, offset in latest_written.items():
            if key in latest_kept:
                assert latest_kept[key] == offset
            else:
                assert written[offset][1] is None
        return log.log_end_offset
    finally:
        log.close()


def test_sigkill_while_appending_and_cleaning_leaves_a_consistent_log(tmp_path):
    rng = random.Random(20261122)
    path = tmp_path / "compacted-0"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    ends, leftovers = [], 0
    for round_ in range(10):
        child = subprocess.Popen(
            [
                sys.executable,
                "-c",
                CHILD,
                str(path),
                str(CFG.segment_bytes),
                str(NOW + 1000 * round_),
                str(Path(__file__).parent),
            ],
            stdout=subprocess.PIPE,
            env=env,
        )
        try:
            assert child.stdout.readline().strip() == b"ready"
            time.sleep(rng.uniform(0.05, 0.5))
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=30)
        leftovers += sum(1 for p in path.iterdir() if p.suffix in (".cleaned", ".swap"))
        ends.append(check_consistent(path))
    print("log end offsets", ends, "kills that left .cleaned/.swap files", leftovers)
    assert ends[-1] > 0
