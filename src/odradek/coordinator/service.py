"""The asyncio shell around GroupCoordinator: timers, persistence, loading and unloading.

It owns the broker's __consumer_offsets topic (created on first start, compacted).
A partition of that topic is coordinated here once ``load_partition`` has
replayed it into the sans-I/O core, and stops being so after
``unload_partition`` (Kafka's onElection and onResignation, which a cluster
calls as leadership of __consumer_offsets moves; a single node loads every
partition at start-up). Calls for groups of partitions not loaded get
NOT_COORDINATOR. After every call the shell appends the records the core
queued before the caller answers its client, and keeps one ``loop.call_later``
timer armed at the core's next deadline (session expiry, end of a join phase,
offset retention). JoinGroup and SyncGroup wait on futures the core completes;
nothing polls or sleeps.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any, Protocol, TypeVar

from odradek.coordinator.batches import decode_records, encode_batch
from odradek.coordinator.config import GroupCoordinatorConfig
from odradek.coordinator.coordinator import GroupCoordinator
from odradek.coordinator.records import OFFSETS_TOPIC
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.storage import TopicPartition

log = logging.getLogger(__name__)

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

#: __consumer_offsets topic configs, as Kafka sets them.
OFFSETS_TOPIC_CONFIGS = {"cleanup.policy": "compact", "compression.type": "producer"}
#: Bytes read per step while replaying a partition at start-up.
LOAD_BUFFER_BYTES = 5 * 1024 * 1024
#: How long the timer waits before retrying deadlines whose records could not be written.
TIMER_RETRY_BACKOFF_MS = 1_000

#: How a failed __consumer_offsets append is answered, as Kafka's
#: CoordinatorOperationExceptionHelper.handleOperationException maps it.
_WRITE_ERRORS = {
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.request_timed_out: ErrorCode.coordinator_not_available,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
    ErrorCode.message_too_large: ErrorCode.unknown_server_error,
    ErrorCode.record_list_too_large: ErrorCode.unknown_server_error,
    ErrorCode.invalid_fetch_size: ErrorCode.unknown_server_error,
}


class Waiting(Protocol[T_co]):
    """A core call that answers through ``callback`` (now, or once other members act)."""

    def __call__(self, callback: Callable[[T_co], None], now_ms: int) -> None: ...


class CoordinatorWriteError(Exception):
    """A coordinator call failed: its records could not be appended, or its groups' partition is
    not loaded here; the groups are as before the call and ``error_code`` is what the client is
    told."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


def write_error_code(exc: Exception) -> ErrorCode:
    if isinstance(exc, KafkaError):
        return _WRITE_ERRORS.get(exc.error_code, exc.error_code)
    if isinstance(exc, OSError):
        return ErrorCode.not_coordinator  # Kafka sees a KafkaStorageException
    return ErrorCode.unknown_server_error


def now_ms() -> int:
    return int(time.time() * 1000)


