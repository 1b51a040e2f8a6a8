"""GroupCoordinatorService: the group coordinator as a broker component.

The CoordinatorRuntime (runtime.py) around the sans-I/O GroupCoordinator, on the
broker's __consumer_offsets topic: created on first start (compacted, as Kafka
sets it), the partitions led here loaded as this broker becomes their leader and
unloaded as it stops (the ReplicaManager tells it; see runtime.py), and a timer that expires
sessions, ends join phases and applies offset retention. Transaction markers for its
partitions are written here (``complete_transaction``), so that the marker and the
transaction's offsets change together. Handlers reach it as
``broker.components["group_coordinator"]`` and go through ``call`` and ``wait``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from odradek.coordinator.config import GroupCoordinatorConfig
from odradek.coordinator.coordinator import GroupCoordinator
from odradek.coordinator.records import OFFSETS_TOPIC
from odradek.coordinator.runtime import CoordinatorRuntime, ensure_internal_topic, now_ms
from odradek.protocol.records import control_batch
from odradek.replication.replica_manager import NotLeaderOrFollower, ReplicatedAppend
from odradek.storage import TopicPartition

log = logging.getLogger(__name__)

#: __consumer_offsets topic configs, as Kafka sets them.
OFFSETS_TOPIC_CONFIGS = {"cleanup.policy": "compact", "compression.type": "producer"}

#: The broker configs the group coordinator reads.
_CONFIG_NAMES = (
    "group.min.session.timeout.ms",
    "group.max.session.timeout.ms",
    "group.initial.rebalance.delay.ms",
    "group.max.size",
    "offsets.topic.num.partitions",
    "offsets.topic.replication.factor",
    "offsets.topic.segment.bytes",
    "offset.metadata.max.bytes",
    "offsets.retention.minutes",
    "offsets.retention.check.interval.ms",
    "group.consumer.session.timeout.ms",
    "group.consumer.heartbeat.interval.ms",
    "group.consumer.max.size",
    "group.consumer.migration.policy",
)


class GroupCoordinatorService(CoordinatorRuntime[GroupCoordinator]):
    """Broker component (see server/components.py) named "group_coordinator"."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self.config = GroupCoordinatorConfig.from_properties(
            {name: broker.config.get(name) for name in _CONFIG_NAMES}
        )
        super().__init__(
            "group coordinator",
            OFFSETS_TOPIC,
            broker.replica_manager,
            GroupCoordinator(self.config),
        )

    async def start(self) -> None:
        self.ensure_offsets_topic()
        self.broker.replica_manager.add_leadership_listener(OFFSETS_TOPIC, self)
        log.info(
            "group coordinator leads %d partitions of %s",
            len(self.loaded_partitions),
            OFFSETS_TOPIC,
        )

    def ensure_offsets_topic(self) -> None:
        """Create __consumer_offsets if it is missing (see runtime.ensure_internal_topic)."""
        segment_bytes = str(self.config.offsets_topic_segment_bytes)
        ensure_internal_topic(
            self.broker,
            OFFSETS_TOPIC,
            self.config.offsets_topic_num_partitions,
            "offsets.topic.replication.factor",
            self.config.offsets_topic_replication_factor,
            lambda _replication: dict(OFFSETS_TOPIC_CONFIGS, **{"segment.bytes": segment_bytes}),
        )

    def complete_transaction(
        self,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
    ) -> ReplicatedAppend:
        """Write a transaction's marker to __consumer_offsets ``partition`` and apply or drop the
        offsets its producer committed there (Kafka's GroupCoordinator.completeTransaction,
        which the WriteTxnMarkers path calls for this topic's partitions). The append is
        returned for the caller to await its replication; KafkaError when it fails."""
        tp = TopicPartition(OFFSETS_TOPIC, partition)
        if partition not in self.loaded_partitions:
            raise NotLeaderOrFollower(f"{tp} is not coordinated here")
        stamp = now_ms()
        batch = control_batch(producer_id, producer_epoch, commit, coordinator_epoch, stamp)
        info = self.broker.replica_manager.append_records(tp, batch, -1, stamp, from_client=False)
        self.core.replay_end_transaction(partition, producer_id, commit, stamp)
        return tp, info.last_offset + 1, self.broker.replica_manager.partition(tp).leader_epoch

    def due_work(self, now_ms: int) -> list[tuple[Callable[..., object], str]]:
        """Each due group's deadlines, and once per retention interval every group's offsets."""
        work: list[tuple[Callable[..., object], str]] = [
            (self.core.poll_group, gid) for gid in self.core.due_groups(now_ms)
        ]
        if self.core.retention_due(now_ms):
            work += [(self.core.expire_group_offsets, gid) for gid in list(self.core.groups)]
        return work
