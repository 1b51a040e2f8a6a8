"""CoordinatorRuntime: the asyncio shell a coordinator runs in (Kafka's CoordinatorRuntime).

A coordinator keeps its state in the partitions of an internal compacted topic
(__consumer_offsets for groups; __transaction_state for transactions, next) and
its logic in a sans-I/O core. The runtime does the I/O for it:

- ``load_partition`` replays one partition of the topic into the core, after which
  the core's keys (group ids, transactional ids) of that partition are coordinated
  here; ``unload_partition`` drops them again. The runtime is the topic's
  LeadershipListener (replica_manager.py): the ReplicaManager calls
  ``on_election`` when this broker becomes a partition's leader and
  ``on_resignation`` when it stops (Kafka's onElection and onResignation), so the
  keys are coordinated by whichever broker leads their partition; a single node
  leads, and so loads, every partition at start-up. Calls for keys of partitions
  not loaded get NOT_COORDINATOR. A load runs on the event loop in one go, so no
  request can see a partition half loaded (Kafka, loading in the background,
  answers COORDINATOR_LOAD_IN_PROGRESS meanwhile; here that state never exists).
- ``call`` runs one core method with the current time and appends the records it
  queued before the caller answers its client. Appends are synchronous on the event
  loop, so once ``call`` returns the records are in the log (flushed per the topic's
  flush settings). If they cannot be written, the keys' state is put back as it was
  (the core's snapshot; Kafka reverts to its timeline snapshot), answers the call
  gave to other waiting clients are withheld (they still wait, as before), and
  CoordinatorWriteError carries the error Kafka would answer.
- Reads answer committed state where the subclass keeps it: ``appended`` hands it the
  state before each call whose records are not yet below the high watermark, and
  ``load_uncommitted`` replays what a loaded log holds above it (the group coordinator
  answers OffsetFetch, DescribeGroups, ListGroups and ConsumerGroupDescribe from the state
  before them until the high watermark passes them, as Kafka's reads at lastCommittedOffset).
- ``call_verified`` is ``call`` for a transactional write whose partition a transaction
  coordinator confirmed (KIP-890 verification): the transactional batches it appends carry
  the verification guard, which the log checks.
- ``wait`` runs a core method that answers through a callback (a JoinGroup waiting
  for the other members) and awaits the answer.
- One ``loop.call_later`` timer is armed at the core's next deadline; when it fires
  the subclass says what is due (``due_work``), each item in its own call so that a
  failed write reverts only its own change. Nothing polls or sleeps.
"""

from __future__ import annotations

import asyncio
import logging
import time
from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any, Generic, Protocol, TypeVar

from odradek.coordinator.batches import CoordinatorRecord, LoadedMarker, decode_log, encode_batch
from odradek.metadata.store import TopicExists
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.replication.replica_manager import ReplicaManager, ReplicatedAppend
from odradek.storage import TopicPartition
from odradek.storage.producer_state import VerificationGuard

log = logging.getLogger(__name__)

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

#: Bytes read per step while replaying a partition.
LOAD_BUFFER_BYTES = 5 * 1024 * 1024
#: How long the timer waits before retrying deadlines whose records could not be written.
TIMER_RETRY_BACKOFF_MS = 1_000

#: How a failed append to a coordinator topic is answered, as Kafka's
#: CoordinatorOperationExceptionHelper.handleOperationException maps it.
_WRITE_ERRORS = {
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas_after_append: ErrorCode.coordinator_not_available,
    ErrorCode.request_timed_out: ErrorCode.coordinator_not_available,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
    ErrorCode.message_too_large: ErrorCode.unknown_server_error,
    ErrorCode.record_list_too_large: ErrorCode.unknown_server_error,
    ErrorCode.invalid_fetch_size: ErrorCode.unknown_server_error,
}


