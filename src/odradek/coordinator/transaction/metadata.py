"""TransactionMetadata: one transactional id's state, and the states it moves through.

The states and their ids are Kafka's TransactionState (the id is what
__transaction_state stores, the name what DescribeTransactions and
ListTransactions report). A transition is checked against the states it may
come from, as Kafka's TransactionMetadata does, so a coordinator bug surfaces
as an error instead of a silently corrupted log.

Kafka keeps a "pending state" beside the current one while a log write is in
flight. Here a coordinator call writes its records before it returns (see
coordinator/runtime.py) and a failed write restores the snapshot, so there is
never a half-done transition to remember; the only wait that outlives a call,
the markers of PrepareCommit/PrepareAbort, is the Prepare state itself.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

from odradek.storage import TopicPartition

#: Kafka stops bumping at Short.MaxValue - 1 and moves to a fresh producer id.
MAX_EPOCH = 32767 - 1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
#: The transaction timeout of a two-phase commit (KIP-939) transaction: Kafka stores
#: Integer.MAX_VALUE, and that value is what marks the transaction as one no timeout aborts.
TWO_PHASE_TIMEOUT_MS = 2**31 - 1


class TransactionState(enum.Enum):
    """Kafka's TransactionState: (id in the log, name clients see)."""

    EMPTY = (0, "Empty")
    ONGOING = (1, "Ongoing")
    PREPARE_COMMIT = (2, "PrepareCommit")
    PREPARE_ABORT = (3, "PrepareAbort")
    COMPLETE_COMMIT = (4, "CompleteCommit")
    COMPLETE_ABORT = (5, "CompleteAbort")
    DEAD = (6, "Dead")
    PREPARE_EPOCH_FENCE = (7, "PrepareEpochFence")

    @property
    def id(self) -> int:
        return self.value[0]

    @property
    def state_name(self) -> str:
        return self.value[1]

    @classmethod
    def from_id(cls, state_id: int) -> TransactionState:
        for state in cls:
            if state.id == state_id:
                return state
        raise ValueError(f"unknown transaction state id {state_id}")

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        return next((s for s in cls if s.state_name == name), None)


S = TransactionState
#: state -> the states it may be entered from (Kafka's TransactionState.validPreviousStates).
VALID_PREVIOUS: dict[TransactionState, frozenset[TransactionState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}
#: States with no transaction open: a new one may begin, the id may expire.
COMPLETED = frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})
#: States whose markers are being written.
PREPARED = frozenset({S.PREPARE_COMMIT, S.PREPARE_ABORT})


class IllegalTransition(Exception):
    """A transition Kafka's state machine forbids: a coordinator bug, never a client error."""


@dataclass(slots=True)
class TransactionMetadata:
    """Kafka's TransactionMetadata for one transactional id."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    topic_partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_timestamp: int = -1
    txn_last_update_timestamp: int = -1
    #: The epoch before the last bump, so a producer retrying a bump (KIP-360) is recognized.
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    client_transaction_version: int = 0
    #: KIP-939: the epoch handed to the client that took over a prepared two-phase commit
    #: transaction (InitProducerId with KeepPreparedTxn); -1 when none did. Only that epoch may
    #: end the transaction, which keeps its own epoch until then (see two_phase.py).
    next_producer_epoch: int = NO_PRODUCER_EPOCH
    #: Transactions version 2: the producer id the id moves to once the markers of a
    #: transaction that exhausted the epoch are written (-1: none), and the one it had
    #: before that move, so that a retried EndTxn of the old id is recognized.
    next_producer_id: int = NO_PRODUCER_ID
    previous_producer_id: int = NO_PRODUCER_ID

    def copy(self) -> TransactionMetadata:
        return replace(self, topic_partitions=set(self.topic_partitions))

    def transition(self, state: TransactionState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS[state]:
            raise IllegalTransition(
                f"{self.transactional_id}: {self.state.state_name} -> {state.state_name}"
            )
        self.state = state
        self.txn_last_update_timestamp = now_ms

    def bump_epoch(self, last_producer_epoch: int) -> None:
        """The next epoch of the same producer id (the caller checks ``epoch_exhausted``).
        ``last_producer_epoch`` is what a retry of this bump may name (Kafka's
        lastProducerEpoch): the old epoch for a live producer's own bump (KIP-360), -1 when
        a new instance fences the old one, so that the old one cannot pass for a retry."""
        self.last_producer_epoch = last_producer_epoch
        self.producer_epoch += 1

    def bumps_epoch_per_transaction(self) -> bool:
        """Transactions version 2 (KIP-890): its last transaction's EndTxn bumped the epoch."""
        return self.client_transaction_version >= 2

    def is_two_phase(self) -> bool:
        """A two-phase commit transaction: it waits for its external coordinator, never timing out."""
        return self.txn_timeout_ms == TWO_PHASE_TIMEOUT_MS

    def epoch_exhausted(self) -> bool:
        return self.producer_epoch >= MAX_EPOCH

    def deadline_ms(self) -> int:
        """When an Ongoing transaction times out."""
        return self.txn_start_timestamp + self.txn_timeout_ms

    def partitions_by_topic(self) -> tuple[tuple[str, tuple[int, ...]], ...]:
        topics: dict[str, list[int]] = {}
        for tp in sorted(self.topic_partitions, key=lambda t: (t.topic, t.partition)):
            topics.setdefault(tp.topic, []).append(tp.partition)
        return tuple((topic, tuple(ids)) for topic, ids in topics.items())
