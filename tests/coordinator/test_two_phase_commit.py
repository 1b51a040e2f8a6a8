"""KIP-939 in the sans-I/O TransactionCoordinator: two-phase commit transactions never time out,
KeepPreparedTxn keeps a prepared transaction and hands out a next epoch that alone may end it,
and recovery can be run again after it died half-way."""

from __future__ import annotations

import itertools

from odradek.coordinator.transaction import two_phase
from odradek.coordinator.transaction.config import TransactionConfig
from odradek.coordinator.transaction.coordinator import TransactionCoordinator
from odradek.coordinator.transaction.metadata import TWO_PHASE_TIMEOUT_MS, TransactionState
from odradek.coordinator.transaction.records import decode_value
from odradek.protocol.errors import ErrorCode
from odradek.storage import TopicPartition

S = TransactionState
CONFIG = TransactionConfig(
    transaction_state_log_num_partitions=3,
    transaction_abort_timed_out_transaction_cleanup_interval_ms=100,
    transaction_two_phase_commit_enable=True,
)
TP = TopicPartition("t", 0)


def new_core() -> TransactionCoordinator:
    ids = itertools.count(1000)
    return TransactionCoordinator(CONFIG, lambda: next(ids))


def prepared(core: TransactionCoordinator, tid: str = "a") -> tuple[int, int]:
    """A two-phase commit transaction with data in TP, left Ongoing (prepared): its (pid, epoch)."""
    got = core.init_producer_id(tid, 0, -1, -1, now_ms=0, enable_two_phase=True)
    assert got.error == ErrorCode.none
    assert core.add_partitions(tid, got.producer_id, got.producer_epoch, [TP], now_ms=1) == (
        ErrorCode.none
    )
    return got.producer_id, got.producer_epoch


def test_two_phase_transactions_are_stored_with_kafkas_timeout_and_never_time_out() -> None:
    core = new_core()
    prepared(core)
    timeouts = {decode_value(r.value).transaction_timeout_ms for r in core.drain_records()}
    assert timeouts == {TWO_PHASE_TIMEOUT_MS}
    far = 40 * 24 * 3600 * 1000  # past the 24.8 days an Integer.MAX_VALUE timeout would last
    assert core.due_transactions(far) == []
    core.abort_timed_out("a", now_ms=far)
    assert core.transactions["a"].state == S.ONGOING


def test_an_ordinary_transaction_still_times_out_beside_it() -> None:
    core = new_core()
    prepared(core, "a")
    pid = core.init_producer_id("b", 50, -1, -1, now_ms=0).producer_id
    core.add_partitions("b", pid, 0, [TP], now_ms=0)
    assert core.due_transactions(200) == [("abort", "b")]


def test_keep_prepared_hands_out_a_next_epoch_and_commits_with_it() -> None:
    core = new_core()
    pid, epoch = prepared(core)
    core.drain_records()
    kept = core.init_producer_id(
        "a", 0, -1, -1, now_ms=5, enable_two_phase=True, keep_prepared=True
    )
    assert (kept.error, kept.producer_id, kept.producer_epoch) == (ErrorCode.none, pid, epoch + 1)
    assert (kept.ongoing_producer_id, kept.ongoing_producer_epoch) == (pid, epoch)
    assert core.transactions["a"].state == S.ONGOING and core.drain_records() == []
    # The old producer is fenced from now on, on every request.
    assert core.add_partitions("a", pid, epoch, [TP], now_ms=6) == ErrorCode.producer_fenced
    assert core.end_txn("a", pid, epoch, False, now_ms=6) == ErrorCode.producer_fenced
    assert core.end_txn("a", pid, epoch + 1, True, now_ms=7) == ErrorCode.none
    (markers,) = core.drain_markers()
    assert (markers.commit, markers.producer_epoch, markers.partitions) == (
        True,
        epoch + 1,
        frozenset({TP}),
    )
    core.complete_markers("a", pid, epoch + 1, True, now_ms=8)
    assert core.transactions["a"].state == S.COMPLETE_COMMIT


