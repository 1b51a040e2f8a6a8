"""The transaction coordinator and the partitions' logs together, against a model.

The sans-I/O TransactionCoordinator decides; two partition Logs in a temp dir hold the
data and the markers; this test is the glue a broker is (markers written to the logs
when the test chooses, in any order and partially, then ``complete_markers``), and the
clients: producers of three transactional ids, each begins, produces, commits or aborts,
a second instance fences the first, an instance bumps its own epoch (KIP-360) and a retry
of that request may arrive late, transactions time out, and a fenced instance's produce
still in flight may reach a log late. An instance is a client of transactions version 0
or 2 (KIP-890: its partitions added as its leader would add them, the epoch bumped at
each EndTxn and carried by the markers, the instance going on in the epoch EndTxn
answered). The coordinator may crash and reload from
the records it wrote (its pending markers are lost, the reload queues them again), and a
log may crash or restart cleanly.

The model is what clients were told: a transaction is committed when its EndTxn(commit)
was answered, aborted when its EndTxn(abort) was, or when the coordinator fenced or timed
it out. After every step, for each partition:
- every marker written is its transaction's outcome, and covers only that transaction's
  records (checked as the markers are written);
- the last stable offset is the first offset of the earliest transaction in the partition
  whose marker is not written there yet, or the log end offset: it never passes an open
  transaction;
- what a read_committed consumer makes of a fetch below the last stable offset (batches and
  aborted transactions, applied as Kafka's consumer does) is exactly the model's committed
  records below it.
A failure prints its steps and a ``@reproduce_failure`` blob that replays it; the teardown
writes every queued marker and times out every open transaction, after which each
transaction must be decided and marked wherever it wrote, and every partition stable.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from spec import build_batch
from test_txn_model import read_committed_offsets

from odradek.coordinator.transaction.config import TransactionConfig
from odradek.coordinator.transaction.coordinator import TransactionCoordinator, TxnMarkers
from odradek.protocol import records as rb
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.storage import Log, LogConfig, TopicPartition

NOW = 1_700_000_000_000
TIDS = ("a", "b", "c")
PARTITIONS = (TopicPartition("t", 0), TopicPartition("t", 1))
TXN_TIMEOUT_MS = 60_000
CONFIG = TransactionConfig(
    transaction_state_log_num_partitions=1,
    transaction_abort_timed_out_transaction_cleanup_interval_ms=1_000,
    transaction_remove_expired_transaction_cleanup_interval_ms=3_600_000,
    transactional_id_expiration_ms=10**12,
)
#: Small segments: rolls, producer snapshots and .txnindex files across segments.
LOG_CONFIG = LogConfig(segment_bytes=700)


def test_a_fence_leaves_no_epoch_for_a_late_retry() -> None:
    """A directed case the random walk reaches rarely: a producer bumps its own epoch
    (KIP-360), its transaction then times out and the coordinator fences it with a bumped
    epoch; a late retry of the first bump must be fenced, not handed the new epoch (Kafka's
    prepareFenceProducerEpoch forgets the last epoch)."""
    ids = itertools.count(1000)
    core = TransactionCoordinator(CONFIG, lambda: next(ids))
    pid = core.init_producer_id("a", TXN_TIMEOUT_MS, -1, -1, now_ms=NOW).producer_id
    bumped = core.init_producer_id("a", TXN_TIMEOUT_MS, pid, 0, now_ms=NOW)
    assert (bumped.error, bumped.producer_epoch) == (ErrorCode.none, 1)
    assert core.add_partitions("a", pid, 1, [PARTITIONS[0]], now_ms=NOW) == ErrorCode.none
    later = NOW + 2 * TXN_TIMEOUT_MS
    assert core.due_transactions(later) == [("abort", "a")]
    core.abort_timed_out("a", now_ms=later)
    (markers,) = core.drain_markers()
    core.complete_markers("a", pid, markers.producer_epoch, False, now_ms=later)
    late = core.init_producer_id("a", TXN_TIMEOUT_MS, pid, 0, now_ms=later)
    assert late.error == ErrorCode.producer_fenced


@dataclass(eq=False)
class Txn:
    """One transaction as its clients saw it."""

    tid: str
    producer_id: int
    epoch: int
    #: Partitions the coordinator accepted (AddPartitionsToTxn answered without error).
    partitions: set[TopicPartition] = field(default_factory=set)
    #: Offsets of its records in each partition.
    written: dict[TopicPartition, list[int]] = field(default_factory=dict)
    #: True committed, False aborted, None open.
    outcome: bool | None = None
    #: Partitions whose marker is written.
    marked: set[TopicPartition] = field(default_factory=set)
    completed: bool = False


@dataclass(eq=False)
class Instance:
    """A producer client: its id and epoch, sequence numbers, and current transaction."""

    tid: str
    producer_id: int
    epoch: int
    sequences: dict[TopicPartition, int] = field(default_factory=dict)
    txn: Txn | None = None
    #: Transactions version 2 (else 0): the client version of its requests.
    version: int = 0


class CoordinatorAndLogs(RuleBasedStateMachine):
    @initialize()
    def start(self) -> None:
        self.tmp = Path(tempfile.mkdtemp())
        self.now = NOW
        self.ids = itertools.count(1000)
        self.core = self._new_core()
        #: Every record the coordinator wrote, in order (its __transaction_state partition).
        self.coordinator_log: list = []
        self.coordinator_epoch = 0
        self.logs = {tp: Log(self._dir(tp), LOG_CONFIG, now_ms=NOW) for tp in PARTITIONS}
        #: Markers queued by the coordinator, with the partitions still to write.
        self.pending: list[tuple[TxnMarkers, set[TopicPartition]]] = []
        self.instances: dict[str, Instance] = {}
        #: Fenced instances whose transaction was aborted: a request of theirs may be late.
        self.zombies: list[Instance] = []
        #: Per id, its transaction open at the coordinator, or decided and not completed.
        self.current: dict[str, Txn] = {}
        self.txns: list[Txn] = []
        self.keys = 0
        #: Per id, the (producer id, epoch) a late retry of the last own epoch bump may name
        #: and still be answered (Kafka's lastProducerEpoch); any fence clears it.
        self.retryable: dict[str, tuple[int, int]] = {}
        #: Own epoch bumps sent, whose retries may arrive late.
        self.bumps: list[tuple[str, int, int]] = []

    def teardown(self) -> None:
        if hasattr(self, "logs"):
            self._settle()
            for log in self.logs.values():
                log.close()
            shutil.rmtree(self.tmp, ignore_errors=True)

    def _dir(self, tp: TopicPartition) -> Path:
        return self.tmp / f"{tp.topic}-{tp.partition}"

    def _new_core(self) -> TransactionCoordinator:
        """transaction.version 2 finalized: the log's values keep each client's version."""
        return TransactionCoordinator(CONFIG, lambda: next(self.ids), transaction_version=2)

    def _tick(self) -> int:
        self.now += 1
        return self.now

    def _drain(self) -> None:
        self.coordinator_log += self.core.drain_records()
        self.pending += [(m, set(m.partitions)) for m in self.core.drain_markers()]

    def _fence(self, tid: str) -> None:
        self.retryable.pop(tid, None)
        instance = self.instances.pop(tid, None)
        if instance is not None and instance.txn is not None and instance.txn.outcome is False:
            self._zombie(instance)

    def _zombie(self, instance: Instance) -> None:
        """Remember ``instance`` as it is now (its epoch, sequences and aborted transaction):
        a request it sent may still arrive, even after the instance itself moved on."""
        assert instance.txn is not None
        if not any(z.txn is instance.txn and z.epoch == instance.epoch for z in self.zombies):
            self.zombies.append(replace(instance, sequences=dict(instance.sequences)))

    def _decide(self, txn: Txn, commit: bool) -> None:
        assert txn.outcome is None
        txn.outcome = commit

    # ---- clients ----------------------------------------------------------------------------

    @rule(tid=st.sampled_from(TIDS), version=st.sampled_from((0, 2)))
    def init_producer_id(self, tid: str, version: int) -> None:
        """A new instance of ``tid`` (InitProducerId without an id and epoch)."""
        txn = self.current.get(tid)
        result = self.core.init_producer_id(tid, TXN_TIMEOUT_MS, -1, -1, now_ms=self._tick())
        self._drain()
        if self._aborts_or_waits(tid, txn, result.error):
            return
        assert result.error == ErrorCode.none
        self._fence(tid)
        self.current.pop(tid, None)
        self.instances[tid] = Instance(
            tid, result.producer_id, result.producer_epoch, version=version
        )

    def _aborts_or_waits(self, tid: str, txn: Txn | None, error: ErrorCode) -> bool:
        """What any InitProducerId meets first: an open transaction is fenced and aborted, a
        decided one not yet completed makes it wait; both answer CONCURRENT_TRANSACTIONS."""
        if txn is not None and txn.outcome is None and txn.partitions:
            # Aborted with a bumped epoch: whoever holds the old one is fenced.
            assert error == ErrorCode.concurrent_transactions
            self._decide(txn, False)
            self._fence(tid)
            return True
        if txn is not None and not txn.completed and txn.outcome is not None:
            assert error == ErrorCode.concurrent_transactions
            return True
        return False

    @rule(tid=st.sampled_from(TIDS))
    def bump_own_epoch(self, tid: str) -> None:
        """The live instance asks for a new epoch with its own id and epoch (KIP-360, as
        librdkafka does after an abortable error): an open transaction is aborted first
        (the instance retries), a bump already made by a timeout is handed back, and the
        instance goes on with its id under the new epoch."""
        instance = self.instances.get(tid)
        if instance is None:
            return
        txn = self.current.get(tid)
        result = self.core.init_producer_id(
            tid, TXN_TIMEOUT_MS, instance.producer_id, instance.epoch, now_ms=self._tick()
        )
        self._drain()
        if self._aborts_or_waits(tid, txn, result.error):
            return
        if instance.txn is not None and instance.txn.outcome is False:
            # Its transaction timed out: the coordinator's fence bumped the epoch past it.
            assert result.error == ErrorCode.producer_fenced
            self._fence(tid)
            return
        assert result.error == ErrorCode.none
        assert result.producer_id == instance.producer_id
        assert result.producer_epoch == instance.epoch + 1
        self.bumps.append((tid, instance.producer_id, instance.epoch))
        self.retryable[tid] = (instance.producer_id, instance.epoch)
        self.current.pop(tid, None)
        instance.epoch = result.producer_epoch
        instance.sequences.clear()
        instance.txn = None

    @precondition(lambda self: self.bumps)
    @rule(data=st.data())
    def late_retry_of_an_own_bump(self, data: st.DataObject) -> None:
        """An own epoch bump's request arrives again: while nothing fenced the producer
        since (and the coordinator did not reload: the last epoch is not in its records, as
        in Kafka), it is answered the current epoch, no second bump, and like any
        InitProducerId it aborts an open transaction; otherwise PRODUCER_FENCED. (Kafka
        would abort an open transaction before looking at the epoch; here a stale epoch is
        fenced first.)"""
        tid, producer_id, epoch = data.draw(st.sampled_from(self.bumps))
        txn = self.current.get(tid)
        result = self.core.init_producer_id(
            tid, TXN_TIMEOUT_MS, producer_id, epoch, now_ms=self._tick()
        )
        self._drain()
        if txn is not None and not txn.completed and txn.outcome is not None:
            assert result.error == ErrorCode.concurrent_transactions
            return
        if self.retryable.get(tid) != (producer_id, epoch):
            assert result.error == ErrorCode.producer_fenced
            return
        if self._aborts_or_waits(tid, txn, result.error):
            return
        assert result.error == ErrorCode.none
        live = self.instances[tid]
        assert (result.producer_id, result.producer_epoch) == (live.producer_id, live.epoch)

    @rule(tid=st.sampled_from(TIDS), tp=st.sampled_from(PARTITIONS), count=st.integers(1, 3))
    def produce(self, tid: str, tp: TopicPartition, count: int) -> None:
        """The instance of ``tid`` writes ``count`` records to ``tp`` in its transaction
        (begun with its first partition)."""
        instance = self.instances.get(tid)
        if instance is None:
            return
        txn = instance.txn
        if txn is None:
            txn = Txn(tid, instance.producer_id, instance.epoch)
        if tp not in txn.partitions:
            error = self.core.add_partitions(
                tid,
                instance.producer_id,
                instance.epoch,
                [tp],
                now_ms=self._tick(),
                client_transaction_version=instance.version,
            )
            self._drain()
            if error == ErrorCode.concurrent_transactions:
                # The previous transaction's markers are not all written yet.
                previous = self.current.get(tid)
                assert previous is not None and not previous.completed
                return
            if error == ErrorCode.producer_fenced:
                # Timed out and aborted by the coordinator, which bumped the epoch.
                assert instance.txn is not None and instance.txn.outcome is False
                self._fence(tid)
                return
            assert error == ErrorCode.none
            if instance.txn is None:
                instance.txn = txn
                self.txns.append(txn)
                self.current[tid] = txn
            txn.partitions.add(tp)
        if txn.outcome is False:
            # Timed out without the client knowing: its write to a partition it added is late.
            self._late_append(instance, tp)
            return
        assert txn.outcome is None
        assert self._append(instance, tp, count)

    def _append(self, instance: Instance, tp: TopicPartition, count: int) -> bool:
        """One transactional batch of ``instance`` to ``tp``; whether the log took it."""
        txn = instance.txn
        assert txn is not None
        sequence = instance.sequences.get(tp, 0)
        records = [(b"k%d" % (self.keys + i), b"v" * 10, self.now) for i in range(count)]
        batch = build_batch(
            records,
            producer_id=instance.producer_id,
            producer_epoch=instance.epoch,
            base_sequence=sequence,
            attributes=rb.TRANSACTIONAL_MASK,
        )
        try:
            info = self.logs[tp].append(batch, leader_epoch=0, now_ms=self._tick())
        except KafkaError as exc:
            return exc.error_code in (ErrorCode.invalid_producer_epoch, ErrorCode.producer_fenced)
        self.keys += count
        instance.sequences[tp] = sequence + count
        txn.written.setdefault(tp, []).extend(range(info.first_offset, info.last_offset + 1))
        return True

    @precondition(lambda self: self.zombies)
    @rule(data=st.data())
    def late_request_of_a_fenced_instance(self, data: st.DataObject) -> None:
        """A produce a fenced instance sent before it was fenced reaches a partition of its
        (aborted) transaction now: refused once the partition has seen the bumped epoch of
        the abort marker, else part of the aborted transaction."""
        zombie = data.draw(st.sampled_from(self.zombies))
        assert zombie.txn is not None
        self._late_append(zombie, data.draw(st.sampled_from(sorted(zombie.txn.partitions))))

    def _late_append(self, instance: Instance, tp: TopicPartition) -> None:
        txn = instance.txn
        assert txn is not None and txn.outcome is False
        marked = tp in txn.marked
        before = len(txn.written.get(tp, ()))
        assert self._append(instance, tp, 1)
        written = len(txn.written.get(tp, ())) > before
        assert not (marked and written), "a late write after its transaction's marker"

    @rule(tid=st.sampled_from(TIDS), commit=st.booleans())
    def end_txn(self, tid: str, commit: bool) -> None:
        instance = self.instances.get(tid)
        if instance is None or instance.txn is None:
            return
        txn = instance.txn
        error = self.core.end_txn(
            tid,
            instance.producer_id,
            instance.epoch,
            commit,
            now_ms=self._tick(),
            client_transaction_version=instance.version,
        )
        self._drain()
        if txn.outcome is False and instance.version == 2:
            # Timed out meanwhile: the abort's epoch is the one this EndTxn would have bumped
            # to, so the request reads as a retry of an abort (a commit is refused).
            expected = {ErrorCode.concurrent_transactions, ErrorCode.none}
            assert error in (expected if not commit else {ErrorCode.invalid_txn_state})
            self._fence(tid)
            return
        if error == ErrorCode.producer_fenced:
            assert txn.outcome is False  # timed out meanwhile
            self._fence(tid)
            return
        assert error == ErrorCode.none
        self._decide(txn, commit)
        instance.txn = None
        if instance.version == 2:
            producer_id, epoch = self.core.end_txn_producer(tid)
            assert (producer_id, epoch) == (instance.producer_id, instance.epoch + 1)
            instance.epoch = epoch
            instance.sequences.clear()
            self.retryable.pop(tid, None)  # the last epoch is the one before this bump

    @rule()
    def time_passes(self) -> None:
        """Past every open transaction's timeout: the coordinator aborts them (fencing)."""
        self.now += (
            TXN_TIMEOUT_MS + CONFIG.transaction_abort_timed_out_transaction_cleanup_interval_ms
        )
        for action, tid in self.core.due_transactions(self.now):
            assert action == "abort"
            self.core.abort_timed_out(tid, now_ms=self.now)
            self._drain()
            txn = self.current[tid]
            self._decide(txn, False)
            self.retryable.pop(tid, None)  # the fence bumped the epoch
            instance = self.instances.get(tid)
            if instance is not None and instance.txn is txn:
                self._zombie(instance)  # fenced, though it does not know it yet

    # ---- the broker's side ------------------------------------------------------------------

    @precondition(lambda self: self.pending)
    @rule(data=st.data())
    def write_markers(self, data: st.DataObject) -> None:
        """Some of a prepared transaction's markers reach their partitions; with the last,
        the coordinator completes the transaction."""
        index = data.draw(st.integers(0, len(self.pending) - 1))
        left = self.pending[index][1]
        self._write_markers(index, data.draw(st.sets(st.sampled_from(sorted(left)), min_size=1)))

    def _write_markers(self, index: int, some: set[TopicPartition]) -> None:
        entry, left = self.pending[index]
        txn = self.current[entry.transactional_id]
        assert entry.commit == txn.outcome
        assert entry.partitions == frozenset(txn.partitions)
        for tp in sorted(some):
            marker = rb.control_batch(
                entry.producer_id, entry.producer_epoch, entry.commit, self.coordinator_epoch, 0
            )
            self.logs[tp].append(
                marker,
                leader_epoch=0,
                now_ms=self._tick(),
                from_client=False,
                transaction_version=entry.transaction_version,
            )
            txn.marked.add(tp)
        left -= some
        if not left:
            del self.pending[index]
            self.core.complete_markers(
                entry.transactional_id,
                entry.producer_id,
                entry.producer_epoch,
                entry.commit,
                now_ms=self._tick(),
            )
            self._drain()
            txn.completed = True

    @rule()
    def coordinator_restarts(self) -> None:
        """The coordinator loses its memory and its queued markers, loads its records again
        (a new leader epoch of __transaction_state) and queues the prepared ones' markers."""
        self.core = self._new_core()
        for record in self.coordinator_log:
            self.core.load_record(record.key, record.value, self.now)
        self.core.loaded(0)
        self.coordinator_epoch += 1
        self.retryable.clear()
        self.pending = []
        self._drain()

    @rule(tp=st.sampled_from(PARTITIONS), clean=st.booleans())
    def log_restarts(self, tp: TopicPartition, clean: bool) -> None:
        """A partition's log closes cleanly or crashes, and is opened (recovered) again."""
        log = self.logs[tp]
        if clean:
            log.close()
        else:
            for segment in log.segments:
                segment.close()
        self.logs[tp] = Log(self._dir(tp), LOG_CONFIG, clean_shutdown=clean, now_ms=self.now)

    def _settle(self) -> None:
        """Liveness: with every queued marker written and every open transaction timed out,
        each transaction is decided and marked wherever it wrote, and no partition has an
        unstable offset left (a read_committed reader is never stuck for good)."""
        self._write_all_markers()
        self.time_passes()
        self._write_all_markers()
        for txn in self.txns:
            assert txn.outcome is not None and txn.completed, txn
            assert set(txn.written) <= txn.marked, txn
        for tp, log in self.logs.items():
            assert log.last_stable_offset(log.log_end_offset) == log.log_end_offset, tp
        self.read_committed_sees_the_committed_records()

    def _write_all_markers(self) -> None:
        while self.pending:
            self._write_markers(0, set(self.pending[0][1]))

    # ---- what readers see -------------------------------------------------------------------

    @invariant()
    def read_committed_sees_the_committed_records(self) -> None:
        if not hasattr(self, "logs"):
            return
        for tp, log in self.logs.items():
            leo = log.log_end_offset
            unmarked = [
                t.written[tp][0] for t in self.txns if t.written.get(tp) and tp not in t.marked
            ]
            lso = min(unmarked, default=leo)
            assert log.last_stable_offset(leo) == lso, tp
            committed = sorted(
                o
                for t in self.txns
                if t.outcome is True and tp in t.marked
                for o in t.written.get(tp, ())
                if o < lso
            )
            assert read_committed_offsets(log, lso) == committed, tp


TestCoordinatorAndLogs = CoordinatorAndLogs.TestCase
TestCoordinatorAndLogs.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
