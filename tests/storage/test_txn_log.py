"""The log side of transactions, case by case: markers, the last stable offset, the .txnindex
(format, recovery, deletion), producer snapshots with open transactions, and DeleteRecords."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from spec import build_batch

from odradek.protocol import records as rb
from odradek.storage import Log, LogConfig, errors
from odradek.storage.cleaner import LogCleaner
from odradek.storage.records_builder import delete_horizon_ms, read_records
from odradek.storage.txn_index import AbortedTxn

NOW = 1_700_000_000_000


def data(log: Log, pid: int, seq: int, count: int = 1, transactional: bool = True) -> int:
    """Append a producer batch; its first offset."""
    batch = build_batch(
        [(None, b"value", NOW)] * count,
        producer_id=pid,
        producer_epoch=0,
        base_sequence=seq,
        attributes=rb.TRANSACTIONAL_MASK if transactional else 0,
    )
    return log.append(batch, leader_epoch=0, now_ms=NOW).first_offset


def marker(log: Log, pid: int, commit: bool, coordinator_epoch: int = 0, epoch: int = 0) -> int:
    batch = rb.control_batch(pid, epoch, commit, coordinator_epoch, NOW)
    return log.append(batch, leader_epoch=0, now_ms=NOW, from_client=False).first_offset


def txn_entries(log: Log) -> list[AbortedTxn]:
    return [t for seg in log.segments for t in seg.txn_index.entries]


@pytest.fixture
def log(tmp_path: Path) -> Log:
    return Log(tmp_path / "t-0", LogConfig(), now_ms=NOW)


def test_control_batch_round_trip() -> None:
    batch = rb.control_batch(7, 3, False, 12, NOW)
    (parsed,) = rb.iter_batches(batch)
    assert parsed.is_control and parsed.is_transactional
    assert (parsed.producer_id, parsed.producer_epoch, parsed.base_sequence) == (7, 3, -1)
    assert rb.end_txn_marker(batch, 0, len(batch)) == rb.EndTxnMarker(False, 12)


def test_clients_cannot_write_markers(log: Log) -> None:
    with pytest.raises(errors.InvalidRecord):
        log.append(rb.control_batch(1, 0, True, 0, NOW), leader_epoch=0, now_ms=NOW)


def test_abort_index_entry_and_last_stable_offset(log: Log) -> None:
    data(log, 1, 0)  # 0: producer 1 opens
    data(log, 2, 0, count=2)  # 1-2: producer 2 opens
    assert log.last_stable_offset(log.log_end_offset) == 0
    marker(log, 2, commit=False)  # 3: producer 2 aborts while producer 1 is open at 0
    assert txn_entries(log) == [AbortedTxn(2, 1, 3, 0)]
    assert log.last_stable_offset(log.log_end_offset) == 0
    marker(log, 1, commit=True)  # 4
    # A completed transaction stays unstable until its marker is below the high watermark.
    assert log.last_stable_offset(4) == 0
    assert log.last_stable_offset(5) == 5


def test_txnindex_file_is_kafkas_format(log: Log) -> None:
    data(log, 9, 0)
    marker(log, 9, commit=False)
    raw = (log.dir / f"{0:020d}.txnindex").read_bytes()
    assert raw == struct.pack(">hqqqq", 0, 9, 0, 1, 2)


def test_stale_epochs_are_refused_and_change_nothing(log: Log) -> None:
    data(log, 1, 0)
    marker(log, 1, commit=False, coordinator_epoch=5)
    data(log, 1, 1)
    leo = log.log_end_offset
    with pytest.raises(errors.TransactionCoordinatorFenced):
        marker(log, 1, commit=True, coordinator_epoch=4)
    log.append(rb.control_batch(1, 1, False, 5, NOW), leader_epoch=0, now_ms=NOW, from_client=False)
    with pytest.raises(errors.InvalidProducerEpoch):
        marker(log, 1, commit=True, coordinator_epoch=5, epoch=0)
    assert log.log_end_offset == leo + 1
    assert log.producer_state.producers[1].current_txn_first_offset == -1


def test_read_committed_fetch_returns_aborted_transactions_of_what_it_read(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", LogConfig(segment_bytes=300), now_ms=NOW)
    data(log, 1, 0)
    marker(log, 1, commit=False)  # aborted transaction 0..1
    data(log, 2, 0, transactional=False)
    data(log, 3, 0)
    marker(log, 3, commit=False)  # aborted transaction 3..4
    assert len(log.segments) > 1
    everything = log.read(0, 1 << 20, max_offset=log.log_end_offset, aborted_transactions=True)
    assert everything.aborted_transactions == [AbortedTxn(1, 0, 1, 2), AbortedTxn(3, 3, 4, 5)]
    # One batch read: only the transaction overlapping it.
    first = log.read(0, 1, max_offset=log.log_end_offset, aborted_transactions=True)
    assert first.aborted_transactions == [AbortedTxn(1, 0, 1, 2)]
    later = log.read(2, 1, max_offset=log.log_end_offset, aborted_transactions=True)
    assert later.aborted_transactions == []
    assert log.read(0, 1 << 20).aborted_transactions is None


def test_snapshot_keeps_open_transactions(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", LogConfig(), now_ms=NOW)
    data(log, 1, 0, transactional=False)
    data(log, 2, 0)
    marker(log, 2, commit=True, coordinator_epoch=3)
    data(log, 2, 1)
    log.close()
    reopened = Log(tmp_path / "t-0", LogConfig(), clean_shutdown=True, now_ms=NOW)
    entry = reopened.producer_state.producers[2]
    assert (entry.coordinator_epoch, entry.current_txn_first_offset) == (3, 3)
    assert reopened.last_stable_offset(reopened.log_end_offset) == 3
    with pytest.raises(errors.InvalidTxnState):
        data(reopened, 2, 2, transactional=False)


def test_recovery_rebuilds_a_lost_txnindex_entry(tmp_path: Path) -> None:
    """A crash between the marker's write and its index entry's: recovery's replay adds it."""
    log = Log(tmp_path / "t-0", LogConfig(), now_ms=NOW)
    data(log, 1, 0)
    marker(log, 1, commit=False)
    data(log, 2, 0)
    marker(log, 2, commit=False)
    index = log.dir / f"{0:020d}.txnindex"
    for seg in log.segments:
        seg.close()
    index.write_bytes(index.read_bytes()[:34])  # the second entry never reached the file
    recovered = Log(tmp_path / "t-0", LogConfig(), clean_shutdown=False, now_ms=NOW)
    assert txn_entries(recovered) == [AbortedTxn(1, 0, 1, 2), AbortedTxn(2, 2, 3, 4)]


