"""TransactionCoordinatorService: the transaction coordinator as a broker component.

The CoordinatorRuntime (coordinator/runtime.py) around the sans-I/O
TransactionCoordinator, on __transaction_state: created by the first
FindCoordinator for a transactional id, as in Kafka (compacted, uncompressed, as
Kafka's TransactionLog sets it), its partitions
loaded as this broker becomes their leader and unloaded as it stops, and a
timer that aborts timed-out transactions and removes expired ids. Handlers reach
it as ``broker.components["transaction_coordinator"]``.

Markers. Once a PrepareCommit/PrepareAbort record is written (and replicated),
the markers are written by a task of this shell, one per prepared transaction:
a control batch to every partition of the transaction, to partitions led here
through ``ReplicaManager.write_txn_markers`` (the path a WriteTxnMarkers request
takes too) and to those led elsewhere with WriteTxnMarkers over an inter-broker
connection; then the
transaction is completed. A marker that cannot be written yet (no leader, the
leader down, a replication timeout) is retried after a back-off, as Kafka's
TransactionMarkerChannelManager retries; a partition deleted meanwhile is
skipped, as Kafka drops markers for unknown partitions. A transaction queued
again while its task runs (its partition re-elected here under a new leader epoch)
gets no second task, and the tasks of different transactions take turns on the one
connection to each broker (it carries one request at a time). Once a marker in a
``__consumer_offsets`` partition is replicated, the group coordinator (one of the
ReplicaManager's ``txn_marker_listeners``) applies or drops the transaction's pending
offsets.

``transaction.state.log.min.isr`` is capped at the topic's replication factor,
so that a single node (replication factor 1) can run transactions without
reconfiguration; Kafka applies it unchanged and refuses every transaction
there until it is lowered.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable
from functools import partial
from typing import Any

from odradek.coordinator.runtime import (
    CoordinatorRuntime,
    CoordinatorWriteError,
    ensure_internal_topic,
)
from odradek.coordinator.transaction.config import TransactionConfig
from odradek.coordinator.transaction.coordinator import TransactionCoordinator, TxnMarkers
from odradek.coordinator.transaction.records import TRANSACTION_STATE_TOPIC
from odradek.metadata.features import FINALIZED_FEATURES, TRANSACTION_VERSION
from odradek.network.client import BrokerConnectionError, NodeConnections
from odradek.protocol import schemas
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.storage import TopicPartition

log = logging.getLogger(__name__)

#: Wait between rounds of markers that could not all be written.
MARKER_RETRY_BACKOFF_MS = 100
#: Kafka's request.timeout.ms default: how long a coordinator write waits for replication.
WRITE_TIMEOUT_MS = 30_000
#: How long a marker write waits for replication or a remote broker's answer.
MARKER_TIMEOUT_MS = 30_000
#: What ``await_replication`` answers once the high watermark has passed an append.
_BELOW_HIGH_WATERMARK = (ErrorCode.none, ErrorCode.not_enough_replicas_after_append)
#: WriteTxnMarkers versions this coordinator sends (v0 is gone from Kafka 4; v2 carries the
#: transaction version, which a version 2 transaction's markers need).
WRITE_TXN_MARKERS_VERSIONS = (1, 2)


class TransactionCoordinatorService(CoordinatorRuntime[TransactionCoordinator]):
    """Broker component (see server/components.py) named "transaction_coordinator"."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self.config = TransactionConfig.from_properties(
            {name: broker.config.get(name) for name in TransactionConfig().config_names}
        )
        super().__init__(
            "transaction coordinator",
            TRANSACTION_STATE_TOPIC,
            broker.replica_manager,
            TransactionCoordinator(
                self.config, self._generate_producer_id, FINALIZED_FEATURES[TRANSACTION_VERSION]
            ),
        )
        #: __transaction_state partition -> the leader epoch it was loaded in (the
        #: coordinator epoch markers carry).
        self.coordinator_epochs: dict[int, int] = {}
        #: One task per prepared transaction whose markers are being written: a transaction
        #: queued again meanwhile (its partition re-elected here) is not written twice.
        self._marker_tasks: dict[TxnMarkers, asyncio.Task[None]] = {}
        self._connections = NodeConnections(
            lambda: broker.metadata.brokers(),
            broker.config.inter_broker_listener_name,
            f"broker-{broker.node_id}-txn-markers",
            MARKER_TIMEOUT_MS / 1000,
            broker.inter_broker_security,
        )
        #: A connection carries one request at a time: marker writes of different
        #: transactions to the same broker take turns.
        self._connection_locks: defaultdict[int, asyncio.Lock] = defaultdict(asyncio.Lock)

    def _generate_producer_id(self) -> int:
        return int(self.broker.components["producer_ids"].manager.generate_producer_id())

    async def start(self) -> None:
        """Follow __transaction_state's leaders. The topic itself is created by the first
        FindCoordinator for a transactional id, as Kafka creates it: a broker whose clients
        never use transactions keeps no empty partitions for them."""
        self.broker.replica_manager.add_leadership_listener(TRANSACTION_STATE_TOPIC, self)

    async def stop(self) -> None:
        await super().stop()
        for task in list(self._marker_tasks.values()):
            task.cancel()
        self._connections.close()

    def ensure_transaction_state_topic(self) -> None:
        """Create __transaction_state if it is missing (see runtime.ensure_internal_topic),
        with Kafka's TransactionLog topic configs."""
        config = self.config
        ensure_internal_topic(
            self.broker,
            TRANSACTION_STATE_TOPIC,
            config.transaction_state_log_num_partitions,
            "transaction.state.log.replication.factor",
            config.transaction_state_log_replication_factor,
            lambda replication: {
                "cleanup.policy": "compact",
                "compression.type": "uncompressed",
                "unclean.leader.election.enable": "false",
                "segment.bytes": str(config.transaction_state_log_segment_bytes),
                "min.insync.replicas": str(min(config.transaction_state_log_min_isr, replication)),
            },
        )

    # ---- leadership and calls ---------------------------------------------------------------

    def on_election(self, partition: int, leader_epoch: int) -> None:
        self.coordinator_epochs[partition] = leader_epoch
        super().on_election(partition, leader_epoch)

    def on_resignation(self, partition: int) -> None:
        self.coordinator_epochs.pop(partition, None)
        super().on_resignation(partition)

    def load_partition(self, partition: int) -> int:
        if partition in self.loaded_partitions:
            return 0  # a new leader epoch of a partition led here already: nothing to load
        count = super().load_partition(partition)
        self.core.loaded(partition)
        self._start_markers()
        return count

    def call(self, fn: Callable[..., Any], keys: Any, *args: Any, **kwargs: Any) -> Any:
        """CoordinatorRuntime.call, then the markers the call queued are sent (after their
        Prepare record is replicated: the marker task waits for it)."""
        result = super().call(fn, keys, *args, **kwargs)
        self._start_markers()
        return result

    async def write(self, fn: Callable[..., Any], tid: str, *args: Any, **kwargs: Any) -> Any:
        """Run ``fn`` for ``tid`` and wait for its record's replication, as Kafka answers after
        the append's callback: its result, or the error code of a failed write in its place
        (NOT_COORDINATOR when ``tid`` is not coordinated here)."""
        if not self.coordinates(tid):
            return ErrorCode.not_coordinator
        try:
            result = self.call(fn, [tid], tid, *args, **kwargs)
        except CoordinatorWriteError as exc:
            return exc.error_code
        replicated = await self.await_replicated(WRITE_TIMEOUT_MS)
        return result if replicated == ErrorCode.none else replicated

    def due_work(self, now_ms: int) -> list[tuple[Callable[..., object], str]]:
        actions = {"abort": self.core.abort_timed_out, "expire": self.core.expire}
        return [(actions[action], tid) for action, tid in self.core.due_transactions(now_ms)]

    # ---- markers ----------------------------------------------------------------------------

    def _start_markers(self) -> None:
        markers = self.core.drain_markers()
        if not markers:
            return
        appends = list(self._last_appends)
        for entry in markers:
            if entry in self._marker_tasks:
                continue
            task = asyncio.get_running_loop().create_task(self._write_markers(entry, appends))
            self._marker_tasks[entry] = task
            task.add_done_callback(partial(self._forget_marker_task, entry))

    def _forget_marker_task(self, entry: TxnMarkers, _: asyncio.Task[None]) -> None:
        self._marker_tasks.pop(entry, None)

    async def _write_markers(self, entry: TxnMarkers, prepare_appends: list[Any]) -> None:
        """Write ``entry``'s markers until every partition has one, then complete it."""
        tid = entry.transactional_id
        while prepare_appends:
            # The Prepare record must be durable before any marker is: a failover that lost
            # it would leave markers of a transaction the new coordinator thinks open (and
            # aborts by timeout), committed on some partitions and aborted on others. So no
            # marker goes out until the high watermark has passed it (an ISR shrunk below
            # min.insync.replicas still moves it, and no clean election loses what is below
            # it); if this broker stops leading the partition meanwhile, the new leader writes
            # the markers if its log has the record.
            if not self.coordinates(tid):
                return
            errors = await self._replica_manager.await_replication(
                prepare_appends, MARKER_TIMEOUT_MS
            )
            if all(e in _BELOW_HIGH_WATERMARK for e in errors):
                break
            log.warning("%s: prepare record not replicated yet (%s); markers wait", tid, errors)
            if ErrorCode.request_timed_out not in errors:
                await asyncio.sleep(MARKER_RETRY_BACKOFF_MS / 1000)
        pending = set(entry.partitions)
        while pending:
            if not self.coordinates(tid):
                return  # unloaded: whoever loads it resends the markers
            epoch = self.coordinator_epochs.get(self.core.partition_for(tid), 0)
            pending = await self._write_round(entry, pending, epoch)
            if pending:
                await asyncio.sleep(MARKER_RETRY_BACKOFF_MS / 1000)
        while self.coordinates(tid):
            try:
                self.call(
                    self.core.complete_markers,
                    [tid],
                    tid,
                    entry.producer_id,
                    entry.producer_epoch,
                    entry.commit,
                )
                return
            except CoordinatorWriteError as exc:
                # Kafka retries the completion too; the markers are written already.
                log.warning("%s: completion not written (%s); retrying", tid, exc)
                await asyncio.sleep(MARKER_RETRY_BACKOFF_MS / 1000)

    async def _write_round(
        self, entry: TxnMarkers, partitions: set[TopicPartition], coordinator_epoch: int
    ) -> set[TopicPartition]:
        """One attempt at every partition still without a marker; those still without one."""
        metadata = self.broker.metadata
        node_id = self._replica_manager.node_id
        by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
        left: set[TopicPartition] = set()
        for tp in partitions:
            topic = metadata.topic(tp.topic)
            if topic is None or not 0 <= tp.partition < len(topic.partitions):
                continue  # deleted: Kafka drops its marker
            leader = topic.partitions[tp.partition].leader
            if leader < 0:
                left.add(tp)
            else:
                by_leader[leader].append(tp)
        local = by_leader.pop(node_id, [])
        left |= await self._write_local(entry, local, coordinator_epoch)
        for leader, tps in by_leader.items():
            left |= await self._write_remote(leader, entry, tps, coordinator_epoch)
        return left

    async def _write_local(
        self, entry: TxnMarkers, partitions: list[TopicPartition], coordinator_epoch: int
    ) -> set[TopicPartition]:
        if not partitions:
            return set()
        errors = await self._replica_manager.write_txn_markers(
            partitions,
            entry.producer_id,
            entry.producer_epoch,
            entry.commit,
            coordinator_epoch,
            MARKER_TIMEOUT_MS,
            entry.transaction_version,
        )
        failed = {tp for tp, error in errors.items() if error != ErrorCode.none}
        for tp in sorted(failed):
            log.info("marker for %s of %s not written: %s", tp, entry.transactional_id, errors[tp])
        return failed

    async def _write_remote(
        self,
        leader: int,
        entry: TxnMarkers,
        partitions: list[TopicPartition],
        coordinator_epoch: int,
    ) -> set[TopicPartition]:
        """WriteTxnMarkers to ``leader`` for ``partitions``; those it did not write."""
        try:
            async with self._connection_locks[leader]:
                response = await self._send_markers(leader, entry, partitions, coordinator_epoch)
        except BrokerConnectionError as exc:
            self._connections.drop(leader)
            log.info("markers of %s to broker %d: %s", entry.transactional_id, leader, exc)
            return set(partitions)
        failed = set()
        for marker in response.markers:
            for topic in marker.topics:
                for p in topic.partitions:
                    if p.error_code not in (ErrorCode.none, ErrorCode.unknown_topic_or_partition):
                        failed.add(TopicPartition(topic.name, p.partition_index))
        return failed

    async def _send_markers(
        self,
        leader: int,
        entry: TxnMarkers,
        partitions: list[TopicPartition],
        coordinator_epoch: int,
    ) -> Any:
        """One WriteTxnMarkers request to ``leader`` and its response."""
        connection = await self._connections.get(leader)
        version = connection.version(ApiKey.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSIONS[1])
        if version is None or version < WRITE_TXN_MARKERS_VERSIONS[0]:
            raise BrokerConnectionError(f"broker {leader} does not serve WriteTxnMarkers v1")
        if entry.transaction_version >= 2 and version < 2:
            raise BrokerConnectionError(f"broker {leader} does not serve WriteTxnMarkers v2")
        extra = {"transaction_version": entry.transaction_version} if version >= 2 else {}
        module = schemas.request_module(ApiKey.WRITE_TXN_MARKERS, version)
        by_topic: dict[str, list[int]] = defaultdict(list)
        for tp in partitions:
            by_topic[tp.topic].append(tp.partition)
        request = schemas.build(
            module.WriteTxnMarkersRequest,
            markers=(
                schemas.build(
                    module.WritableTxnMarker,
                    producer_id=entry.producer_id,
                    producer_epoch=entry.producer_epoch,
                    transaction_result=entry.commit,
                    topics=tuple(
                        schemas.build(
                            module.WritableTxnMarkerTopic, name=t, partition_indexes=tuple(ps)
                        )
                        for t, ps in by_topic.items()
                    ),
                    coordinator_epoch=coordinator_epoch,
                    **extra,
                ),
            ),
        )
        return await connection.request(request, MARKER_TIMEOUT_MS / 1000)
