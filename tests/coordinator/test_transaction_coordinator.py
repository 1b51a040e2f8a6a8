"""The sans-I/O TransactionCoordinator: Kafka's transitions, and a model test of random
interleavings (producer instances sharing transactional ids, markers delivered late,
timeouts, coordinator reloads from its own records)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from odradek.coordinator.transaction.config import TransactionConfig
from odradek.coordinator.transaction.coordinator import TransactionCoordinator
from odradek.coordinator.transaction.metadata import (
    IllegalTransition,
    TransactionMetadata,
    TransactionState,
)
from odradek.coordinator.transaction.records import decode_value
from odradek.protocol.errors import ErrorCode
from odradek.storage import TopicPartition

S = TransactionState
CONFIG = TransactionConfig(
    transaction_state_log_num_partitions=3,
    transaction_abort_timed_out_transaction_cleanup_interval_ms=100,
    transaction_remove_expired_transaction_cleanup_interval_ms=1000,
    transactional_id_expiration_ms=5000,
)
TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


def new_core() -> TransactionCoordinator:
    ids = itertools.count(1000)
    return TransactionCoordinator(CONFIG, lambda: next(ids))


def replayed(core: TransactionCoordinator, log: list) -> TransactionCoordinator:
    """A fresh core loaded from ``log`` (every record ``core`` wrote)."""
    fresh = new_core()
    for record in log:
        fresh.load_record(record.key, record.value, 0)
    return fresh


def test_illegal_transitions_are_refused() -> None:
    meta = TransactionMetadata("x", 1, 0, 100, S.EMPTY)
    with pytest.raises(IllegalTransition):
        meta.transition(S.PREPARE_COMMIT, 0)
    meta.transition(S.ONGOING, 0)
    with pytest.raises(IllegalTransition):
        meta.transition(S.COMPLETE_COMMIT, 0)


def test_commit_in_two_phases() -> None:
    core = new_core()
    got = core.init_producer_id("a", 1000, -1, -1, now_ms=0)
    assert (got.error, got.producer_epoch) == (ErrorCode.none, 0)
    pid = got.producer_id
    assert core.add_partitions("a", pid, 0, [TP0, TP1], now_ms=1) == ErrorCode.none
    assert core.end_txn("a", pid, 0, True, now_ms=2) == ErrorCode.none
    (markers,) = core.drain_markers()
    assert (markers.commit, markers.partitions, markers.producer_epoch) == (
        True,
        frozenset({TP0, TP1}),
        0,
    )
    # Until the markers are written, the next transaction waits.
    assert core.add_partitions("a", pid, 0, [TP0], now_ms=3) == ErrorCode.concurrent_transactions
    assert core.init_producer_id("a", 1000, -1, -1, now_ms=3).error == (
        ErrorCode.concurrent_transactions
    )
    core.complete_markers("a", pid, 0, True, now_ms=4)
    assert core.transactions["a"].state == S.COMPLETE_COMMIT
    assert core.end_txn("a", pid, 0, True, now_ms=5) == ErrorCode.none  # a retry
    states = [decode_value(r.value).transaction_status for r in core.drain_records()]
    assert states == [S.EMPTY.id, S.ONGOING.id, S.PREPARE_COMMIT.id, S.COMPLETE_COMMIT.id]


def test_a_prepared_transaction_has_its_markers_sent_again_after_a_reload() -> None:
    core = new_core()
    pid = core.init_producer_id("a", 1000, -1, -1, now_ms=0).producer_id
    core.add_partitions("a", pid, 0, [TP0], now_ms=1)
    core.end_txn("a", pid, 0, False, now_ms=2)
    fresh = replayed(core, core.drain_records())
    fresh.loaded(fresh.partition_for("a"))
    (markers,) = fresh.drain_markers()
    assert (markers.commit, markers.partitions) == (False, frozenset({TP0}))


def test_ids_expire_once_idle() -> None:
    core = new_core()
    core.init_producer_id("a", 1000, -1, -1, now_ms=0)
    core.drain_records()
    assert core.due_transactions(999) == []
    assert core.due_transactions(1000) == []  # not idle for 5 s yet
    assert core.due_transactions(6000) == [("expire", "a")]
    core.expire("a", now_ms=6000)
    (tombstone,) = core.drain_records()
    assert tombstone.value is None and "a" not in core.transactions


class CoordinatorModel(RuleBasedStateMachine):
    """Producer instances call the coordinator in any order; markers arrive whenever; the
    coordinator may be rebuilt from its records at any point."""

    def __init__(self) -> None:
        super().__init__()
        self.core = new_core()
        self.log: list = []
        self.now = 0
        #: instance -> (transactional id, producer id, epoch) it was granted
        self.instances: dict[int, tuple[str, int, int]] = {}
        self.highest: dict[str, tuple[int, int]] = {}
        self.next_instance = 0

    def _drain(self) -> None:
        self.log += self.core.drain_records()

    @rule(tid=st.sampled_from(["a", "b"]), timeout=st.sampled_from([50, 10_000]))
    def init(self, tid: str, timeout: int) -> None:
        got = self.core.init_producer_id(tid, timeout, -1, -1, now_ms=self.now)
        self._drain()
        if got.error == ErrorCode.none:
            self.instances[self.next_instance] = (tid, got.producer_id, got.producer_epoch)
            self.next_instance += 1
        else:
            assert got.error == ErrorCode.concurrent_transactions

    @rule(data=st.data(), parts=st.sets(st.sampled_from([TP0, TP1]), min_size=1))
    def add(self, data, parts) -> None:
        if not self.instances:
            return
        tid, pid, epoch = self.instances[data.draw(st.sampled_from(sorted(self.instances)))]
        error = self.core.add_partitions(tid, pid, epoch, parts, now_ms=self.now)
        self._drain()
        meta = self.core.transactions[tid]
        if error == ErrorCode.none:
            # Only the current holder of the id gets through, into an ongoing transaction.
            assert (meta.producer_id, meta.producer_epoch) == (pid, epoch)
            assert meta.state == S.ONGOING and parts <= meta.topic_partitions
        else:
            assert error in (ErrorCode.producer_fenced, ErrorCode.concurrent_transactions)

    @rule(data=st.data(), commit=st.booleans())
    def end(self, data, commit: bool) -> None:
        if not self.instances:
            return
        tid, pid, epoch = self.instances[data.draw(st.sampled_from(sorted(self.instances)))]
        before = self.core.transactions[tid].state
        error = self.core.end_txn(tid, pid, epoch, commit, now_ms=self.now)
        self._drain()
        if error == ErrorCode.none and before == S.ONGOING:
            assert self.core.transactions[tid].state == (
                S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
            )

    @rule()
    def deliver_markers(self) -> None:
        for m in self.core.drain_markers():
            meta = self.core.transactions[m.transactional_id]
            assert m.partitions and m.producer_epoch == meta.producer_epoch
            self.core.complete_markers(
                m.transactional_id, m.producer_id, m.producer_epoch, m.commit, now_ms=self.now
            )
        self._drain()

    @rule(ms=st.sampled_from([10, 200]))
    def tick(self, ms: int) -> None:
        self.now += ms
        actions = {"abort": self.core.abort_timed_out, "expire": self.core.expire}
        for action, tid in self.core.due_transactions(self.now):
            actions[action](tid, now_ms=self.now)
        self._drain()

    @rule()
    def reload(self) -> None:
        """The coordinator moves: a new one loads the records; prepared transactions get their
        markers again, the old core's undelivered ones are lost."""
        self.core = replayed(self.core, self.log)
        for partition in range(CONFIG.transaction_state_log_num_partitions):
            self.core.loaded(partition)

    @invariant()
    def the_log_replays_to_the_state_in_memory(self) -> None:
        fresh = replayed(self.core, self.log)
        view = {
            t: (m.producer_id, m.producer_epoch, m.state, m.topic_partitions)
            for t, m in self.core.transactions.items()
        }
        assert view == {
            t: (m.producer_id, m.producer_epoch, m.state, m.topic_partitions)
            for t, m in fresh.transactions.items()
        }

    @invariant()
    def epochs_only_grow(self) -> None:
        for tid, meta in self.core.transactions.items():
            current = (meta.producer_id, meta.producer_epoch)
            assert current >= self.highest.get(tid, current)
            self.highest[tid] = current
            assert meta.state in (S.EMPTY, S.ONGOING) or meta.state.state_name.startswith(
                ("Prepare", "Complete")
            )
            assert (meta.state == S.ONGOING) <= bool(meta.topic_partitions)


CoordinatorModel.TestCase.settings = settings(
    max_examples=60, stateful_step_count=40, deadline=None
)
test_coordinator_model = CoordinatorModel.TestCase


def test_a_retried_bump_is_answered_again_but_a_fenced_epoch_is_not() -> None:
    core = new_core()
    pid = core.init_producer_id("a", 1000, -1, -1, now_ms=0).producer_id
    assert core.init_producer_id("a", 1000, -1, -1, now_ms=1).producer_epoch == 1  # new instance
    fenced = core.init_producer_id("a", 1000, pid, 0, now_ms=2)
    assert fenced.error == ErrorCode.producer_fenced  # the old instance is not a retry
    bumped = core.init_producer_id("a", 1000, pid, 1, now_ms=3)  # KIP-360: its own bump
    assert (bumped.error, bumped.producer_epoch) == (ErrorCode.none, 2)
    retried = core.init_producer_id("a", 1000, pid, 1, now_ms=4)  # the response was lost
    assert (retried.error, retried.producer_epoch) == (ErrorCode.none, 2)
