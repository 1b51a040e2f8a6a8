"""The leader-epoch checkpoint is written off the event loop (by Log.flush), and recovery
restores the epochs that a crash kept out of the file from the batches themselves."""

from __future__ import annotations

import threading

from spec import build_batch

from odradek.storage import Log, LogConfig, LogManager, TopicPartition

NOW = 1_700_000_000_000
CHECKPOINT = "leader-epoch-checkpoint"


def append(log: Log, epoch: int, n: int = 1) -> None:
    log.append(build_batch([(b"k", b"v", NOW)] * n), leader_epoch=epoch, now_ms=NOW)


def test_new_epochs_are_written_by_flush_not_by_assign(tmp_path) -> None:
    lm = LogManager([str(tmp_path)], LogConfig())
    lm.startup()
    logs = lm.get_or_create_logs([TopicPartition("many", p) for p in range(50)])
    for lg in logs:
        lg.leader_epoch_cache.assign(
            4, lg.log_end_offset
        )  # a broker becoming leader of 50 partitions
        append(lg, 4)
    assert not any(
        (lg.dir / CHECKPOINT).exists() for lg in logs
    )  # no file write, no fsync, on the loop
    logs[0].flush()
    assert (
        logs[0].dir / CHECKPOINT
    ).read_text() == "0\n1\n4 0\n"  # Kafka's format: version, count, entries
    assert not logs[0].leader_epoch_cache.dirty
    lm.shutdown()  # clean shutdown writes the rest
    assert all((lg.dir / CHECKPOINT).read_text() == "0\n1\n4 0\n" for lg in logs)


def test_recovery_restores_epochs_missing_from_the_checkpoint(tmp_path) -> None:
    path = tmp_path / "t-0"
    log = Log(path, LogConfig(segment_bytes=600))
    append(log, 0, 3)
    log.flush()  # epoch 0 reaches the file
    append(log, 2, 2)
    for _ in range(5):
        append(log, 5)  # epoch 5 from offset 5, across a roll or two
    assert (path / CHECKPOINT).read_text() == "0\n1\n0 0\n"
    del log  # crash: epochs 2 and 5 never written
    reopened = Log(path, LogConfig(segment_bytes=600), clean_shutdown=False)
    assert reopened.leader_epoch_cache.entries == [(0, 0), (2, 3), (5, 5)]
    assert (path / CHECKPOINT).read_text() == "0\n3\n0 0\n2 3\n5 5\n"
    assert reopened.leader_epoch_cache.end_offset_for_epoch(2) == (2, 5)
    reopened.close()


def test_flushes_from_two_threads_leave_a_whole_checkpoint(tmp_path) -> None:
    log = Log(tmp_path / "t-0", LogConfig())
    stop = threading.Event()
    failures: list[BaseException] = []

    def flusher() -> None:
        while not stop.is_set():
            try:
                log.leader_epoch_cache.flush()
            except BaseException as exc:
                failures.append(exc)
                return

    thread = threading.Thread(target=flusher, daemon=True)
    thread.start()
    try:
        for epoch in range(1, 200):
            append(log, epoch)
            log.leader_epoch_cache.flush()
    finally:
        stop.set()
        thread.join(timeout=30)
    assert failures == []
    log.flush()
    lines = (tmp_path / "t-0" / CHECKPOINT).read_text().splitlines()
    assert lines[:2] == ["0", "199"] and lines[-1] == "199 198"
    log.close()


def test_end_offset_for_epoch_answers_as_kafkas_end_offset_for(tmp_path) -> None:
    """OffsetForLeaderEpoch's answers: the requested epoch's end (the next epoch's start, or
    the LEO for the latest), the largest older epoch for an unknown one in between, the
    first epoch's start for one older than every known epoch, and UNDEFINED for an epoch
    newer than the latest or undefined."""
    log = Log(tmp_path / "t-0", LogConfig())
    log.leader_epoch_cache.assign(2, 0)
    append(log, 2, 3)
    log.leader_epoch_cache.assign(5, 3)
    append(log, 5, 2)
    cache = log.leader_epoch_cache
    assert cache.end_offset_for_epoch(5) == (5, 5)
    assert cache.end_offset_for_epoch(2) == (2, 3)
    assert cache.end_offset_for_epoch(4) == (2, 3)
    assert cache.end_offset_for_epoch(1) == (1, 0)
    assert cache.end_offset_for_epoch(6) == (-1, -1)
    assert cache.end_offset_for_epoch(-1) == (-1, -1)
    log.close()