class GroupCoordinatorService:
    """Broker component (see server/components.py) named "group_coordinator"."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        props = {
            name: broker.config.get(name)
            for name in (
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
        }
        self.config = GroupCoordinatorConfig.from_properties(props)
        self.core = GroupCoordinator(self.config)
        self._timer: asyncio.TimerHandle | None = None
        #: Answers to waiting members given during a ``call``, sent once its records are written.
        self._held: list[tuple[asyncio.Future[Any], Any]] | None = None
        #: After a failed timer write, the timer waits until then.
        self._retry_after_ms = 0
        #: The __consumer_offsets partitions whose groups this broker coordinates.
        self.loaded_partitions: set[int] = set()

    async def start(self) -> None:
        self._ensure_offsets_topic()
        partitions = [
            tp.partition
            for tp in self.broker.replica_manager.partitions()
            if tp.topic == OFFSETS_TOPIC
        ]
        loaded = sum(self.load_partition(p) for p in partitions)
        log.info(
            "group coordinator loaded %d records of %d partitions of %s",
            loaded,
            len(partitions),
            OFFSETS_TOPIC,
        )

    async def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _ensure_offsets_topic(self) -> None:
        metadata = self.broker.metadata
        if metadata.topic(OFFSETS_TOPIC) is not None:
            return
        replication = min(self.config.offsets_topic_replication_factor, len(metadata.brokers()))
        configs = dict(
            OFFSETS_TOPIC_CONFIGS, **{"segment.bytes": str(self.config.offsets_topic_segment_bytes)}
        )
        metadata.create_topic(
            OFFSETS_TOPIC,
            self.config.offsets_topic_num_partitions,
            replication,
            configs,
            internal=True,
        )

    def load_partition(self, partition: int) -> int:
        """Replay one partition of __consumer_offsets into the core and coordinate its groups from
        now on; the number of records replayed."""
        log_ = self.broker.replica_manager.partition(TopicPartition(OFFSETS_TOPIC, partition)).log
        count = 0
        start = now_ms()
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
        self.loaded_partitions.add(partition)
        log.debug("group coordinator loaded %d records of %s-%d", count, OFFSETS_TOPIC, partition)
        self._rearm()
        return count

    def unload_partition(self, partition: int) -> None:
        """Stop coordinating the groups of one partition: they are dropped from memory (their
        records stay in the log for whoever loads it next) and members waiting in a join or sync
        are answered NOT_COORDINATOR."""
        self.loaded_partitions.discard(partition)
        dropped = self.core.unload_partition(partition)
        log.info(
            "group coordinator unloaded %d groups of %s-%d", len(dropped), OFFSETS_TOPIC, partition
        )
        self._rearm()

    def call(self, fn: Callable[..., T], group_ids: Iterable[str], *args: Any, **kwargs: Any) -> T:
        """Run one core method on ``group_ids`` with the current time, persist what it queued,
        re-arm the timer.

        Appends are synchronous on this event loop, so once ``call`` returns the records are in
        the log (flushed per the topic's flush settings) and the caller may answer its client.
        If they cannot be written, the groups are put back as they were before the call, answers
        the call gave to waiting members are withheld (they still wait, as before), and
        CoordinatorWriteError carries the error Kafka would answer.
        """
        group_ids = list(group_ids)
        for group_id in group_ids:
            if self.core.partition_for(group_id) not in self.loaded_partitions:
                raise CoordinatorWriteError(
                    ErrorCode.not_coordinator, f"group {group_id} is not coordinated here"
                )
        snapshot = self.core.snapshot(group_ids)
        self._held = []
        try:
            result = fn(*args, now_ms=now_ms(), **kwargs)
            self._persist()
        except Exception as exc:
            self.core.restore(snapshot)
            self._held = None
            self._rearm()
            code = write_error_code(exc)
            if code == ErrorCode.unknown_server_error:
                log.error("group coordinator %s failed", getattr(fn, "__name__", fn), exc_info=exc)
            raise CoordinatorWriteError(code, str(exc)) from exc
        held, self._held = self._held, None
        for future, answer in held:
            if not future.done():
                future.set_result(answer)
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
        delay = max(deadline, self._retry_after_ms) - now_ms()
        self._timer = asyncio.get_running_loop().call_later(max(delay, 0) / 1000, self._on_timer)

    def _on_timer(self) -> None:
        """Each due group in its own call, so a failed write reverts only that group's change."""
        self._timer = None
        now = now_ms()
        work: list[tuple[Callable[..., object], str]] = [
            (self.core.poll_group, gid) for gid in self.core.due_groups(now)
        ]
        if self.core.retention_due(now):
            work += [(self.core.expire_group_offsets, gid) for gid in list(self.core.groups)]
        for fn, group_id in work:
            try:
                self.call(fn, [group_id], group_id)
            except CoordinatorWriteError as exc:
                # Kept as before; retried once the back-off has passed.
                log.warning("group coordinator timer for group %s not written: %s", group_id, exc)
                self._retry_after_ms = now_ms() + TIMER_RETRY_BACKOFF_MS
            except Exception:
                log.exception("group coordinator timer failed for group %s", group_id)
        self._rearm()

    async def wait(self, start: Waiting[T], group_ids: Iterable[str]) -> T:
        """Run a core method that answers through a callback, and wait for the answer."""
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()

        def deliver(result: T) -> None:
            if future.done():
                return
            if self._held is not None:
                self._held.append((future, result))
            else:
                future.set_result(result)

        self.call(start, group_ids, deliver)
        return await future
