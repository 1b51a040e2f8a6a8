"""ReplicaManager: the partitions this broker hosts, kept in step with the metadata image.

It subscribes to the MetadataStore, so a topic created by any path (admin API,
auto creation, coordinators' internal topics) gets its Partition and Log here,
a deleted one loses them, and config changes reach the Log live. Appends go
through it so that waiters in the purgatory can be woken when a log grows.

Creating a partition's log costs a few file creations and fsyncs (a
millisecond on an idle disk, far more on a busy one), so a topic of 10,000
partitions would hold the event loop for seconds. ``create_topic`` and
``create_partitions`` therefore create the logs in a worker thread, a chunk at
a time (one creation at a time), and publish the metadata change only once
every log exists: other clients keep being served and nobody sees a partition
whose log is not there yet. The new logs are reachable only through the
LogManager until then, and the LogManager's loop-side walks over its logs use
snapshots, so the thread needs no lock.

Coordinators follow leadership through ``LeadershipListener``: a coordinator keeps
its state in an internal topic's partitions and serves the keys of a partition only
while this broker leads it (Kafka's onElection/onResignation, which its
ReplicaManager drives from the controller's LeaderAndIsr). The ReplicaManager is
where every role change is applied, whatever metadata store sent it, so it tells
the listeners of the topic there; a listener added later is told at once of the
partitions already led here (a single node learns of all of them that way at
start-up). The group coordinator listens to __consumer_offsets; the transaction
coordinator will listen to __transaction_state the same way.

Replication's shell is here too. A follower fetch arriving at a leader goes through
``fetch_for_follower``: the Partition updates the follower's log end offset, maybe the
high watermark, maybe proposes adding the follower to the ISR. Every high watermark
move is told to ``hw_listeners`` (acks=all produces waiting in their purgatory,
consumers' long-polling fetches, which read only below the high watermark), never
polled for. ISR proposals, from an expansion here or from the periodic check for
followers lagging more than ``replica.lag.time.max.ms`` (run every half of it, as
Kafka's isr-expiration task), are sent to the MetadataStore's ``alter_isr`` one at a
time per partition and retried while the store cannot be reached; the answer goes back
to the Partition. Followers fetch from their leaders in ``replication.fetcher``, which
``role_listeners`` wake when this broker starts or stops following a partition.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from odradek.metadata.image import IsrUpdate, PartitionImage, TopicImage
from odradek.metadata.store import MetadataStore
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records import control_batch
from odradek.replication.partition import DEFAULT_REPLICA_LAG_TIME_MAX_MS, Partition
from odradek.replication.partition_state import AlterPartition, PartitionState
from odradek.replication.purgatory import Purgatory
from odradek.storage import Log, LogAppendInfo, LogConfig, LogManager, TopicPartition
from odradek.storage.producer_state import VerificationGuard

log = logging.getLogger(__name__)

#: How long a failed ISR write waits before it is sent again.
ALTER_ISR_RETRY_S = 0.5

#: Logs created per worker-thread call: fewer calls fsync the log dirs fewer times; a cancelled
#: creation (broker shutdown) stops after the chunk under way.
CREATE_LOGS_CHUNK = 500


class UnknownTopicOrPartition(KafkaError):
    error_code = ErrorCode.unknown_topic_or_partition


class NotLeaderOrFollower(KafkaError):
    error_code = ErrorCode.not_leader_or_follower


#: An acks=all append to wait for: (partition, offset after its last record, leader epoch).
ReplicatedAppend = tuple[TopicPartition, int, int]


class LeadershipListener(Protocol):
    """Told when this broker starts or stops leading a partition of the topic it listens to."""

    def on_election(self, partition: int, leader_epoch: int) -> None: ...

    def on_resignation(self, partition: int) -> None: ...


class ReplicaManager:
    def __init__(
        self,
        log_manager: LogManager,
        metadata: MetadataStore,
        node_id: int,
        default_config: LogConfig,
        replica_lag_time_max_ms: int = DEFAULT_REPLICA_LAG_TIME_MAX_MS,
    ) -> None:
        self.log_manager = log_manager
        self.metadata = metadata
        self.node_id = node_id
        self.default_config = default_config
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self._partitions: dict[TopicPartition, Partition[Log]] = {}
        #: Called with a TopicPartition after every append to it (the purgatory listens).
        self.append_listeners: list[Callable[[TopicPartition], None]] = []
        #: Called with a TopicPartition when its high watermark moves or its leadership here
        #: changes (acks=all produces and consumers' fetches wait on it).
        self.hw_listeners: list[Callable[[TopicPartition], None]] = []
        #: Called with (partition, producer id, committed) after a transaction marker written by
        #: ``write_txn_markers`` is replicated.
        self.txn_marker_listeners: list[Callable[[TopicPartition, int, bool], None]] = []
        #: Called after this broker's roles changed (the replica fetchers look again).
        self.role_listeners: list[Callable[[], None]] = []
        #: acks=all appends (produces, coordinators' writes) waiting for the high watermark.
        self.produce_purgatory = Purgatory()
        self.hw_listeners.append(self.produce_purgatory.notify)
        #: Partitions whose ISR proposal is being sent to the metadata store.
        self._altering: set[TopicPartition] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._isr_expiration: asyncio.Task[None] | None = None
        #: Per topic, who is told of leadership changes of its partitions here.
        self._leadership_listeners: dict[str, list[LeadershipListener]] = {}
        # Partition growth is serialized (as a controller would), so each one sees the last one's result.
        self._growing = asyncio.Lock()
        # One log-creating worker thread at a time.
        self._creating_logs = asyncio.Lock()

    def startup(self) -> None:
        """Take the role the image gives this broker in each of its partitions, then follow its
        changes, and start checking followers' lag."""
        for topic in self.metadata.topics().values():
            self.on_topic_changed(None, topic)
        self.metadata.subscribe(self)
        self._isr_expiration = asyncio.get_running_loop().create_task(self._expire_isr())

    async def shutdown(self) -> None:
        self.produce_purgatory.shutdown()
        tasks = [*self._tasks, *([self._isr_expiration] if self._isr_expiration else [])]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._isr_expiration = None

    def add_leadership_listener(self, topic: str, listener: LeadershipListener) -> None:
        """Tell ``listener`` of every leadership change of ``topic``'s partitions here from now
        on, starting with the partitions led here already."""
        self._leadership_listeners.setdefault(topic, []).append(listener)
        for tp, partition in sorted(self._partitions.items()):
            if tp.topic == topic and partition.is_leader:
                listener.on_election(tp.partition, partition.leader_epoch)

    def _tell_leadership(self, tp: TopicPartition, was_leader: bool, now: Partition | None) -> None:
        """Tell ``tp``'s topic's listeners if this broker started, kept under a new epoch, or
        stopped leading it (``now`` is None once it is no longer hosted here)."""
        listeners = self._leadership_listeners.get(tp.topic)
        if not listeners:
            return
        for listener in listeners:
            if now is not None and now.is_leader:
                listener.on_election(tp.partition, now.leader_epoch)
            elif was_leader:
                listener.on_resignation(tp.partition)

    def log_config(self, topic: TopicImage) -> LogConfig:
        return LogConfig.from_properties(topic.configs, base=self.default_config)

    def on_topic_changed(self, before: TopicImage | None, after: TopicImage | None) -> None:
        if after is None:
            assert before is not None
            self._delete_logs(before.name, before.partitions)
            return
        config = self.log_config(after)
        now_ms = int(time.time() * 1000)
        new = []
        changed: list[TopicPartition] = []
        for p in after.partitions:
            tp = TopicPartition(after.name, p.partition)
            partition = self._partitions.get(tp)
            if self.node_id not in p.replicas:
                # Moved away by a reassignment (or its cancellation): stop hosting it and
                # delete its log, as Kafka's StopReplica with deletion.
                if self._partitions.pop(tp, None) is not None:
                    self._tell_leadership(tp, partition.is_leader, None)  # type: ignore[union-attr]
                    changed.append(tp)
                    self.log_manager.delete_log(tp)
                continue
            if partition is None:
                new.append(p)
                continue
            if before is not None and before.configs != after.configs:
                partition.log.update_config(config)
            was_leader = partition.is_leader
            if partition.apply_state(_partition_state(p), now_ms):
                changed.append(tp)
                if was_leader or partition.is_leader:
                    self._tell_leadership(tp, was_leader, partition)
        # Logs made by create_topic/create_partitions already exist; these calls only look them up.
        for p, log_ in zip(new, self._open_logs(after.name, new, config)):
            partition = Partition(
                log_,
                self.node_id,
                _partition_state(p),
                now_ms,
                self.replica_lag_time_max_ms,
                self.log_manager.checkpointed_high_watermarks.pop(log_.topic_partition, None),
            )
            self._partitions[log_.topic_partition] = partition
            changed.append(log_.topic_partition)
            if partition.is_leader:
                self._tell_leadership(log_.topic_partition, False, partition)
        self._roles_changed(changed)

    def _open_logs(
        self, topic: str, partitions: Sequence[PartitionImage], config: LogConfig
    ) -> list:
        """Get or create the logs of partitions hosted here (a leader's epoch is recorded by its
        Partition). One call for all of them: the log dirs are fsynced once, not once per partition.
        """
        return self.log_manager.get_or_create_logs(
            [TopicPartition(topic, p.partition) for p in partitions], config
        )

    def _delete_logs(self, topic: str, partitions: Sequence[PartitionImage]) -> None:
        gone = []
        for p in partitions:
            tp = TopicPartition(topic, p.partition)
            partition = self._partitions.pop(tp, None)
            if partition is not None:
                gone.append(tp)
                if partition.is_leader:
                    self._tell_leadership(tp, True, None)
            self.log_manager.delete_log(tp)
        self._roles_changed(gone)

    def _roles_changed(self, partitions: Sequence[TopicPartition]) -> None:
        """Wake whoever waits on ``partitions`` (a produce waiting for replicas answers
        NOT_LEADER_OR_FOLLOWER once this broker no longer leads) and the fetchers."""
        if not partitions:
            return
        for tp in partitions:
            self._hw_moved(tp)
        for listener in self.role_listeners:
            listener()

    async def _create_logs(self, topic: TopicImage, partitions: Sequence[PartitionImage]) -> None:
        """Create the logs of ``partitions`` hosted here in a worker thread, a chunk at a time."""
        config = self.log_config(topic)
        hosted = [p for p in partitions if self.node_id in p.replicas]
        async with self._creating_logs:
            for start in range(0, len(hosted), CREATE_LOGS_CHUNK):
                await asyncio.to_thread(
                    self._open_logs, topic.name, hosted[start : start + CREATE_LOGS_CHUNK], config
                )

    async def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        configs: Mapping[str, str] | None = None,
        internal: bool = False,
        assignment: Sequence[Sequence[int]] | None = None,
    ) -> TopicImage:
        """Create a topic without holding the event loop; published once its logs exist.

        Errors as ``MetadataStore.new_topic``, or the storage error that stopped
        the logs' creation (the logs already made are removed again).
        """
        topic = self.metadata.new_topic(
            name, partitions, replication_factor, configs, internal, assignment
        )
        try:
            await self._create_logs(topic, topic.partitions)
        except BaseException:
            self.metadata.abandon_new_topic(name)
            self._delete_logs(name, topic.partitions)
            raise
        return await self.metadata.await_published(self.metadata.commit_new_topic(topic))

    async def create_partitions(self, name: str, total: int) -> TopicImage:
        """Grow a topic to ``total`` partitions without holding the event loop (see ``create_topic``)."""
        async with self._growing:
            grown = self.metadata.grown_topic(name, total)
            added = grown.partitions[len(self.metadata.topic(name).partitions) :]  # type: ignore[union-attr]
            try:
                await self._create_logs(grown, added)
                return await self.metadata.await_published(self.metadata.commit_partitions(grown))
            except BaseException:
                current = self.metadata.topic(name)
                # Deleted meanwhile, or not committed: the new logs belong to nobody. (Re-created
                # under a new id: the logs may be the new topic's, so they stay.)
                if current is None or (
                    current.topic_id == grown.topic_id and len(current.partitions) < total
                ):
                    self._delete_logs(name, added)
                raise

    def update_default_config(self, default_config: LogConfig) -> None:
        """Broker-level log.* defaults changed: every topic's effective config is recomputed,
        and the log manager's default (what a deletion's delay and a new log start from) follows."""
        self.default_config = default_config
        self.log_manager.default_config = default_config
        for topic in self.metadata.topics().values():
            config = self.log_config(topic)
            for p in topic.partitions:
                partition = self._partitions.get(TopicPartition(topic.name, p.partition))
                if partition is not None:
                    partition.log.update_config(config)

    def partition(self, tp: TopicPartition) -> Partition[Log]:
        partition = self._partitions.get(tp)
        if partition is None:
            topic = self.metadata.topic(tp.topic)
            if topic is not None and 0 <= tp.partition < len(topic.partitions):
                # Kafka's answer for a partition that exists but is not led here.
                raise NotLeaderOrFollower(
                    f"Broker {self.node_id} is not the leader of {tp.topic}-{tp.partition}"
                )
            raise UnknownTopicOrPartition(
                f"This server does not host this topic-partition: {tp.topic}-{tp.partition}"
            )
        return partition

    def high_watermark_of(self, tp: TopicPartition) -> int | None:
        """``tp``'s high watermark here, None if it is not hosted here."""
        partition = self._partitions.get(tp)
        return partition.high_watermark if partition is not None else None

    def partitions(self) -> dict[TopicPartition, Partition[Log]]:
        return dict(self._partitions)

    def append_records(
        self,
        tp: TopicPartition,
        records: memoryview | bytes,
        required_acks: int,
        now_ms: int,
        from_client: bool = True,
        verification_guard: VerificationGuard | None = None,
        transaction_version: int = 0,
    ) -> LogAppendInfo:
        """Append to a leader partition; KafkaError subclasses carry the error code for the client.
        ``from_client`` False is a coordinator's own write, such as a transaction marker;
        ``verification_guard`` is what ``start_transaction_verification`` handed out, for a
        transactional produce while transaction.partition.verification.enable is on;
        ``transaction_version`` a marker's (``append_txn_marker``)."""
        info = self.partition(tp).append_records_to_leader(
            records, required_acks, now_ms, from_client, verification_guard, transaction_version
        )
        for listener in self.append_listeners:
            listener(tp)
        return info

    # -- transaction markers --------------------------------------------------------------

    def append_txn_marker(
        self,
        tp: TopicPartition,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        now_ms: int,
        transaction_version: int = 0,
    ) -> LogAppendInfo:
        """Write a COMMIT or ABORT marker to ``tp`` led here (Kafka's AppendOrigin.COORDINATOR,
        acks=all), completing the producer's transaction in it; no wait for replication.

        Raises (each a KafkaError with its code): UNKNOWN_TOPIC_OR_PARTITION,
        NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS (ISR below min.insync.replicas),
        INVALID_PRODUCER_EPOCH (``producer_epoch`` older than the partition's for the
        producer, or for transactions version 2 not newer than an open transaction's),
        TRANSACTION_COORDINATOR_FENCED (``coordinator_epoch`` older than the last
        marker's), KAFKA_STORAGE_ERROR."""
        batch = control_batch(producer_id, producer_epoch, commit, coordinator_epoch, now_ms)
        return self.append_records(
            tp, batch, -1, now_ms, from_client=False, transaction_version=transaction_version
        )

    async def write_txn_markers(
        self,
        partitions: Sequence[TopicPartition],
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        timeout_ms: int,
        transaction_version: int = 0,
    ) -> dict[TopicPartition, ErrorCode]:
        """The broker side of WriteTxnMarkers for one transaction: a marker to each of
        ``partitions`` (``append_txn_marker``), then a wait until each is replicated (or
        ``timeout_ms``); the error of each partition (ErrorCode.none when written and
        replicated). Both the WriteTxnMarkers handler and a transaction coordinator on this
        broker call it; a marker refused leaves that partition unchanged, so the
        coordinator may simply retry it, and a repeated marker completes nothing twice.
        Each partition whose marker is replicated is told to ``txn_marker_listeners``
        (the group coordinator applies or drops transactional offset commits)."""
        now_ms = int(time.time() * 1000)
        errors: dict[TopicPartition, ErrorCode] = {}
        appended: list[ReplicatedAppend] = []
        for tp in partitions:
            try:
                info = self.append_txn_marker(
                    tp,
                    producer_id,
                    producer_epoch,
                    commit,
                    coordinator_epoch,
                    now_ms,
                    transaction_version,
                )
            except KafkaError as e:
                errors[tp] = e.error_code
                continue
            appended.append((tp, info.last_offset + 1, self.partition(tp).leader_epoch))
        replicated = await self.await_replication(appended, timeout_ms) if appended else []
        for (tp, _, _), error in zip(appended, replicated, strict=True):
            errors[tp] = error
            if error == ErrorCode.none:
                for listener in self.txn_marker_listeners:
                    listener(tp, producer_id, commit)
        return {tp: errors[tp] for tp in partitions}

    def start_transaction_verification(
        self, tp: TopicPartition, producer_id: int, sequence: int, epoch: int, now_ms: int
    ) -> VerificationGuard:
        """Kafka's Partition.maybeStartTransactionVerification for ``tp`` led here: ``NO_GUARD``
        when the producer's transaction is open in it already, else the guard that the
        append must carry once the coordinator confirmed the partition (producer_state.py).
        Raises as ``partition``, and NOT_LEADER_OR_FOLLOWER when this broker only follows."""
        partition = self.partition(tp)
        if not partition.is_leader:
            raise NotLeaderOrFollower(
                f"Broker {self.node_id} is not the leader of {tp.topic}-{tp.partition}"
            )
        return partition.log.producer_state.start_verification(producer_id, sequence, epoch, now_ms)

    async def await_replication(
        self, appends: Sequence[ReplicatedAppend], timeout_ms: int
    ) -> list[ErrorCode]:
        """Kafka's DelayedProduce: wait until each acks=all append is replicated (the high
        watermark reached its end), or ``timeout_ms`` passes, and give each one's error:
        none, NOT_ENOUGH_REPLICAS_AFTER_APPEND (the ISR shrank below min.insync.replicas),
        NOT_LEADER_OR_FOLLOWER (leadership moved), or REQUEST_TIMED_OUT. Woken by high
        watermark moves and leadership changes, never polling; an append already
        replicated (an ISR of this broker alone) returns without waiting."""
        results: list[ErrorCode | None] = [None] * len(appends)
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            waiting = []
            for i, (tp, end_offset, leader_epoch) in enumerate(appends):
                if results[i] is not None:
                    continue
                try:
                    done, error = self.partition(tp).check_enough_replicas_reach_offset(
                        end_offset, leader_epoch
                    )
                except KafkaError as e:  # no longer hosted here
                    done, error = True, e.error_code
                if done:
                    results[i] = error
                else:
                    waiting.append(tp)
            remaining = deadline - time.monotonic()
            if not waiting or remaining <= 0 or self.produce_purgatory.closed:
                break
            await self.produce_purgatory.wait(waiting, remaining)
        return [ErrorCode.request_timed_out if r is None else r for r in results]

    # -- replication: the leader's side ------------------------------------------------------

    def fetch_for_follower(
        self,
        tp: TopicPartition,
        replica_id: int,
        fetch_offset: int,
        current_leader_epoch: int,
        max_bytes: int,
        now_ms: int,
        replica_epoch: int,
    ) -> Any:
        """A follower's fetch of ``tp`` led here: the records from ``fetch_offset`` (not clamped
        to the high watermark); the follower's progress may move the high watermark or add it
        to the ISR."""
        partition = self.partition(tp)
        high_watermark = partition.high_watermark
        data = partition.fetch_for_follower(
            replica_id, fetch_offset, current_leader_epoch, max_bytes, now_ms, replica_epoch
        )
        if partition.high_watermark != high_watermark:
            self._hw_moved(tp)
        self._maybe_alter_isr(tp, partition)
        return data

    def _hw_moved(self, tp: TopicPartition) -> None:
        for listener in self.hw_listeners:
            listener(tp)

    def _maybe_alter_isr(self, tp: TopicPartition, partition: Partition[Log]) -> None:
        if partition.alter_partition_in_flight is not None and tp not in self._altering:
            self._altering.add(tp)
            task = asyncio.get_running_loop().create_task(self._alter_isr(tp, partition))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _alter_isr(self, tp: TopicPartition, partition: Partition[Log]) -> None:
        """Send the partition's proposal until it is answered; a new one (made meanwhile, or
        after a refusal) is sent next. Stops when the partition is no longer hosted here."""
        try:
            while self._partitions.get(tp) is partition:
                proposal = partition.alter_partition_in_flight
                if proposal is None:
                    return
                result = await self.metadata.alter_isr(
                    tp.topic, tp.partition, _isr_update(proposal)
                )
                if result == ErrorCode.request_timed_out:
                    await asyncio.sleep(ALTER_ISR_RETRY_S)
                    continue
                answer = _partition_state(result) if isinstance(result, PartitionImage) else result
                log.info(
                    "ISR of %s-%d to %s: %s",
                    tp.topic,
                    tp.partition,
                    list(proposal.new_isr),
                    "committed" if isinstance(result, PartitionImage) else result.name,
                )
                if partition.on_alter_partition_response(proposal, answer, int(time.time() * 1000)):
                    self._hw_moved(tp)
                if partition.alter_partition_in_flight == proposal:
                    return  # refused for a reason only new metadata settles: wait for it
        finally:
            self._altering.discard(tp)

    async def _expire_isr(self) -> None:
        """Kafka's isr-expiration task: every replica.lag.time.max.ms / 2, propose removing
        ISR members that have not caught up for replica.lag.time.max.ms."""
        while True:
            await asyncio.sleep(self.replica_lag_time_max_ms / 2000)
            now_ms = int(time.time() * 1000)
            for tp, partition in list(self._partitions.items()):
                if partition.is_leader and len(partition.replicas) > 1:
                    partition.maybe_shrink_isr(now_ms)
                    self._maybe_alter_isr(tp, partition)

    # -- replication: the follower's side -----------------------------------------------------

    def followed_partitions(self) -> dict[TopicPartition, Partition[Log]]:
        """The partitions this broker follows (another broker leads them)."""
        return {tp: p for tp, p in self._partitions.items() if not p.is_leader and p.leader_id >= 0}

    def follower_appended(self, tp: TopicPartition, high_watermark_moved: bool) -> None:
        """A follower fetch appended to ``tp``'s log (reads waiting on it may go on)."""
        for listener in self.append_listeners:
            listener(tp)
        if high_watermark_moved:
            self._hw_moved(tp)


def _partition_state(p: PartitionImage) -> PartitionState:
    """The replication input from a partition's metadata image (the local store, which never
    changes an ISR, keeps every partition epoch at 0)."""
    return PartitionState(p.leader, p.leader_epoch, p.isr, p.replicas, p.partition_epoch)


def _isr_update(proposal: AlterPartition) -> IsrUpdate:
    return IsrUpdate(
        proposal.leader_id,
        proposal.leader_epoch,
        proposal.partition_epoch,
        proposal.new_isr,
        proposal.broker_epochs,
    )
