"""Loading after a clean shutdown trusts what the shutdown wrote, and stays correct when it
does less: no leader-epoch checkpoint rewrite, no producer batch replay past a snapshot
at the log end offset, leftovers of a crash still cleaned up."""

from __future__ import annotations

import os

from spec import build_batch

from odradek.storage import Log, LogConfig, LogManager, TopicPartition

NOW = 1_700_000_000_000
CHECKPOINT = "leader-epoch-checkpoint"


def test_a_clean_load_leaves_the_epoch_checkpoint_of_an_empty_partition_alone(tmp_path) -> None:
    path = tmp_path / "t-0"
    log = Log(path, LogConfig())
    log.leader_epoch_cache.assign(0, 0)  # leader of an empty partition, as at topic creation
    log.close()
    assert (path / CHECKPOINT).read_text() == "0\n1\n0 0\n"
    inode = os.stat(path / CHECKPOINT).st_ino

    reopened = Log(path, LogConfig(), clean_shutdown=True)
    # As Kafka's loading, an epoch starting at or past the LEO is dropped (the partition assigns it again) ...
    assert reopened.leader_epoch_cache.entries == []
    # ... but the file is not rewritten for it at start-up (write_atomically would give it a new inode).
    assert os.stat(path / CHECKPOINT).st_ino == inode
    reopened.leader_epoch_cache.assign(3, 0)
    reopened.append(build_batch([(b"k", b"v", NOW)]), leader_epoch=3, now_ms=NOW)
    del reopened  # a crash before any flush: the file still says epoch 0 from offset 0

    recovered = Log(path, LogConfig(), clean_shutdown=False)
    assert recovered.leader_epoch_cache.entries == [
        (3, 0)
    ]  # restored from the batch, the stale entry gone
    assert (path / CHECKPOINT).read_text() == "0\n1\n3 0\n"
    recovered.close()


def test_idempotent_producer_state_survives_a_clean_restart_from_the_snapshot(tmp_path) -> None:
    path = tmp_path / "t-0"
    log = Log(path, LogConfig())
    first = build_batch([(b"k", b"v", NOW)] * 3, producer_id=7, producer_epoch=0, base_sequence=0)
    log.append(first, leader_epoch=0, now_ms=NOW)
    log.close()  # snapshot at the log end offset, 3

    reopened = Log(path, LogConfig(), clean_shutdown=True)
    entry = reopened.producer_state.producers[7]
    assert (entry.epoch, entry.last_seq, entry.batches[-1].first_offset) == (0, 2, 0)
    retried = reopened.append(first, leader_epoch=0, now_ms=NOW)
    assert retried.duplicate and retried.first_offset == 0
    reopened.close()


def test_a_clean_load_still_removes_what_a_crash_left_behind(tmp_path) -> None:
    lm = LogManager([str(tmp_path)], LogConfig())
    lm.startup()
    (log,) = lm.get_or_create_logs([TopicPartition("t", 0)])
    log.append(build_batch([(b"k", b"v", NOW)]), leader_epoch=0, now_ms=NOW)
    lm.shutdown()
    for leftover in ("00000000000000000000.log.deleted", "00000000000000000007.index", "x.tmp"):
        (log.dir / leftover).write_bytes(b"\0" * 8)

    again = LogManager([str(tmp_path)], LogConfig())
    again.startup()
    reloaded = again.get_log(TopicPartition("t", 0))
    assert not {"00000000000000000000.log.deleted", "00000000000000000007.index", "x.tmp"} & set(
        os.listdir(reloaded.dir)
    )
    assert reloaded.log_end_offset == 1
    again.shutdown()


def test_read_small_file_reads_past_a_size_that_fstat_got_wrong() -> None:
    # /proc files report size 0 and have content: the read must go on to the real end.
    from pathlib import Path

    from odradek.storage.checkpoint import read_small_file

    status = read_small_file(Path("/proc/self/status"))
    assert status.startswith(b"Name:") and b"\nPid:" in status
