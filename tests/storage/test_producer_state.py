"""Idempotent producer checks: duplicates, sequence gaps, fencing, snapshots, expiration."""

from __future__ import annotations

import pytest
from spec import build_batch

from odradek.storage import Log, LogConfig, errors
from odradek.storage.producer_state import BatchMetadata


def send(log, pid, epoch, seq, n=1):
    return log.append(
        build_batch(
            [(b"k", b"v", 1000)] * n, producer_id=pid, producer_epoch=epoch, base_sequence=seq
        ),
        leader_epoch=0,
        now_ms=1000,
    )


def test_duplicates_of_last_five_batches(tmp_path):
    log = Log(tmp_path / "t-0", LogConfig())
    firsts = [send(log, 1, 0, seq * 2, 2).first_offset for seq in range(7)]
    for i in range(2, 7):  # the last five are recognised
        dup = send(log, 1, 0, i * 2, 2)
        assert dup.duplicate and dup.first_offset == firsts[i]
    with pytest.raises(errors.OutOfOrderSequence):  # too old to recognise
        send(log, 1, 0, 2, 2)
    assert log.log_end_offset == 14


def test_sequence_gap_and_epoch_fencing(tmp_path):
    log = Log(tmp_path / "t-0", LogConfig())
    send(log, 5, 3, 0)
    with pytest.raises(errors.OutOfOrderSequence) as exc:
        send(log, 5, 3, 2)
    assert exc.value.error_code == errors.OutOfOrderSequence.error_code
    with pytest.raises(errors.InvalidProducerEpoch):
        send(log, 5, 2, 1)
    with pytest.raises(errors.OutOfOrderSequence):
        send(log, 5, 4, 7)  # a new epoch starts at 0
    assert send(log, 5, 4, 0).first_offset == 1
    assert log.log_end_offset == 2


def test_multi_batch_request_is_all_or_nothing(tmp_path):
    log = Log(tmp_path / "t-0", LogConfig())
    good = build_batch([(b"k", b"v", 1)], producer_id=9, producer_epoch=0, base_sequence=0)
    gap = build_batch([(b"k", b"v", 1)], producer_id=9, producer_epoch=0, base_sequence=5)
    with pytest.raises(errors.OutOfOrderSequence):
        log.append(good + gap, leader_epoch=0, now_ms=0)
    assert log.log_end_offset == 0
    assert log.append(good, leader_epoch=0, now_ms=0).first_offset == 0


def test_snapshot_survives_clean_restart(tmp_path):
    path = tmp_path / "t-0"
    log = Log(path, LogConfig())
    send(log, 1, 0, 0, 3)
    log.close()
    assert (path / "00000000000000000003.snapshot").exists()
    log = Log(path, LogConfig(), clean_shutdown=True, recovery_point=3)
    assert send(log, 1, 0, 0, 3).duplicate
    with pytest.raises(errors.OutOfOrderSequence):
        send(log, 1, 0, 4)


def test_producer_expiration(tmp_path):
    log = Log(tmp_path / "t-0", LogConfig(), producer_id_expiration_ms=500)
    send(log, 1, 0, 0)
    log.producer_state.remove_expired(now_ms=1400)
    assert 1 in log.producer_state.producers
    log.producer_state.remove_expired(now_ms=1500)
    assert 1 not in log.producer_state.producers


def test_batches_can_be_read_while_the_loop_appends(tmp_path, monkeypatch):
    """The cleaner reads ``entry.batches`` from its thread while the event loop appends to the
    same entry in place. Here the append lands in the middle of the read, deterministically: the
    read walks a copy, so it neither fails (a deque mutated while iterated raises) nor mixes states."""
    log = Log(tmp_path / "t-0", LogConfig())
    for seq in range(3):
        send(log, 1, 0, seq)
    entry = log.producer_state.producers[1]
    make = BatchMetadata._make
    appended = []

    def make_while_the_loop_appends(batch):
        if not appended:
            appended.append(send(log, 1, 0, 3))
        return make(batch)

    monkeypatch.setattr(BatchMetadata, "_make", staticmethod(make_while_the_loop_appends))
    assert [b.first_seq for b in entry.batches] == [0, 1, 2]
    monkeypatch.undo()
    assert [b.first_seq for b in entry.batches] == [0, 1, 2, 3]


def test_a_batch_with_a_producer_id_but_no_sequence_is_invalid(tmp_path):
    """Kafka's LogValidator.validateBatch refuses a client's batch carrying a producer id
    without a sequence number (INVALID_RECORD), before any producer state is looked at;
    before, such a batch skipped the checks and a stale epoch even replaced the producer's entry."""
    log = Log(tmp_path / "t-0", LogConfig())
    send(log, 9, 4, 0)
    for epoch in (3, 4, 5):
        with pytest.raises(errors.InvalidRecord):
            send(log, 9, epoch, -1)
    with pytest.raises(errors.InvalidRecord):
        send(log, 10, 0, -1)  # an unknown producer alike
    assert send(log, 9, 4, 1).first_offset == 1  # the producer's state is untouched
    assert log.log_end_offset == 2


def test_clients_cannot_write_control_batches(tmp_path):
    """Kafka's LogValidator: "Clients are not allowed to write control records" (INVALID_RECORD)."""
    log = Log(tmp_path / "t-0", LogConfig())
    control = build_batch(
        [(b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00", 1000)],
        producer_id=7,
        producer_epoch=0,
        base_sequence=0,
        attributes=0x20,
    )
    with pytest.raises(errors.InvalidRecord, match="control records"):
        log.append(control, leader_epoch=0, now_ms=1000)
    assert log.log_end_offset == 0
