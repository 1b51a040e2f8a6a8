"""The asyncio shell around GroupCoordinator: timers, persistence and start-up load.

It owns the broker's __consumer_offsets topic (created on first start, compacted),
replays it into the sans-I/O core at start-up, appends the records the core
queues after every call before the caller answers its client, and keeps one
``loop.call_later`` timer armed at the core's next deadline (session expiry,
end of a join phase, offset retention). JoinGroup and SyncGroup wait on futures
the core completes; nothing polls or sleeps.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any, TypeVar

from odradek.coordinator.batches import decode_records, encode_batch
from odradek.coordinator.config import GroupCoordinatorConfig
from odradek.coordinator.coordinator import OFFSETS_TOPIC, GroupCoordinator
from odradek.storage import TopicPartition

log = logging.getLogger(__name__)

T = TypeVar("T")

#: __consumer_offsets topic configs, as Kafka sets them.
OFFSETS_TOPIC_CONFIGS = {"cleanup.policy": "compact", "compression.type": "producer"}
#: Bytes read per step while replaying a partition at start-up.
LOAD_BUFFER_BYTES = 5 * 1024 * 1024


def now_ms() -> int:
    return int(time.time() * 1000)


class GroupCoordinatorService:
    """Broker component (see server/components.py) named "group_coordinator"."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        props = {name: broker.config.get(name) for name in (
            "group.min.session.timeout.ms", "group.max.session.timeout.ms", "group.initial.rebalance.delay.ms",
            "group.max.size", "offsets.topic.num.partitions", "offsets.topic.replication.factor",
            "offsets.topic.segment.bytes", "offset.metadata.max.bytes", "offsets.retention.minutes",
            "offsets.retention.check.interval.ms", "group.consumer.session.timeout.ms",
            "group.consumer.heartbeat.interval.ms",
        )}
        self.config = GroupCoordinatorConfig.from_properties(props)
        self.core = GroupCoordinator(self.config)
        self._timer: asyncio.TimerHandle | None = None

    async def start(self) -> None:
        self._ensure_offsets_topic()
        loaded = self._load()
        log.info("group coordinator loaded %d records of %s", loaded, OFFSETS_TOPIC)
        self._rearm()

    async def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _ensure_offsets_topic(self) -> None:
        metadata = self.broker.metadata
        if metadata.topic(OFFSETS_TOPIC) is not None:
            return
        replication = min(self.config.offsets_topic_replication_factor, len(metadata.brokers()))
        configs = dict(OFFSETS_TOPIC_CONFIGS, **{"segment.bytes": str(self.config.offsets_topic_segment_bytes)})
        metadata.create_topic(OFFSETS_TOPIC, self.config.offsets_topic_num_partitions, replication, configs,
                              internal=True)

    def _load(self) -> int:
        """Replay every partition of __consumer_offsets this broker leads into the core."""
        count = 0
        start = now_ms()
        for tp, partition in self.broker.replica_manager.partitions().items():
            if tp.topic != OFFSETS_TOPIC:
                continue
            log_ = partition.log
            offset = log_.log_start_offset
            while offset < log_.log_end_offset:
                data = b"".join(r.read_bytes() for r in log_.read(offset, LOAD_BUFFER_BYTES).regions)
                if not data:
                    break
                for record_offset, key, value in decode_records(data):
                    if record_offset >= offset:
                        self.core.load_record(key, value, start)
                        count += 1
                        offset = record_offset + 1
        self.core.drain_records()
        return count

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run one core method with the current time, persist what it queued, re-arm the timer.

        Appends are synchronous on this event loop, so once ``call`` returns the
        records are in the log (flushed per the topic's flush settings) and the
        caller may answer its client.
        """
        result = fn(*args, now_ms=now_ms(), **kwargs)
        self._persist()
        self._rearm()
        return result

    def _persist(self) -> None:
        by_partition: dict[int, list[tuple[bytes, bytes | None]]] = defaultdict(list)
        for record in self.core.drain_records():
            by_partition[record.partition].append((record.key, record.value))
        stamp = now_ms()
        for partition, records in by_partition.items():
            tp = TopicPartition(OFFSETS_TOPIC, partition)
            self.broker.replica_manager.append_records(tp, encode_batch(records, stamp), -1, stamp)

    def _rearm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        deadline = self.core.next_deadline_ms()
        if deadline is None:
            return
        delay = max(deadline - now_ms(), 0) / 1000
        self._timer = asyncio.get_running_loop().call_later(delay, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        try:
            self.core.poll(now_ms())
            self._persist()
        except Exception:
            log.exception("group coordinator timer failed")
        self._rearm()

    async def wait(self, start: Callable[[Callable[[T], None]], None]) -> T:
        """Run a core method that answers through a callback, and wait for the answer."""
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()

        def deliver(result: T) -> None:
            if not future.done():
                future.set_result(result)

        self.call(start, deliver)
        return await future