class CoordinatorCore(Protocol):
    """What a sans-I/O coordinator offers its runtime. Keys are what clients name (group ids)."""

    def partition_for(self, key: str) -> int: ...

    def load_record(
        self, key: bytes, value: bytes | None, now_ms: int, producer_id: int = -1
    ) -> None: ...

    def replay_end_transaction(
        self, partition: int, producer_id: int, commit: bool, now_ms: int
    ) -> None: ...

    def unload_partition(self, partition: int) -> list[str]: ...

    def drain_records(self) -> list[CoordinatorRecord]: ...

    def snapshot(self, keys: Iterable[str]) -> Any: ...

    def restore(self, snapshot: Any) -> None: ...

    def next_deadline_ms(self) -> int | None: ...


C = TypeVar("C", bound=CoordinatorCore)


class Waiting(Protocol[T_co]):
    """A core call that answers through ``callback`` (now, or once other clients act)."""

    def __call__(self, callback: Callable[[T_co], None], now_ms: int) -> None: ...


class CoordinatorWriteError(Exception):
    """A coordinator call failed: its records could not be appended, or its keys' partition is
    not loaded here; the state is as before the call and ``error_code`` is what the client is
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


class CoordinatorRuntime(ABC, Generic[C]):
    def __init__(self, name: str, topic: str, replica_manager: ReplicaManager, core: C) -> None:
        self.name = name
        self.topic = topic
        self.core = core
        self._replica_manager = replica_manager
        #: The partitions of ``topic`` whose keys this broker coordinates.
        self.loaded_partitions: set[int] = set()
        self._timer: asyncio.TimerHandle | None = None
        #: Answers to waiting clients given during a ``call``, sent once its records are written.
        self._held: list[tuple[asyncio.Future[Any], Any]] | None = None
        #: After a failed timer write, the timer waits until then.
        self._retry_after_ms = 0
        #: The appends of the last ``call``, for ``await_replicated``.
        self._last_appends: list[ReplicatedAppend] = []
        #: The verification guard of the ``call_verified`` under way, None outside one.
        self._verification_guard: VerificationGuard | None = None

    @abstractmethod
    def due_work(self, now_ms: int) -> list[tuple[Callable[..., object], str]]:
        """What the timer does at ``now_ms``: (core method, key) pairs, each run as
        ``call(method, [key], key)``."""

    async def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    # ---- partitions -------------------------------------------------------------------------

    def load_partition(self, partition: int) -> int:
        """Replay one partition of the topic into the core and coordinate its keys from now on;
        the number of records replayed (none for a partition already loaded: its state in memory
        is newer than or equal to what the log holds)."""
        if partition in self.loaded_partitions:
            return 0
        replica = self._replica_manager.partition(TopicPartition(self.topic, partition))
        start = now_ms()
        committed = replica.high_watermark
        count = self.replay(partition, replica.log_start_offset, committed, start)
        if committed < replica.log_end_offset:
            count += self.load_uncommitted(partition, committed, replica.log_end_offset, start)
        self.loaded_partitions.add(partition)
        log.debug("%s loaded %d records of %s-%d", self.name, count, self.topic, partition)
        self._rearm()
        return count

    def replay(self, partition: int, start_offset: int, end_offset: int, now_ms: int) -> int:
        """Replay the records of ``partition`` from ``start_offset`` up to ``end_offset`` into
        the core; how many there were."""
        log_ = self._replica_manager.partition(TopicPartition(self.topic, partition)).log
        count = 0
        offset = start_offset
        while offset < end_offset:
            data = b"".join(r.read_bytes() for r in log_.read(offset, LOAD_BUFFER_BYTES).regions)
            if not data:
                break
            for item in decode_log(data):
                if item.offset < offset:
                    continue
                if item.offset >= end_offset:
                    return count
                if isinstance(item, LoadedMarker):
                    self.core.replay_end_transaction(
                        partition, item.producer_id, item.commit, now_ms
                    )
                else:
                    self.core.load_record(item.key, item.value, now_ms, item.producer_id)
                count += 1
                offset = item.offset + 1
        return count

    def load_uncommitted(
        self, partition: int, high_watermark: int, log_end_offset: int, now_ms: int
    ) -> int:
        """Replay the records a loaded partition holds above its high watermark: a new
        leader's log may end with records it does not know to be replicated yet (its high
        watermark is the one it last heard of, or checkpointed). The group coordinator keeps
        them from reads until the high watermark passes them."""
        return self.replay(partition, high_watermark, log_end_offset, now_ms)

    def unload_partition(self, partition: int) -> None:
        """Stop coordinating the keys of one partition: the core drops their state (the records
        stay in the log for whoever loads it next) and answers clients waiting on them
        NOT_COORDINATOR."""
        self.loaded_partitions.discard(partition)
        dropped = self.core.unload_partition(partition)
        log.info("%s unloaded %d of %s-%d", self.name, len(dropped), self.topic, partition)
        self._rearm()

    def on_election(self, partition: int, leader_epoch: int) -> None:
        count = self.load_partition(partition)
        log.info(
            "%s elected for %s-%d (leader epoch %d): %d records loaded",
            self.name,
            self.topic,
            partition,
            leader_epoch,
            count,
        )

    def on_resignation(self, partition: int) -> None:
        if partition in self.loaded_partitions:
            self.unload_partition(partition)

    def coordinates(self, key: str) -> bool:
        """Whether ``key``'s partition is loaded here (else clients are told NOT_COORDINATOR)."""
        return self.core.partition_for(key) in self.loaded_partitions

    # ---- calls ------------------------------------------------------------------------------

    def call(self, fn: Callable[..., T], keys: Iterable[str], *args: Any, **kwargs: Any) -> T:
        """Run one core method on ``keys`` with the current time, persist what it queued,
        re-arm the timer (see the module docstring)."""
        keys = list(keys)
        for key in keys:
            if not self.coordinates(key):
                raise CoordinatorWriteError(
                    ErrorCode.not_coordinator, f"{key} is not coordinated by this {self.name}"
                )
        snapshot = self.core.snapshot(keys)
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
                log.error("%s %s failed", self.name, getattr(fn, "__name__", fn), exc_info=exc)
            raise CoordinatorWriteError(code, str(exc)) from exc
        self.appended(snapshot)
        held, self._held = self._held, None
        for future, answer in held:
            if not future.done():
                future.set_result(answer)
        self._rearm()
        return result

    def appended(self, snapshot: Any) -> None:
        """A ``call``'s records (``_last_appends``) are appended; ``snapshot`` holds its keys as
        they were before it. A coordinator whose reads answer the state at the high watermark
        (the group coordinator) keeps it while the records are not replicated."""

    def call_verified(
        self,
        guard: VerificationGuard | None,
        fn: Callable[..., T],
        keys: Iterable[str],
        *args: Any,
        **kwargs: Any,
    ) -> T:
        """``call`` whose transactional batches carry ``guard`` (see the module docstring);
        with None (verification off) the same as ``call``."""
        self._verification_guard = guard
        try:
            return self.call(fn, keys, *args, **kwargs)
        finally:
            self._verification_guard = None

    async def wait(self, start: Waiting[T], keys: Iterable[str]) -> T:
        """Run a core method that answers through a callback, and wait for the answer."""
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()

        def deliver(result: T) -> None:
            if future.done():
                return
            if self._held is not None:
                self._held.append((future, result))
            else:
                future.set_result(result)

        self.call(start, keys, deliver)
        return await future

    def _persist(self) -> None:
        # One batch per partition, and per producer for transactional records.
        by_batch: dict[tuple[int, int, int], list[tuple[bytes, bytes | None]]] = defaultdict(list)
        for record in self.core.drain_records():
            batch_key = (record.partition, record.producer_id, record.producer_epoch)
            by_batch[batch_key].append((record.key, record.value))
        stamp = now_ms()
        appends = []
        for (partition, producer_id, epoch), records in by_batch.items():
            tp = TopicPartition(self.topic, partition)
            batch = encode_batch(records, stamp, producer_id, epoch)
            # A coordinator's own write (Kafka's AppendOrigin.COORDINATOR): its transactional
            # batches carry no sequence numbers.
            info = self._replica_manager.append_records(
                tp,
                batch,
                -1,
                stamp,
                from_client=False,
                verification_guard=self._verification_guard if producer_id >= 0 else None,
            )
            leader_epoch = self._replica_manager.partition(tp).leader_epoch
            appends.append((tp, info.last_offset + 1, leader_epoch))
        self._last_appends = appends

    async def await_replicated(self, timeout_ms: int) -> ErrorCode:
        """Wait until the records of the ``call`` just made are replicated to the ISR.

        Kafka's coordinator answers a write only once the high watermark passes it, so that
        an acknowledged commit survives the coordinator's failover. Called right after
        ``call``, before any other call can run. The error, when replication did not
        complete, is what Kafka's coordinator answers for a failed write
        (COORDINATOR_NOT_AVAILABLE, or NOT_COORDINATOR once leadership moved). The state
        in memory keeps the write, as Kafka's CoordinatorRuntime does when a write's
        replication times out (it reverts only writes that failed to append): the records
        are in this leader's log and become durable once the followers fetch them, and if
        leadership moves first the partition is unloaded here and the new leader replays its
        own log. Reads meanwhile do not see the write, as in Kafka, whose reads answer the
        state at the last replicated offset: the group coordinator keeps the state as it was
        before the write until the high watermark passes it (``appended``; uncommitted.py).
        """
        appends, self._last_appends = self._last_appends, []
        if not appends:
            return ErrorCode.none
        for error in await self._replica_manager.await_replication(appends, timeout_ms):
            if error != ErrorCode.none:
                return _WRITE_ERRORS.get(error, ErrorCode.coordinator_not_available)
        return ErrorCode.none

    # ---- timer ------------------------------------------------------------------------------

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
        self._timer = None
        for fn, key in self.due_work(now_ms()):
            try:
                self.call(fn, [key], key)
            except CoordinatorWriteError as exc:
                # Kept as before; retried once the back-off has passed.
                log.warning("%s timer for %s not written: %s", self.name, key, exc)
                self._retry_after_ms = now_ms() + TIMER_RETRY_BACKOFF_MS
            except Exception:
                log.exception("%s timer failed for %s", self.name, key)
        self._rearm()


