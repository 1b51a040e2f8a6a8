"""ReplicaManager: the partitions this broker hosts, kept in step with the metadata image.

It subscribes to the MetadataStore, so a topic created by any path (admin API,
auto creation, coordinators' internal topics) gets its Partition and Log here,
a deleted one loses them, and config changes reach the Log live. Appends go
through it so that waiters in the purgatory can be woken when a log grows.
"""

from __future__ import annotations

from collections.abc import Callable

from odradek.metadata.image import TopicImage
from odradek.metadata.store import MetadataStore
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.replication.partition import Partition
from odradek.storage import LogAppendInfo, LogConfig, LogManager, TopicPartition



class UnknownTopicOrPartition(KafkaError):
    error_code = ErrorCode.unknown_topic_or_partition


class ReplicaManager:
    def __init__(self, log_manager: LogManager, metadata: MetadataStore, node_id: int, default_config: LogConfig) -> None:
        self.log_manager = log_manager
        self.metadata = metadata
        self.node_id = node_id
        self.default_config = default_config
        self._partitions: dict[TopicPartition, Partition] = {}
        #: Called with a TopicPartition after every append to it (the purgatory listens).
        self.append_listeners: list[Callable[[TopicPartition], None]] = []

    def startup(self) -> None:
        """Become leader of every partition in the image, then follow its changes."""
        for topic in self.metadata.topics().values():
            self.on_topic_changed(None, topic)
        self.metadata.subscribe(self)

    def log_config(self, topic: TopicImage) -> LogConfig:
        return LogConfig.from_properties(topic.configs, base=self.default_config)

    def on_topic_changed(self, before: TopicImage | None, after: TopicImage | None) -> None:
        if after is None:
            assert before is not None
            for p in before.partitions:
                tp = TopicPartition(before.name, p.partition)
                self._partitions.pop(tp, None)
                self.log_manager.delete_log(tp)
            return
        config = self.log_config(after)
        new = []
        for p in after.partitions:
            tp = TopicPartition(after.name, p.partition)
            partition = self._partitions.get(tp)
            if partition is None:
                if p.leader == self.node_id:
                    new.append((tp, p.leader_epoch))
            elif before is not None and before.configs != after.configs:
                partition.log.update_config(config)
        # One call for all new partitions: the log dirs are fsynced once, not once per partition.
        logs = self.log_manager.get_or_create_logs([tp for tp, _ in new], config)
        for (tp, leader_epoch), log_ in zip(new, logs):
            log_.leader_epoch_cache.assign(leader_epoch, log_.log_end_offset)
            self._partitions[tp] = Partition(log_, self.node_id, leader_epoch)

    def update_default_config(self, default_config: LogConfig) -> None:
        """Broker-level log.* defaults changed: every topic's effective config is recomputed."""
        self.default_config = default_config
        for topic in self.metadata.topics().values():
            config = self.log_config(topic)
            for p in topic.partitions:
                partition = self._partitions.get(TopicPartition(topic.name, p.partition))
                if partition is not None:
                    partition.log.update_config(config)

    def partition(self, tp: TopicPartition) -> Partition:
        partition = self._partitions.get(tp)
        if partition is None:
            raise UnknownTopicOrPartition(f"This server does not host this topic-partition: {tp.topic}-{tp.partition}")
        return partition

    def partitions(self) -> dict[TopicPartition, Partition]:
        return dict(self._partitions)

    def append_records(self, tp: TopicPartition, records: memoryview | bytes, required_acks: int, now_ms: int) -> LogAppendInfo:
        """Append to a leader partition; KafkaError subclasses carry the error code for the client."""
        info = self.partition(tp).append_records_to_leader(records, required_acks, now_ms)
        for listener in self.append_listeners:
            listener(tp)
        return info
