"""The LogManager flushes logs in a thread while the event loop rolls, trims, truncates and
deletes segments. A flush must never touch an index mapping the owner is replacing, nor a
closed segment's descriptor: either would raise an OSError and take the whole log dir offline.

Two ways in: a step-by-step interleaving that stops the flushing thread at each line of
storage code in turn and acts as the owner there (deterministic), and both threads running
free with a tiny switch interval (reaches windows inside a single line, such as a system call)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator

import pytest
from spec import build_batch

from odradek.storage import Log, LogConfig

NOW = 1_700_000_000_000
#: Tiny segments and indexes: a roll (index trim, new preallocated maps) every few appends.
TINY = LogConfig(
    segment_bytes=1200,
    segment_index_bytes=48,
    index_interval_bytes=0,
    retention_bytes=4000,
    file_delete_delay_ms=0,
)


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
            except BaseException as exc:
                failures.append(exc)
                return

    thread = threading.Thread(target=flusher, daemon=True)
    thread.start()
    try:
        for i in range(1000):
            if failures:
                break
            lg.append(batch, leader_epoch=0, now_ms=NOW)
            if i % 7 == 0:
                lg.roll(NOW)
            if i % 50 == 49:
                lg.truncate_to(
                    lg.log_end_offset - 7
                )  # drops the active segment's tail or whole segments
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


class _SteppedFlush:
    """lg.flush() in a thread that stops before its ``stop_at``-th line of storage code,
    until released, so the owner can act at exactly that point."""

    def __init__(self, lg: Log, stop_at: int) -> None:
        self.lg, self.stop_at, self.lines = lg, stop_at, 0
        self.failures: list[BaseException] = []
        self.stopped, self.release = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _trace(self, frame, event, _arg):
        if event == "line" and "odradek/storage" in frame.f_code.co_filename:
            self.lines += 1
            if self.lines == self.stop_at:
                self.stopped.set()
                # Short: where this thread holds a segment's close lock, the owner waits for it.
                self.release.wait(0.05)
        return self._trace

    def _run(self) -> None:
        sys.settrace(self._trace)
        try:
            self.lg.flush(NOW)
        except BaseException as exc:
            self.failures.append(exc)
        finally:
            sys.settrace(None)
            self.stopped.set()  # also when the flush ran fewer lines

    def finish(self) -> list[BaseException]:
        self.release.set()
        self.thread.join(timeout=60)
        assert not self.thread.is_alive()
        return self.failures


def _unflushed_log(path) -> Log:
    lg = Log(path, TINY)
    for _ in range(5):  # two segments and an active one, nothing flushed
        lg.append(build_batch([(b"k", b"v" * 100, NOW)] * 3), leader_epoch=0, now_ms=NOW)
    return lg


def test_owner_rolls_and_deletes_segments_at_every_step_of_a_flush(tmp_path) -> None:
    """A direct interleaving, tried at every point: the flushing thread stops before each line
    of storage code it runs in turn, and there the owner rolls (trimming and remapping the
    indexes) and then deletes every segment (closing their files and maps)."""
    probe = _SteppedFlush(_unflushed_log(tmp_path / "probe-0"), stop_at=0)
    assert probe.finish() == []
    assert probe.lines > 10
    for step in range(1, probe.lines + 1):
        lg = _unflushed_log(tmp_path / f"step{step}-0")
        flush = _SteppedFlush(lg, step)
        assert flush.stopped.wait(timeout=60)
        lg.roll(NOW)
        lg.truncate_fully_and_start_at(lg.log_end_offset)
        assert flush.finish() == [], f"flush stopped at line {step}"
        assert not lg.offline
        lg.close()
