"""The LogManager flushes logs in a thread while the event loop rolls, trims, truncates and
deletes segments. A flush must never touch an index mapping the owner is replacing, nor a
closed segment's descriptor: either would raise an OSError and take the whole log dir offline."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator

import pytest
from spec import build_batch

from odradek.storage import Log, LogConfig

NOW = 1_700_000_000_000
#: Tiny segments and indexes: a roll (index trim, new preallocated maps) every few appends.
TINY = LogConfig(segment_bytes=1200, segment_index_bytes=48, index_interval_bytes=0, retention_bytes=4000,
                 file_delete_delay_ms=0)


@pytest.fixture
def fast_switching() -> Iterator[None]:
    """Switch threads every few microseconds so the two threads interleave at many points."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def test_background_flush_survives_rolls_truncation_and_retention(tmp_path, fast_switching) -> None:
    dirs_offline: list[object] = []
    lg = Log(tmp_path / "race-0", TINY, on_io_error=dirs_offline.append)
    batch = build_batch([(b"k", b"v" * 100, NOW)] * 3)
    failures: list[BaseException] = []
    stop = threading.Event()

    def flusher() -> None:
        while not stop.is_set():
            try:
                lg.flush(NOW)
            except BaseException as exc:  # noqa: BLE001 - any failure is the bug
                failures.append(exc)
                return

    thread = threading.Thread(target=flusher, daemon=True)
    thread.start()
    try:
        for i in range(1500):
            if failures:
                break
            lg.append(batch, leader_epoch=0, now_ms=NOW)
            if i % 7 == 0:
                lg.roll(NOW)
            if i % 50 == 49:
                lg.truncate_to(lg.log_end_offset - 7)  # drops the active segment's tail or whole segments
            if i % 20 == 0:
                lg.delete_old_segments(NOW)  # closes and renames the oldest segments
    finally:
        stop.set()
        thread.join(timeout=60)
    assert not thread.is_alive()
    assert failures == []
    assert not lg.offline and dirs_offline == []
    lg.flush(NOW)
    assert lg.recovery_point == lg.log_end_offset
    lg.close()


def test_flush_of_a_closed_segment_is_a_no_op(tmp_path) -> None:
    lg = Log(tmp_path / "closed-0", LogConfig())
    lg.append(build_batch([(b"k", b"v", NOW)]), leader_epoch=0, now_ms=NOW)
    seg = lg.active
    seg.close()
    seg.flush()  # the owner closed it under a flushing thread's feet: nothing to do, no error
