"""GroupCoordinatorService: the group coordinator as a broker component.

The CoordinatorRuntime (runtime.py) around the sans-I/O GroupCoordinator, on the
broker's __consumer_offsets topic: created on first start (compacted, as Kafka
sets it), the partitions led here loaded as this broker becomes their leader and
unloaded as it stops (the ReplicaManager tells it; see runtime.py), and a timer that expires
sessions, ends join phases and applies offset retention. A transaction marker
replicated in one of its partitions applies or drops that transaction's offsets
(``on_txn_marker``, a ReplicaManager listener), whoever wrote it. Handlers reach it as
``broker.components["group_coordinator"]`` and go through ``call`` and ``wait``.

Reads answer the state at the high watermark of the group's partition, as Kafka's
scheduleReadOperation at lastCommittedOffset: a call whose records are appended above the
high watermark leaves the core its snapshot of the groups before it (``appended``), and the
core's reads answer those until the ReplicaManager tells of the high watermark passing the
records (``on_high_watermark``, a ``hw_listeners`` entry). A partition loaded with records
above its high watermark (a new leader that has not heard of the last one yet) is read as
of that high watermark until it passes them all (``load_uncommitted``). A single node's high
watermark passes every write as it is appended, so nothing is kept there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from odradek.coordinator.config import GroupCoordinatorConfig
from odradek.coordinator.coordinator import GroupCoordinator, Snapshot
from odradek.coordinator.records import OFFSETS_TOPIC
from odradek.coordinator.runtime import CoordinatorRuntime, ensure_internal_topic, now_ms
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
        self.broker.replica_manager.txn_marker_listeners.append(self.on_txn_marker)
        self.broker.replica_manager.hw_listeners.append(self.on_high_watermark)
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

    def on_txn_marker(self, tp: TopicPartition, producer_id: int, commit: bool) -> None:
        """A transaction marker replicated in ``tp`` (ReplicaManager.txn_marker_listeners): in
        a __consumer_offsets partition coordinated here, the producer's pending offsets are
        applied or dropped, as Kafka's GroupCoordinator.onTransactionCompleted. A partition
        not loaded here replays the marker from its log when it is loaded."""
        if tp.topic == OFFSETS_TOPIC and tp.partition in self.loaded_partitions:
            self.core.replay_end_transaction(tp.partition, producer_id, commit, now_ms())

    def appended(self, snapshot: Snapshot) -> None:
        """Records of a call not yet below their partition's high watermark: the core answers
        reads from ``snapshot`` (its groups before the call) until they are."""
        replica_manager = self.broker.replica_manager
        for tp, end_offset, _ in self._last_appends:
            high_watermark = replica_manager.high_watermark_of(tp)
            if high_watermark is not None and high_watermark < end_offset:
                self.core.written(tp.partition, end_offset, snapshot)

    def load_uncommitted(
        self, partition: int, high_watermark: int, log_end_offset: int, now_ms: int
    ) -> int:
        """The records above the high watermark are loaded, and kept from reads until it
        passes them (GroupCoordinator.loaded_uncommitted)."""
        before = self.core.snapshot_partition(partition)
        count = super().load_uncommitted(partition, high_watermark, log_end_offset, now_ms)
        self.core.loaded_uncommitted(partition, log_end_offset, before)
        return count

    def on_high_watermark(self, tp: TopicPartition) -> None:
        """``tp``'s high watermark moved (ReplicaManager.hw_listeners): the writes below it
        become visible to reads."""
        if tp.topic != OFFSETS_TOPIC or not self.core.uncommitted.has_writes(tp.partition):
            return
        high_watermark = self.broker.replica_manager.high_watermark_of(tp)
        if high_watermark is not None:
            self.core.committed(tp.partition, high_watermark)

    def due_work(self, now_ms: int) -> list[tuple[Callable[..., object], str]]:
        """Each due group's deadlines, and once per retention interval every group's offsets."""
        work: list[tuple[Callable[..., object], str]] = [
            (self.core.poll_group, gid) for gid in self.core.due_groups(now_ms)
        ]
        if self.core.retention_due(now_ms):
            work += [(self.core.expire_group_offsets, gid) for gid in list(self.core.groups)]
        return work
