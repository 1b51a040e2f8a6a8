"""Transactions version 2 (KIP-890 part 2) in the sans-I/O TransactionCoordinator: the epoch
bumped at every EndTxn and carried by the markers, retries recognized by the epoch before
the bump, the producer id moving on when the epoch runs out, and the log value v1 keeping
the client's transaction version across a reload."""

from __future__ import annotations

import itertools

from odradek.coordinator.transaction.config import TransactionConfig
from odradek.coordinator.transaction.coordinator import TransactionCoordinator
from odradek.coordinator.transaction.metadata import MAX_EPOCH, TransactionState
from odradek.coordinator.transaction.records import decode_value
from odradek.protocol.errors import ErrorCode
from odradek.storage import TopicPartition

S = TransactionState
CONFIG = TransactionConfig(transaction_state_log_num_partitions=3)
TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)
TV2 = 2


def new_core() -> TransactionCoordinator:
    ids = itertools.count(1000)
    return TransactionCoordinator(CONFIG, lambda: next(ids), transaction_version=2)


def begin(core: TransactionCoordinator, pid: int, epoch: int, now: int) -> None:
    """What a leader does for a version 2 client's first write (AddPartitionsToTxn v5)."""
    error = core.add_partitions(
        "a", pid, epoch, [TP0, TP1], now_ms=now, client_transaction_version=TV2
    )
    assert error == ErrorCode.none


def end(core: TransactionCoordinator, pid: int, epoch: int, commit: bool, now: int) -> ErrorCode:
    return core.end_txn("a", pid, epoch, commit, now_ms=now, client_transaction_version=TV2)


def complete(core: TransactionCoordinator, now: int) -> None:
    (markers,) = core.drain_markers()
    core.complete_markers(
        "a", markers.producer_id, markers.producer_epoch, markers.commit, now_ms=now
    )


def test_every_end_bumps_the_epoch_and_the_markers_carry_it() -> None:
    core = new_core()
    pid = core.init_producer_id("a", 1000, -1, -1, now_ms=0).producer_id
    begin(core, pid, 0, 1)
    assert end(core, pid, 0, True, 2) == ErrorCode.none
    assert core.end_txn_producer("a") == (pid, 1)  # what EndTxn v5 answers
    (markers,) = core.drain_markers()
    assert (markers.producer_epoch, markers.transaction_version) == (1, TV2)
    assert end(core, pid, 0, True, 3) == ErrorCode.concurrent_transactions  # retry, markers out
    assert end(core, pid, 1, True, 3) == ErrorCode.producer_fenced  # not a transaction of 1
    core.complete_markers("a", pid, 1, True, now_ms=4)
    assert end(core, pid, 0, True, 5) == ErrorCode.none  # a retry once completed
    assert core.end_txn_producer("a") == (pid, 1)
    # The next transaction runs in the bumped epoch; the old one is fenced.
    assert core.add_partitions("a", pid, 0, [TP0], now_ms=6) == ErrorCode.producer_fenced
    begin(core, pid, 1, 6)
    assert end(core, pid, 1, False, 7) == ErrorCode.none
    assert core.end_txn_producer("a") == (pid, 2)


def test_the_producer_id_moves_on_when_the_epoch_runs_out() -> None:
    core = new_core()
    pid = core.init_producer_id("a", 1000, -1, -1, now_ms=0).producer_id
    core.transactions["a"].producer_epoch = MAX_EPOCH
    begin(core, pid, MAX_EPOCH, 1)
    assert end(core, pid, MAX_EPOCH, True, 2) == ErrorCode.none
    new_pid, epoch = core.end_txn_producer("a")
    assert new_pid != pid and epoch == 0
    (markers,) = core.drain_markers()
    assert (markers.producer_id, markers.producer_epoch) == (pid, MAX_EPOCH + 1)
    core.complete_markers("a", pid, MAX_EPOCH + 1, True, now_ms=3)
    meta = core.transactions["a"]
    assert (meta.producer_id, meta.producer_epoch, meta.previous_producer_id) == (new_pid, 0, pid)
    assert end(core, pid, MAX_EPOCH, True, 4) == ErrorCode.none  # the old id's retry
    assert end(core, pid, MAX_EPOCH - 1, True, 4) == ErrorCode.invalid_producer_id_mapping
    begin(core, new_pid, 0, 5)


def test_clients_of_version_0_keep_their_epoch() -> None:
    core = new_core()
    pid = core.init_producer_id("a", 1000, -1, -1, now_ms=0).producer_id
    assert core.add_partitions("a", pid, 0, [TP0], now_ms=1) == ErrorCode.none
    assert core.end_txn("a", pid, 0, True, now_ms=2) == ErrorCode.none
    assert core.end_txn_producer("a") == (pid, 0)
    complete(core, 3)
    assert core.add_partitions("a", pid, 0, [TP0], now_ms=4) == ErrorCode.none


def test_the_client_version_survives_a_reload_in_value_v1() -> None:
    core = new_core()
    pid = core.init_producer_id("a", 1000, -1, -1, now_ms=0).producer_id
    begin(core, pid, 0, 1)
    end(core, pid, 0, True, 2)
    records = core.drain_records()
    assert all(r.value[:2] == b"\x00\x01" for r in records)  # value version 1
    assert decode_value(records[-1].value).client_transaction_version == TV2
    fresh = new_core()
    for record in records:
        fresh.load_record(record.key, record.value, 3)
    fresh.loaded(fresh.partition_for("a"))
    assert fresh.transactions["a"].client_transaction_version == TV2
    # Reloaded in PrepareCommit: a retry of the EndTxn before the bump is still recognized.
    assert fresh.end_txn("a", pid, 0, True, now_ms=4, client_transaction_version=TV2) == (
        ErrorCode.concurrent_transactions
    )
    complete(fresh, 5)
    assert fresh.transactions["a"].state == S.COMPLETE_COMMIT
