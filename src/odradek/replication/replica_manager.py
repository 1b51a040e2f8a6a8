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
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from odradek.metadata.image import PartitionImage, TopicImage
from odradek.metadata.store import MetadataStore
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.replication.partition import DEFAULT_REPLICA_LAG_TIME_MAX_MS, Partition
from odradek.replication.partition_state import PartitionState
from odradek.storage import Log, LogAppendInfo, LogConfig, LogManager, TopicPartition

#: Logs created per worker-thread call: fewer calls fsync the log dirs fewer times; a cancelled
#: creation (broker shutdown) stops after the chunk under way.
CREATE_LOGS_CHUNK = 500


class UnknownTopicOrPartition(KafkaError):
    error_code = ErrorCode.unknown_topic_or_partition


class NotLeaderOrFollower(KafkaError):
    error_code = ErrorCode.not_leader_or_follower


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
        #: Per topic, who is told of leadership changes of its partitions here.
        self._leadership_listeners: dict[str, list[LeadershipListener]] = {}
        # Partition growth is serialized (as a controller would), so each one sees the last one's result.
        self._growing = asyncio.Lock()
        # One log-creating worker thread at a time.
        self._creating_logs = asyncio.Lock()

    def startup(self) -> None:
        """Take the role the image gives this broker in each of its partitions, then follow its changes."""
        for topic in self.metadata.topics().values():
            self.on_topic_changed(None, topic)
        self.metadata.subscribe(self)

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
        for p in after.partitions:
            tp = TopicPartition(after.name, p.partition)
            partition = self._partitions.get(tp)
            if self.node_id not in p.replicas:
                # Moved away by a reassignment: stop hosting it; the log stays until deleted.
                if self._partitions.pop(tp, None) is not None:
                    self._tell_leadership(tp, partition.is_leader, None)  # type: ignore[union-attr]
                continue
            if partition is None:
                new.append(p)
                continue
            if before is not None and before.configs != after.configs:
                partition.log.update_config(config)
            was_leader = partition.is_leader
            if partition.apply_state(_partition_state(p), now_ms) and (
                was_leader or partition.is_leader
            ):
                self._tell_leadership(tp, was_leader, partition)
        # Logs made by create_topic/create_partitions already exist; these calls only look them up.
        for p, log_ in zip(new, self._open_logs(after.name, new, config)):
            partition = Partition(
                log_, self.node_id, _partition_state(p), now_ms, self.replica_lag_time_max_ms
            )
            self._partitions[log_.topic_partition] = partition
            if partition.is_leader:
                self._tell_leadership(log_.topic_partition, False, partition)

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
        for p in partitions:
            tp = TopicPartition(topic, p.partition)
            partition = self._partitions.pop(tp, None)
            if partition is not None and partition.is_leader:
                self._tell_leadership(tp, True, None)
            self.log_manager.delete_log(tp)

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
    ) -> TopicImage:
        """Create a topic without holding the event loop; published once its logs exist.

        Errors as ``MetadataStore.new_topic``, or the storage error that stopped
        the logs' creation (the logs already made are removed again).
        """
        topic = self.metadata.new_topic(name, partitions, replication_factor, configs, internal)
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

    def partitions(self) -> dict[TopicPartition, Partition[Log]]:
        return dict(self._partitions)

    def append_records(
        self, tp: TopicPartition, records: memoryview | bytes, required_acks: int, now_ms: int
    ) -> LogAppendInfo:
        """Append to a leader partition; KafkaError subclasses carry the error code for the client."""
        info = self.partition(tp).append_records_to_leader(records, required_acks, now_ms)
        for listener in self.append_listeners:
            listener(tp)
        return info


def _partition_state(p: PartitionImage) -> PartitionState:
    """The replication input from a partition's metadata image. The image carries no
    partition epoch yet (the local store never changes an ISR); 0 stands for it."""
    return PartitionState(p.leader, p.leader_epoch, p.isr, p.replicas)
