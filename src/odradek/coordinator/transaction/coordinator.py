"""TransactionCoordinator: the sans-I/O core of Kafka's transaction coordinator.

It owns the TransactionMetadata of every transactional id whose
__transaction_state partition is loaded here, decides each request as Kafka's
TransactionCoordinator does, and queues what the shell must do: records for its log
(``drain_records``) and transaction markers for the partitions of a prepared
transaction (``drain_markers``).

Two protocols are served side by side, chosen per request as Kafka chooses them. A
client of transactions version 0/1 (KIP-98 and KIP-360: the epoch is bumped by
InitProducerId, not per transaction) adds its partitions itself and ends with EndTxn
before v5. A client of version 2 (KIP-890) has its partitions added by their leaders
(AddPartitionsToTxn v5 from a broker, not VerifyOnly) and ends with EndTxn v5: every
EndTxn bumps the epoch, the markers carry the bumped epoch (so a late write of the
ended transaction is fenced on every partition), and the client is answered the new
epoch; when the epoch would pass its maximum the id moves to a new producer id once
the markers are written (``next_producer_id``), and a retried EndTxn is recognized by
the epoch before the bump (or the producer id before the move). The version of the last
transaction is kept in ``client_transaction_version`` and in the log's value (v1).

A transaction ends in two steps, as in Kafka: EndTxn moves Ongoing to
PrepareCommit/PrepareAbort and is answered once that record is written; the
shell then writes the markers to every partition and calls ``complete_markers``,
which moves it to CompleteCommit/CompleteAbort. Until then the next
InitProducerId, AddPartitionsToTxn or EndTxn gets CONCURRENT_TRANSACTIONS. A
transaction found prepared when a partition is loaded (the coordinator moved or
restarted between the two steps) has its markers queued again: markers are
idempotent on the partitions.

Time is an argument (``now_ms``) and producer ids come from an injected
function, so the core runs in unit and property tests without a broker.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from odradek.coordinator.batches import CoordinatorRecord
from odradek.coordinator.hashing import partition_for
from odradek.coordinator.records import OFFSETS_TOPIC
from odradek.coordinator.transaction import records as rec
from odradek.coordinator.transaction import two_phase
from odradek.coordinator.transaction.config import TransactionConfig
from odradek.coordinator.transaction.metadata import (
    COMPLETED,
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    PREPARED,
    TWO_PHASE_TIMEOUT_MS,
    TransactionMetadata,
    TransactionState,
)
from odradek.protocol.errors import ErrorCode
from odradek.storage import TopicPartition

S = TransactionState
#: The __transaction_state value version written from transaction.version 1 on (0 before).
FLEXIBLE_VALUE_VERSION = 1
#: EndTxn's client transaction version: 2 bumps the epoch at every transaction's end.
EPOCH_BUMP_VERSION = 2


@dataclass(frozen=True, slots=True)
class InitProducerIdResult:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    #: KIP-939 (KeepPreparedTxn): the kept transaction's own producer id and epoch.
    ongoing_producer_id: int = NO_PRODUCER_ID
    ongoing_producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class TxnMarkers:
    """Markers to write for one prepared transaction (Kafka's TxnMarkerEntry per leader)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: frozenset[TopicPartition]
    #: The transaction's client transaction version (WriteTxnMarkers v2 carries it).
    transaction_version: int = 0


class TransactionCoordinator:
    """The transactional ids of the loaded __transaction_state partitions and their state."""

    def __init__(
        self,
        config: TransactionConfig,
        generate_producer_id: Callable[[], int],
        transaction_version: int = 0,
    ) -> None:
        self.config = config
        self._generate_producer_id = generate_producer_id
        #: The finalized transaction.version: the log's value version follows it.
        self.value_version = FLEXIBLE_VALUE_VERSION if transaction_version >= 1 else 0
        self.transactions: dict[str, TransactionMetadata] = {}
        self._records: list[CoordinatorRecord] = []
        self._markers: list[TxnMarkers] = []
        #: When the timers next look for timed-out transactions and expired ids.
        self._next_abort_check_ms: int | None = None
        self._next_expire_check_ms: int | None = None

    # ---- runtime protocol -------------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.transaction_state_log_num_partitions)

    def load_record(
        self, key: bytes, value: bytes | None, now_ms: int, producer_id: int = -1
    ) -> None:
        """Replay one __transaction_state record; the last record for an id wins (the topic
        holds no transactional batches, so ``producer_id`` is always -1)."""
        tid = rec.decode_key(key)
        if value is None:
            self.transactions.pop(tid, None)
            return
        v = rec.decode_value(value)
        state = S.from_id(v.transaction_status)
        self.transactions[tid] = TransactionMetadata(
            tid,
            v.producer_id,
            v.producer_epoch,
            v.transaction_timeout_ms,
            state,
            {
                TopicPartition(topic, p)
                for topic, ids in (v.transaction_partitions or ())
                for p in ids
            }
            if state != S.EMPTY
            else set(),
            v.start_timestamp_ms,
            v.last_update_timestamp_ms,
            client_transaction_version=v.client_transaction_version,
            next_producer_id=v.next_producer_id,
            previous_producer_id=v.previous_producer_id,
        )
        self._arm(now_ms)

    def replay_end_transaction(
        self, partition: int, producer_id: int, commit: bool, now_ms: int
    ) -> None:
        """__transaction_state holds no transaction markers; Kafka's loader skips control
        batches too."""

    def loaded(self, partition: int) -> None:
        """A partition's records are all replayed: resend the markers of its prepared
        transactions (Kafka's TransactionMarkerChannelManager after loading)."""
        for meta in self.transactions.values():
            if meta.state in PREPARED and self.partition_for(meta.transactional_id) == partition:
                self._queue_markers(meta)

    def unload_partition(self, partition: int) -> list[str]:
        dropped = [t for t in self.transactions if self.partition_for(t) == partition]
        for tid in dropped:
            del self.transactions[tid]
        return dropped

    def drain_records(self) -> list[CoordinatorRecord]:
        out, self._records = self._records, []
        return out

    def drain_markers(self) -> list[TxnMarkers]:
        out, self._markers = self._markers, []
        return out

    def snapshot(self, keys: Iterable[str]) -> dict[str, TransactionMetadata | None]:
        return {
            k: (m.copy() if (m := self.transactions.get(k)) is not None else None) for k in keys
        }

    def restore(self, snapshot: dict[str, TransactionMetadata | None]) -> None:
        for tid, meta in snapshot.items():
            if meta is None:
                self.transactions.pop(tid, None)
            else:
                self.transactions[tid] = meta
        self._records.clear()
        self._markers.clear()

    def next_deadline_ms(self) -> int | None:
        return min(
            (d for d in (self._next_abort_check_ms, self._next_expire_check_ms) if d is not None),
            default=None,
        )

    # ---- InitProducerId ---------------------------------------------------------------------

    def init_producer_id(
        self,
        transactional_id: str,
        transaction_timeout_ms: int,
        expected_producer_id: int,
        expected_producer_epoch: int,
        *,
        now_ms: int,
        enable_two_phase: bool = False,
        keep_prepared: bool = False,
    ) -> InitProducerIdResult:
        """Kafka's handleInitProducerId for a transactional id; with ``enable_two_phase`` and
        ``keep_prepared``, KIP-939's (see two_phase.py; the handler checked the flags)."""
        if enable_two_phase:
            transaction_timeout_ms = TWO_PHASE_TIMEOUT_MS  # no timeout to validate or apply
        elif not 0 < transaction_timeout_ms <= self.config.transaction_max_timeout_ms:
            return InitProducerIdResult(ErrorCode.invalid_transaction_timeout)
        meta = self.transactions.get(transactional_id)
        if meta is None:
            meta = TransactionMetadata(
                transactional_id,
                self._generate_producer_id(),
                0,
                transaction_timeout_ms,
                S.EMPTY,
                txn_last_update_timestamp=now_ms,
            )
            self.transactions[transactional_id] = meta
            self._write(meta)
            self._arm(now_ms)
            return InitProducerIdResult(ErrorCode.none, meta.producer_id, meta.producer_epoch)
        if meta.state in PREPARED or meta.state in (S.DEAD, S.PREPARE_EPOCH_FENCE):
            return InitProducerIdResult(ErrorCode.concurrent_transactions)
        if keep_prepared and meta.state == S.ONGOING:
            error, epoch = two_phase.keep_prepared(meta, expected_producer_id, now_ms)
            if error != ErrorCode.none:
                return InitProducerIdResult(error)
            return InitProducerIdResult(
                ErrorCode.none, meta.producer_id, epoch, meta.producer_id, meta.producer_epoch
            )
        if expected_producer_id != NO_PRODUCER_ID:
            # KIP-360: a live producer bumping its own epoch; a retry of a bump already done
            # gets the current id and epoch again.
            if expected_producer_id != meta.producer_id or expected_producer_epoch not in (
                meta.producer_epoch,
                meta.last_producer_epoch,
            ):
                return InitProducerIdResult(ErrorCode.producer_fenced)
            if (
                expected_producer_epoch == meta.last_producer_epoch
                and expected_producer_epoch != meta.producer_epoch
                and meta.state in COMPLETED
            ):
                return InitProducerIdResult(ErrorCode.none, meta.producer_id, meta.producer_epoch)
        if meta.state == S.ONGOING:
            # Abort the open transaction with a bumped epoch (fencing its producer); the
            # caller retries on CONCURRENT_TRANSACTIONS and bumps again once it completed.
            self._fence_and_abort(meta, now_ms)
            return InitProducerIdResult(ErrorCode.concurrent_transactions)
        if meta.epoch_exhausted():
            meta.producer_id = self._generate_producer_id()
            meta.producer_epoch = 0
            meta.last_producer_epoch = NO_PRODUCER_EPOCH
        else:
            own_bump = expected_producer_id != NO_PRODUCER_ID
            meta.bump_epoch(meta.producer_epoch if own_bump else NO_PRODUCER_EPOCH)
        meta.txn_timeout_ms = transaction_timeout_ms
        meta.topic_partitions.clear()
        meta.txn_start_timestamp = -1
        meta.transition(S.EMPTY, now_ms)
        self._write(meta)
        return InitProducerIdResult(ErrorCode.none, meta.producer_id, meta.producer_epoch)

    # ---- AddPartitionsToTxn / AddOffsetsToTxn -----------------------------------------------

    def _check_producer(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> tuple[ErrorCode, TransactionMetadata | None]:
        meta = self.transactions.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping, None
        if meta.producer_epoch != producer_epoch or two_phase.fenced_by_next_epoch(meta):
            return ErrorCode.producer_fenced, None
        return ErrorCode.none, meta

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        *,
        now_ms: int,
        client_transaction_version: int = 0,
    ) -> ErrorCode:
        """Kafka's handleAddPartitionsToTransaction: the partitions join the transaction,
        which begins (Ongoing, its timeout running) with its first partition; a transaction
        begun by a leader for a version 2 client is one of version 2."""
        error, meta = self._check_producer(transactional_id, producer_id, producer_epoch)
        if meta is None:
            return error
        if meta.state in PREPARED or meta.state in (S.DEAD, S.PREPARE_EPOCH_FENCE):
            return ErrorCode.concurrent_transactions
        added = set(partitions)
        if meta.state == S.ONGOING and added <= meta.topic_partitions:
            return ErrorCode.none
        if meta.state in COMPLETED:
            meta.topic_partitions.clear()
            meta.txn_start_timestamp = now_ms
            meta.client_transaction_version = client_transaction_version
        meta.topic_partitions |= added
        meta.transition(S.ONGOING, now_ms)
        self._write(meta)
        self._arm(now_ms)
        return ErrorCode.none

    def add_offsets(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        group_id: str,
        *,
        now_ms: int,
    ) -> ErrorCode:
        """AddOffsetsToTxn: the group's __consumer_offsets partition joins the transaction."""
        tp = TopicPartition(
            OFFSETS_TOPIC, partition_for(group_id, self.config.offsets_topic_num_partitions)
        )
        return self.add_partitions(
            transactional_id, producer_id, producer_epoch, [tp], now_ms=now_ms
        )

    def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn v4+ with VerifyOnly (a partition leader asking, KIP-890): is each
        partition in the producer's ongoing transaction? Nothing changes; a partition that is
        not gets TRANSACTION_ABORTABLE, as Kafka answers (the leader maps it for old
        clients)."""
        error, meta = self._check_producer(transactional_id, producer_id, producer_epoch)
        parts = list(partitions)
        if meta is None:
            return dict.fromkeys(parts, error)
        if meta.state in PREPARED:
            return dict.fromkeys(parts, ErrorCode.concurrent_transactions)
        ongoing = meta.state == S.ONGOING
        return {
            tp: ErrorCode.none
            if ongoing and tp in meta.topic_partitions
            else ErrorCode.transaction_abortable
            for tp in parts
        }

    # ---- EndTxn -----------------------------------------------------------------------------

    def end_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        *,
        now_ms: int,
        client_transaction_version: int = 0,
    ) -> ErrorCode:
        """Kafka's handleEndTransaction; ``client_transaction_version`` 2 is EndTxn v5's (see
        the module docstring). ``end_txn_producer`` gives the id and epoch to answer."""
        meta = self.transactions.get(transactional_id)
        if meta is not None and meta.bumps_epoch_per_transaction():
            error = self._check_epoch_bumping_producer(meta, producer_id, producer_epoch)
        else:
            if meta is not None:
                two_phase.take_over(meta, producer_id, producer_epoch)
            error, _ = self._check_producer(transactional_id, producer_id, producer_epoch)
        if meta is None or error != ErrorCode.none:
            return error
        state = meta.state
        if state == S.ONGOING:
            if client_transaction_version >= EPOCH_BUMP_VERSION:
                self._bump_for_end(meta)
            meta.client_transaction_version = client_transaction_version
            self._prepare(meta, commit, now_ms)
            return ErrorCode.none
        if state == (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT):
            return ErrorCode.none  # a retry of an EndTxn already done
        if state == (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT):
            return ErrorCode.concurrent_transactions
        return ErrorCode.invalid_txn_state

    def _check_epoch_bumping_producer(
        self, meta: TransactionMetadata, producer_id: int, producer_epoch: int
    ) -> ErrorCode:
        """Kafka's EndTxn checks for a transaction of version 2, whose EndTxn bumped the epoch:
        a retry names the epoch before the bump (or, once the id moved on, the old id with
        the last epoch it had); otherwise only the current epoch may end a transaction."""
        bumped = meta.producer_epoch == producer_epoch + 1
        moved = (
            meta.previous_producer_id == producer_id
            and producer_epoch == MAX_EPOCH
            and meta.producer_epoch == 0
        )
        if meta.producer_id != producer_id and not moved:
            return ErrorCode.invalid_producer_id_mapping
        if meta.state in PREPARED:
            valid = bumped
        elif meta.state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            valid = bumped or moved
        else:
            valid = producer_epoch == meta.producer_epoch
        return ErrorCode.none if valid else ErrorCode.producer_fenced

    def _bump_for_end(self, meta: TransactionMetadata) -> None:
        """Transactions version 2: the epoch the markers and the client's next transaction
        use; at the last epoch, the producer id to move to once the markers are written."""
        if meta.epoch_exhausted():
            meta.next_producer_id = self._generate_producer_id()
        meta.bump_epoch(meta.producer_epoch)

    def end_txn_producer(self, transactional_id: str) -> tuple[int, int]:
        """The producer id and epoch EndTxn v5 answers after a successful ``end_txn``: the
        bumped epoch, or the new producer id (epoch 0) the id moves to."""
        meta = self.transactions[transactional_id]
        if meta.next_producer_id != NO_PRODUCER_ID:
            return meta.next_producer_id, 0
        return meta.producer_id, meta.producer_epoch

    def complete_markers(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        *,
        now_ms: int,
    ) -> None:
        """Every marker of the prepared transaction is written: complete it. Ignored when the
        id has moved on (unloaded and reloaded, or a marker round of an older epoch)."""
        meta = self.transactions.get(transactional_id)
        prepared = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        if (
            meta is None
            or meta.state != prepared
            or meta.producer_id != producer_id
            or meta.producer_epoch != producer_epoch
        ):
            return
        meta.transition(S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT, now_ms)
        meta.topic_partitions.clear()
        if meta.next_producer_id != NO_PRODUCER_ID:  # the epoch ran out: the id moves on
            meta.previous_producer_id = meta.producer_id
            meta.producer_id, meta.producer_epoch = meta.next_producer_id, 0
            meta.next_producer_id = NO_PRODUCER_ID
        self._write(meta)
        self._arm(now_ms)

    def _prepare(self, meta: TransactionMetadata, commit: bool, now_ms: int) -> None:
        meta.transition(S.PREPARE_COMMIT if commit else S.PREPARE_ABORT, now_ms)
        self._write(meta)
        self._queue_markers(meta)

    def _fence_and_abort(self, meta: TransactionMetadata, now_ms: int) -> None:
        """Kafka's prepareFenceProducerEpoch then an abort not from the client: the epoch is
        bumped (unless exhausted) so the old producer is fenced by the markers and the
        coordinator alike, and no last epoch is kept, so that no earlier epoch passes for a
        retry of an InitProducerId afterwards; only the PrepareAbort record is written."""
        two_phase.retire_next_epoch(meta)
        meta.transition(S.PREPARE_EPOCH_FENCE, now_ms)
        if not meta.epoch_exhausted():
            meta.bump_epoch(NO_PRODUCER_EPOCH)
        self._prepare(meta, False, now_ms)

    def _queue_markers(self, meta: TransactionMetadata) -> None:
        self._markers.append(
            TxnMarkers(
                meta.transactional_id,
                meta.producer_id,
                meta.producer_epoch,
                meta.state == S.PREPARE_COMMIT,
                frozenset(meta.topic_partitions),
                meta.client_transaction_version,
            )
        )

    # ---- timers -----------------------------------------------------------------------------

    def _arm(self, now_ms: int) -> None:
        """Start the periodic checks once there is something to check (Kafka schedules them
        at start-up; with nothing loaded they would find nothing)."""
        if self._next_abort_check_ms is None:
            self._next_abort_check_ms = (
                now_ms + self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms
            )
        if self._next_expire_check_ms is None:
            self._next_expire_check_ms = (
                now_ms + self.config.transaction_remove_expired_transaction_cleanup_interval_ms
            )

    def due_transactions(self, now_ms: int) -> list[tuple[str, str]]:
        """(action, transactional id) pairs due at ``now_ms``: "abort" for an Ongoing
        transaction past its timeout, "expire" for an id idle past
        transactional.id.expiration.ms; and the checks' next rounds are scheduled."""
        due: list[tuple[str, str]] = []
        if self._next_abort_check_ms is not None and now_ms >= self._next_abort_check_ms:
            due += [
                ("abort", tid)
                for tid, m in self.transactions.items()
                if m.state == S.ONGOING and not m.is_two_phase() and m.deadline_ms() <= now_ms
            ]
            self._next_abort_check_ms = (
                now_ms + self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms
                if self.transactions
                else None
            )
        if self._next_expire_check_ms is not None and now_ms >= self._next_expire_check_ms:
            expiration = self.config.transactional_id_expiration_ms
            due += [
                ("expire", tid)
                for tid, m in self.transactions.items()
                if m.state in COMPLETED and m.txn_last_update_timestamp + expiration <= now_ms
            ]
            self._next_expire_check_ms = (
                now_ms + self.config.transaction_remove_expired_transaction_cleanup_interval_ms
                if self.transactions
                else None
            )
        return due

    def abort_timed_out(self, transactional_id: str, *, now_ms: int) -> None:
        """Kafka's abortTimedOutTransactions for one id: fence its producer and abort."""
        meta = self.transactions.get(transactional_id)
        if (
            meta is not None
            and meta.state == S.ONGOING
            and not meta.is_two_phase()
            and meta.deadline_ms() <= now_ms
        ):
            self._fence_and_abort(meta, now_ms)

    def expire(self, transactional_id: str, *, now_ms: int) -> None:
        """Kafka's removeExpiredTransactionalIds for one id: Dead, then a tombstone."""
        meta = self.transactions.get(transactional_id)
        if meta is None or meta.state not in COMPLETED:
            return
        if meta.txn_last_update_timestamp + self.config.transactional_id_expiration_ms > now_ms:
            return
        meta.transition(S.DEAD, now_ms)
        del self.transactions[transactional_id]
        self._records.append(
            CoordinatorRecord(
                self.partition_for(transactional_id), rec.encode_key(transactional_id), None
            )
        )

    # ---- describe / list --------------------------------------------------------------------

    def list_transactions(
        self,
        state_filters: Iterable[str],
        producer_id_filters: Iterable[int],
        duration_filter_ms: int,
        now_ms: int,
    ) -> tuple[list[TransactionMetadata], list[str]]:
        """Kafka's listTransactionStates: the ids matching every filter given (a duration
        filter >= 0 keeps those started longer ago than it), and the state names asked for
        that Kafka does not know."""
        states = set(state_filters)
        unknown = sorted(s for s in states if S.from_name(s) is None)
        pids = set(producer_id_filters)
        out = []
        for meta in self.transactions.values():
            if states and meta.state.state_name not in states:
                continue
            if pids and meta.producer_id not in pids:
                continue
            if duration_filter_ms >= 0 and now_ms - meta.txn_start_timestamp <= duration_filter_ms:
                continue
            out.append(meta)
        return out, unknown

    # ---- records ----------------------------------------------------------------------------

    def _write(self, meta: TransactionMetadata) -> None:
        value = rec.TransactionLogValue(
            meta.producer_id,
            meta.producer_epoch,
            meta.txn_timeout_ms,
            meta.state.id,
            None if meta.state == S.EMPTY else meta.partitions_by_topic(),
            meta.txn_last_update_timestamp,
            meta.txn_start_timestamp,
            client_transaction_version=meta.client_transaction_version,
        )
        self._records.append(
            CoordinatorRecord(
                self.partition_for(meta.transactional_id),
                rec.encode_key(meta.transactional_id),
                rec.encode_value(value, self.value_version),
            )
        )