def test_truncation_and_segment_deletion_take_their_entries(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", LogConfig(segment_bytes=200), now_ms=NOW)
    data(log, 1, 0)
    marker(log, 1, commit=False)
    data(log, 2, 0, transactional=False)
    data(log, 3, 0)
    marker(log, 3, commit=False)
    first_index = log.dir / f"{0:020d}.txnindex"
    assert first_index.exists()
    log.truncate_to(4)
    assert txn_entries(log) == [AbortedTxn(1, 0, 1, 2)]
    assert log.log_end_offset == 4 and log.active.size == 0  # the entry went with its marker
    assert log.producer_state.producers[3].current_txn_first_offset == 3
    log.roll(NOW)
    log.maybe_increment_log_start_offset(3, NOW)
    log.remove_deleted_files(NOW + 10**9)
    assert not first_index.exists()
    assert txn_entries(log) == []


def test_log_start_offset_passing_an_open_transaction_bounds_the_lso(log: Log) -> None:
    data(log, 1, 0)  # 0: open
    data(log, 2, 0, transactional=False)  # 1
    log.maybe_increment_log_start_offset(1, NOW)
    assert log.last_stable_offset(log.log_end_offset) == 1
    marker(log, 1, commit=False)
    assert log.last_stable_offset(log.log_end_offset) == log.log_end_offset


COMPACTED = LogConfig(
    cleanup_policy=("compact",),
    segment_bytes=300,
    min_cleanable_dirty_ratio=0.01,
    delete_retention_ms=1000,
)


def keyed(log: Log, pid: int, seq: int, key: bytes, value: bytes, transactional: bool) -> int:
    batch = build_batch(
        [(key, value, NOW)],
        producer_id=pid,
        producer_epoch=0,
        base_sequence=seq,
        attributes=rb.TRANSACTIONAL_MASK if transactional else 0,
    )
    return log.append(batch, leader_epoch=0, now_ms=NOW).first_offset


def clean(log: Log) -> bool:
    cleaner = LogCleaner()
    plan = cleaner.prepare(log, NOW + 10)
    return plan is not None and cleaner.install(log, plan, NOW + 10)


def committed_values(log: Log) -> dict[bytes, bytes]:
    """Key -> latest value, as a read_committed reader of the whole log sees them."""
    data = log.read(log.log_start_offset, 1 << 30, aborted_transactions=True)
    assert data.aborted_transactions is not None
    aborted = {(t.producer_id, t.first_offset, t.last_offset) for t in data.aborted_transactions}
    out: dict[bytes, bytes] = {}
    blob = b"".join(r.read_bytes() for r in data.regions)
    for batch in rb.iter_batches(blob, strict_count=False):
        if batch.is_control or any(
            pid == batch.producer_id and first <= batch.base_offset < last
            for pid, first, last in aborted
        ):
            continue
        for record in read_records(batch):
            assert record.key is not None
            out[record.key] = record.payload[record.tail_start :]
    return out


def test_cleaner_drops_aborted_records_and_keeps_the_committed_value(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", COMPACTED, now_ms=NOW)
    keyed(log, 1, 0, b"k", b"committed", transactional=True)
    marker(log, 1, commit=True)
    keyed(log, 2, 0, b"k", b"aborted", transactional=True)
    keyed(log, 2, 1, b"j", b"aborted", transactional=True)
    marker(log, 2, commit=False)
    keyed(log, 3, 0, b"x", b"filler", transactional=False)
    log.roll(NOW)
    before = txn_entries(log)
    assert before
    assert clean(log)
    # The aborted value did not hide the committed one; the aborted records are gone.
    data = log.read(0, 1 << 30)
    offsets = [
        b.base_offset
        for b in rb.iter_batches(b"".join(r.read_bytes() for r in data.regions), strict_count=False)
    ]
    assert 0 in offsets and 2 not in offsets and 3 in offsets  # 3: producer 2's last batch, empty
    assert txn_entries(log) == before  # the cleaned segment kept the group's index entries
    assert b"committed" in committed_values(log)[b"k"]
    reopened_entries = txn_entries(
        Log(tmp_path / "t-0", COMPACTED, clean_shutdown=False, now_ms=NOW)
    )
    assert reopened_entries == before


def test_cleaner_does_not_pass_an_open_transaction(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", COMPACTED, now_ms=NOW)
    keyed(log, 1, 0, b"k", b"v0", transactional=False)
    keyed(log, 1, 1, b"k", b"v1", transactional=False)
    log.roll(NOW)
    keyed(log, 2, 0, b"t", b"open", transactional=True)  # stays open
    log.roll(NOW)
    keyed(log, 1, 2, b"k", b"v2", transactional=False)
    keyed(log, 1, 3, b"k", b"v3", transactional=False)
    log.roll(NOW)
    assert clean(log)
    # Cleaned below the open transaction (offset 2) only: k's v1 stands for the first segment.
    assert log.cleaner_offset == 2
    values = [
        b.base_offset
        for b in rb.iter_batches(
            b"".join(r.read_bytes() for r in log.read(0, 1 << 30).regions), strict_count=False
        )
    ]
    assert values == [1, 2, 3, 4]


def test_a_follower_copy_rebuilds_the_leaders_transaction_state(tmp_path: Path) -> None:
    """A follower appends the leader's batches as they are, markers included, in one blob."""
    leader = Log(tmp_path / "leader-0", LogConfig(), now_ms=NOW)
    data(leader, 1, 0)
    data(leader, 2, 0)
    marker(leader, 1, commit=False)
    data(leader, 3, 0)
    marker(leader, 2, commit=True)
    blob = b"".join(r.read_bytes() for r in leader.read(0, 1 << 20).regions)
    follower = Log(tmp_path / "follower-0", LogConfig(), now_ms=NOW)
    follower.append(blob, leader_epoch=0, now_ms=NOW, assign_offsets=False)
    assert txn_entries(follower) == txn_entries(leader) == [AbortedTxn(1, 0, 2, 1)]
    assert follower.last_stable_offset(5) == leader.last_stable_offset(5) == 3
    assert follower.producer_state.ongoing == leader.producer_state.ongoing == {3: 3}


def test_producers_with_an_open_transaction_do_not_expire(log: Log) -> None:
    data(log, 1, 0)
    data(log, 2, 0, transactional=False)
    log.producer_state.remove_expired(NOW + 10 * log.producer_state.expiration_ms)
    assert list(log.producer_state.producers) == [1]


def batch_offsets(log: Log) -> list[int]:
    blob = b"".join(r.read_bytes() for r in log.read(log.log_start_offset, 1 << 30).regions)
    return [b.base_offset for b in rb.iter_batches(blob, strict_count=False)]


def marker_horizons(log: Log) -> dict[int, int | None]:
    """Offset -> delete horizon of each marker."""
    blob = b"".join(r.read_bytes() for r in log.read(log.log_start_offset, 1 << 30).regions)
    return {
        b.base_offset: delete_horizon_ms(b)
        for b in rb.iter_batches(blob, strict_count=False)
        if b.is_control
    }


def clean_at(log: Log, now: int) -> bool:
    cleaner = LogCleaner()
    plan = cleaner.prepare(log, now)
    return plan is not None and cleaner.install(log, plan, now)


def test_markers_go_once_their_transaction_is_gone_and_the_horizon_passed(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", COMPACTED, now_ms=NOW)
    keyed(log, 1, 0, b"k", b"old", transactional=True)  # 0
    marker(log, 1, commit=True)  # 1
    keyed(log, 2, 0, b"j", b"aborted", transactional=True)  # 2
    marker(log, 2, commit=False)  # 3
    # Later batches of the same producers: 0 and 2 are not their producers' last batches,
    # which would stay (empty) to keep the producers' sequences.
    keyed(log, 1, 1, b"k", b"new", transactional=False)  # 4: replaces offset 0
    keyed(log, 2, 1, b"j", b"kept", transactional=False)  # 5
    log.roll(NOW)
    # First cleaning: the transactions' records go, their markers stay (records were there).
    assert clean_at(log, NOW + 10)
    assert 0 not in batch_offsets(log) and 2 not in batch_offsets(log)
    assert marker_horizons(log) == {1: None, 3: None}
    log.append(build_batch([(b"z", b"z", NOW)]), leader_epoch=0, now_ms=NOW)
    log.roll(NOW)
    # Second: nothing of either transaction is left: the markers get a delete horizon.
    assert clean_at(log, NOW + 20)
    horizon = NOW + 20 + COMPACTED.delete_retention_ms
    assert marker_horizons(log) == {1: horizon, 3: horizon}
    log.append(build_batch([(b"y", b"y", NOW)]), leader_epoch=0, now_ms=NOW)
    log.roll(NOW)
    # After delete.retention.ms a cleaning removes them.
    assert clean_at(log, horizon)
    assert not {1, 3} & set(batch_offsets(log))
    assert 4 in batch_offsets(log) and 5 in batch_offsets(log)