def ensure_internal_topic(
    broker: Any,
    topic: str,
    partitions: int,
    replication_config: str,
    replication_factor: int,
    configs: Callable[[int], dict[str, str]],
) -> None:
    """Create a coordinator's topic if it does not exist yet (at start-up, and on
    FindCoordinator while it is missing, as Kafka); ``configs(replication)`` gives its topic
    configs for the replication factor chosen.

    A cluster creates it only once as many brokers are registered as ``replication_config``
    asks: a broker starting before the others would otherwise give its partitions fewer
    replicas for good (Kafka refuses the creation, and FindCoordinator answers
    COORDINATOR_NOT_AVAILABLE, until enough brokers are alive). A single node gives it the
    one replica it has.
    """
    metadata = broker.metadata
    if metadata.topic(topic) is not None:
        return
    alive = len(metadata.brokers())
    replication = replication_factor
    if not broker.config.get("zookeeper.connect"):
        replication = min(replication, alive)
    elif alive < replication:
        log.info(
            "%s not created yet: %d brokers alive, %s is %d",
            topic,
            alive,
            replication_config,
            replication,
        )
        return
    try:
        metadata.create_topic(topic, partitions, replication, configs(replication), internal=True)
    except TopicExists:
        pass  # another broker of the cluster created it first