def test_recovery_can_run_again_and_fences_the_first_recovering_client() -> None:
    core = new_core()
    pid, epoch = prepared(core)
    first = core.init_producer_id(
        "a", 0, -1, -1, now_ms=5, enable_two_phase=True, keep_prepared=True
    )
    second = core.init_producer_id(
        "a", 0, -1, -1, now_ms=6, enable_two_phase=True, keep_prepared=True
    )
    # The transaction's own identity stays what its external coordinator recorded.
    assert (second.ongoing_producer_id, second.ongoing_producer_epoch) == (pid, epoch)
    assert second.producer_epoch == first.producer_epoch + 1
    assert core.end_txn("a", pid, first.producer_epoch, True, now_ms=7) == (
        ErrorCode.producer_fenced
    )
    assert core.end_txn("a", pid, second.producer_epoch, False, now_ms=8) == ErrorCode.none
    assert core.drain_markers()[0].commit is False


def test_the_next_epoch_is_not_written_so_a_reloaded_coordinator_keeps_the_prepared_state() -> None:
    core = new_core()
    pid, epoch = prepared(core)
    core.init_producer_id("a", 0, -1, -1, now_ms=5, enable_two_phase=True, keep_prepared=True)
    fresh = new_core()
    for record in core.drain_records():
        fresh.load_record(record.key, record.value, 0)
    meta = fresh.transactions["a"]
    assert (meta.state, meta.producer_epoch, meta.is_two_phase()) == (S.ONGOING, epoch, True)
    again = fresh.init_producer_id(
        "a", 0, -1, -1, now_ms=9, enable_two_phase=True, keep_prepared=True
    )
    assert (again.ongoing_producer_id, again.ongoing_producer_epoch) == (pid, epoch)


def test_without_keep_prepared_the_prepared_transaction_is_aborted_past_the_next_epoch() -> None:
    core = new_core()
    pid, _ = prepared(core)
    kept = core.init_producer_id(
        "a", 0, -1, -1, now_ms=5, enable_two_phase=True, keep_prepared=True
    )
    got = core.init_producer_id("a", 0, -1, -1, now_ms=6, enable_two_phase=True)
    assert got.error == ErrorCode.concurrent_transactions
    (markers,) = core.drain_markers()
    assert markers.commit is False and markers.producer_epoch > kept.producer_epoch
    # The holder of the next epoch is fenced too.
    assert core.end_txn("a", pid, kept.producer_epoch, True, now_ms=7) == (
        ErrorCode.producer_fenced
    )


def test_keep_prepared_refuses_an_ordinary_transaction_and_grants_a_completed_id() -> None:
    core = new_core()
    pid = core.init_producer_id("b", 1000, -1, -1, now_ms=0).producer_id
    core.add_partitions("b", pid, 0, [TP], now_ms=1)
    refused = core.init_producer_id(
        "b", 0, -1, -1, now_ms=2, enable_two_phase=True, keep_prepared=True
    )
    assert refused.error == ErrorCode.invalid_txn_state
    assert core.transactions["b"].state == S.ONGOING
    # Nothing open: an epoch bump as any InitProducerId, no ongoing transaction reported.
    fresh = core.init_producer_id(
        "c", 0, -1, -1, now_ms=3, enable_two_phase=True, keep_prepared=True
    )
    assert fresh.error == ErrorCode.none
    assert (fresh.ongoing_producer_id, fresh.ongoing_producer_epoch) == (-1, -1)


def test_request_errors() -> None:
    assert two_phase.request_error(None, True, True, False) is None  # idempotent producer
    assert two_phase.request_error("a", True, False, False) == (
        ErrorCode.transactional_id_authorization_failed
    )
    assert two_phase.request_error("a", False, True, True) == ErrorCode.invalid_request
    assert two_phase.request_error("a", True, True, True) is None
    assert two_phase.request_error("a", False, False, False) is None
