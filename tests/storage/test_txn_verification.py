"""The log side of KIP-890's transaction verification: the guard a verified append carries, a
marker written meanwhile turning it stale, the lowest sequence seen while verifying, and the
verification state's expiry."""

from __future__ import annotations

from pathlib import Path

import pytest
from spec import build_batch

from odradek.protocol import records as rb
from odradek.storage import Log, LogConfig, errors
from odradek.storage.producer_state import NO_GUARD, VerificationGuard

NOW = 1_700_000_000_000
PID, EPOCH = 7, 0


def append(log: Log, seq: int, guard: VerificationGuard | None, epoch: int = EPOCH, n: int = 1):
    batch = build_batch(
        [(None, b"v", NOW)] * n,
        producer_id=PID,
        producer_epoch=epoch,
        base_sequence=seq,
        attributes=rb.TRANSACTIONAL_MASK,
    )
    return log.append(batch, leader_epoch=0, now_ms=NOW, verification_guard=guard)


def two_batches(log: Log, seq: int, guard: VerificationGuard | None):
    """Two transactional batches in one request (the Python path of the log's checks)."""
    batches = b"".join(
        build_batch(
            [(None, b"v", NOW)],
            producer_id=PID,
            producer_epoch=EPOCH,
            base_sequence=seq + i,
            attributes=rb.TRANSACTIONAL_MASK,
        )
        for i in range(2)
    )
    return log.append(batches, leader_epoch=0, now_ms=NOW, verification_guard=guard)


def abort(log: Log) -> None:
    batch = rb.control_batch(PID, EPOCH, False, 0, NOW)
    log.append(batch, leader_epoch=0, now_ms=NOW, from_client=False)


@pytest.fixture
def log(tmp_path: Path) -> Log:
    return Log(tmp_path / "t-0", LogConfig(), now_ms=NOW)


@pytest.mark.parametrize("write", [append, two_batches])
def test_a_transaction_opens_only_with_its_verification_guard(log: Log, write) -> None:
    with pytest.raises(errors.InvalidTxnState):
        write(log, 0, NO_GUARD)  # verification applies, none was started
    state = log.producer_state
    guard = state.start_verification(PID, 0, EPOCH, NOW)
    assert state.start_verification(PID, 0, EPOCH, NOW) is guard  # a retry keeps it
    with pytest.raises(errors.InvalidTxnState):
        write(log, 0, VerificationGuard())  # someone else's guard
    write(log, 0, guard)
    assert PID not in state.verifying  # the transaction is open: the guard is spent
    following = state.producers[PID].last_seq + 1
    assert state.start_verification(PID, following, EPOCH, NOW) is NO_GUARD
    append(log, following, NO_GUARD)  # later batches of the open transaction need none


def test_a_marker_in_between_makes_the_verification_stale(log: Log) -> None:
    state = log.producer_state
    append(log, 0, state.start_verification(PID, 0, EPOCH, NOW))
    guard = state.start_verification(PID, 1, EPOCH, NOW)
    assert guard is NO_GUARD  # open here: no verification
    abort(log)
    # The next transaction's first batch starts verifying; its coordinator confirms, but
    # an abort marker (a late one, or of a timed-out transaction) arrives first.
    guard = state.start_verification(PID, 1, EPOCH, NOW)
    abort(log)
    with pytest.raises(errors.InvalidTxnState):
        append(log, 1, guard)
    assert log.producer_state.ongoing == {}


def test_verification_does_not_apply_without_a_guard(log: Log) -> None:
    append(log, 0, None)  # verification off, or not a client's append
    assert list(log.producer_state.ongoing.values()) == [PID]


def test_no_batch_passes_the_lowest_sequence_seen_while_verifying(log: Log) -> None:
    state = log.producer_state
    state.start_verification(PID, 5, EPOCH, NOW)
    guard = state.start_verification(PID, 3, EPOCH, NOW)  # a lower one of the same epoch
    assert state.verifying[PID].lowest_sequence == 3
    with pytest.raises(errors.OutOfOrderSequence):
        append(log, 5, guard)
    state.start_verification(PID, 9, EPOCH + 1, NOW)  # a new epoch starts sequences over
    assert (state.verifying[PID].epoch, state.verifying[PID].lowest_sequence) == (EPOCH + 1, 9)


def test_stale_verifications_expire_with_producer_ids(log: Log) -> None:
    state = log.producer_state
    state.start_verification(PID, 0, EPOCH, NOW)
    state.remove_expired(NOW + state.expiration_ms - 1)
    assert PID in state.verifying
    state.remove_expired(NOW + state.expiration_ms)
    assert PID not in state.verifying


def test_a_late_version_2_marker_does_not_end_the_next_transaction(log: Log) -> None:
    """Transactions version 2: a transaction's records carry epoch e and its marker e + 1,
    the epoch of the producer's next transaction, which a late copy must not end."""
    append(log, 0, None)

    def marker(epoch: int) -> None:
        batch = rb.control_batch(PID, epoch, True, 0, NOW)
        log.append(batch, leader_epoch=0, now_ms=NOW, from_client=False, transaction_version=2)

    marker(EPOCH + 1)
    marker(EPOCH + 1)  # a retried copy while nothing is open: completes nothing
    append(log, 0, None, epoch=EPOCH + 1)  # the next transaction
    with pytest.raises(errors.InvalidProducerEpoch):
        marker(EPOCH + 1)
    assert list(log.producer_state.ongoing.values()) == [PID]
    marker(EPOCH + 2)
    assert log.producer_state.ongoing == {}
