"""Follower fetching: Kafka's ReplicaFetcherManager and ReplicaFetcherThread, on asyncio.

A follower partition's state machine says what to send its leader
(``Partition.next_follower_request``): OffsetForLeaderEpoch while it looks for the
point where its log and the leader's diverge (KIP-101/279), then Fetch from its
log end offset. This module only carries those requests: ``num.replica.fetchers``
``ReplicaFetcher``s per leader broker (Kafka's default 1), each with its own
connection and one request in flight, asking for every partition it serves from
that leader at once. A partition goes to fetcher ``fetcher_id`` as Kafka's
AbstractFetcherManager.getFetcherId spreads them, from Java's String.hashCode of the
topic, so a cluster mixing Kafka and Odradek brokers splits the same way and a
partition stays on one connection while the leader and the count stay the same. Which
fetcher serves which partition is worked out when roles change, not per request.

Each fetcher keeps a fetch session with its leader (KIP-227, fetch_session_handler.py),
as Kafka's fetcher does: after the first, full request, a request names only the
partitions whose position moved and an answer only those with news, so the quiet
partitions a broker follows (most of ``__consumer_offsets``) cost the follower nothing
per round of replication.

The connections speak the inter-broker listener's security protocol
(``network.client_security``): TLS, SASL, or both, as the broker's config says.
A refused SASL login is logged as an error on every attempt (a follower with wrong
credentials never catches up, and its log must say why) and retried after
``replica.fetch.backoff.ms``, as Kafka's fetcher retries.

Fetch requests name the follower (ReplicaState: replica id and broker epoch, Fetch
v15+), so the leader counts the fetch as replication (log end offset, ISR, high
watermark), reads past its high watermark, and, with the broker epoch, can tell a
restarted follower from the one it saw before (KIP-903). ``replica.fetch.wait.max.ms``
and ``replica.fetch.min.bytes`` make it a long poll; the leader answers at once when
records arrive. Errors: a connection failure or a leader that does not know the
partition yet backs off ``replica.fetch.backoff.ms`` and tries again (the metadata
will tell when the leader moves); OFFSET_OUT_OF_RANGE makes the partition look for its
divergence point again. Fetchers start and stop as this broker's roles change
(``ReplicaManager.role_listeners``): a partition that stops following is simply not
in the next request.

Records arrive as bytes in the response (one copy, as Kafka's fetcher has its own
buffer) and are appended as the leader wrote them: offsets, epochs and CRCs kept.

A fetcher stops on a flag its loop checks, not on task cancellation alone: on
Python 3.11 ``asyncio.wait_for`` swallows a cancellation that arrives while the
awaited thing has just completed (a wake-up from a role change, a refused
connect), and the loop would then go on for ever. That is exactly what happens
when the brokers of a cluster stop together: each one's roles change as the
others leave, the cancellation was lost, and shutdown waited on the fetcher until
the process was killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any

from odradek.metadata.store import MetadataStore
from odradek.metrics.stats import BrokerTopicStats
from odradek.network.client import (
    AsyncBrokerConnection,
    BrokerConnectionError,
    SaslAuthenticationFailed,
)
from odradek.network.client_security import PLAINTEXT, ClientSecurity
from odradek.protocol import schemas
from odradek.protocol.client_codec import RequestKind, kind_response_body
from odradek.protocol.errors import ErrorCode
from odradek.protocol.fetch import (
    FIRST_REPLICA_STATE_VERSION,
    LAST_FOLLOWER_REQUEST_VERSION,
    FetchRequestPartition,
    decode_fetch_response,
    encode_follower_fetch_request,
)
from odradek.replication.fetch_session_handler import FetchSessionHandler, SessionRequest
from odradek.replication.partition import EpochQuery, FetchPosition, Partition
from odradek.replication.replica_manager import ReplicaManager
from odradek.storage import Log, TopicPartition

log = logging.getLogger(__name__)

FETCH = 1
OFFSET_FOR_LEADER_EPOCH = 23
#: Top-level errors that only say the fetch session must start over.
SESSION_ERRORS = (ErrorCode.fetch_session_id_not_found, ErrorCode.invalid_fetch_session_epoch)


@dataclass(frozen=True, slots=True)
class FetcherSettings:
    """Kafka's replica.* fetcher configs."""

    #: replica.fetch.max.bytes: bytes asked for per partition (one batch more if it is larger).
    fetch_max_bytes: int = 1048576
    #: replica.fetch.response.max.bytes: bytes asked for per response.
    response_max_bytes: int = 10485760
    #: replica.fetch.min.bytes: bytes the leader waits for before it answers.
    fetch_min_bytes: int = 1
    #: replica.fetch.wait.max.ms: the longest the leader holds a fetch.
    fetch_wait_max_ms: int = 500
    #: replica.fetch.backoff.ms: the pause after an error.
    fetch_backoff_ms: int = 1000
    #: replica.socket.timeout.ms: the longest a request may take (more than the wait).
    socket_timeout_ms: int = 30000
    #: num.replica.fetchers: connections (fetchers) per leader broker.
    num_fetchers: int = 1


def java_string_hash(text: str) -> int:
    """Java's String.hashCode: s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units, as an int."""
    h = 0
    units = text.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def fetcher_id(tp: TopicPartition, num_fetchers: int) -> int:
    """Kafka's getFetcherId: Utils.abs(31 * topic.hashCode + partition) % numFetchers, with
    Java's int arithmetic (wrapping at 32 bits; Utils.abs(Integer.MIN_VALUE) is 0)."""
    value = (31 * java_string_hash(tp.topic) + tp.partition) & 0xFFFFFFFF
    value = value - (1 << 32) if value & 0x80000000 else value
    return (0 if value == -(1 << 31) else abs(value)) % num_fetchers


#: A fetcher's key: (leader broker id, fetcher id).
FetcherKey = tuple[int, int]


class ReplicaFetcherManager:
    """``num.replica.fetchers`` ReplicaFetchers for each broker that leads a partition this
    broker follows (only those that have a partition to serve are started)."""

    def __init__(
        self,
        replica_manager: ReplicaManager,
        metadata: MetadataStore,
        listener_name: str,
        settings: FetcherSettings,
        topic_stats: BrokerTopicStats,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        self.replica_manager = replica_manager
        self.metadata = metadata
        self.listener_name = listener_name
        self.settings = settings
        self.security = security
        #: Counts what the followers append (ReplicationBytesInPerSec).
        self.topic_stats = topic_stats
        self._fetchers: dict[FetcherKey, ReplicaFetcher] = {}
        #: The followed partitions by the fetcher that serves them, as of the last role change.
        self._assignment: dict[FetcherKey, dict[TopicPartition, Partition[Log]]] = {}
        self._closed = False

    def fetcher_key(self, tp: TopicPartition, partition: Partition[Log]) -> FetcherKey:
        return partition.leader_id, fetcher_id(tp, self.settings.num_fetchers)

    def fetchers(self) -> dict[FetcherKey, ReplicaFetcher]:
        """The running fetchers by (leader, fetcher id)."""
        return dict(self._fetchers)

    def start(self) -> None:
        self.replica_manager.role_listeners.append(self._on_roles_changed)
        self._on_roles_changed()

    def assigned(self, key: FetcherKey) -> dict[TopicPartition, Partition[Log]]:
        """The followed partitions fetcher ``key`` serves."""
        return self._assignment.get(key, {})

    def _on_roles_changed(self) -> None:
        if self._closed:
            return
        assignment: dict[FetcherKey, dict[TopicPartition, Partition[Log]]] = {}
        for tp, partition in self.replica_manager.followed_partitions().items():
            assignment.setdefault(self.fetcher_key(tp, partition), {})[tp] = partition
        self._assignment = assignment
        keys = assignment.keys()
        for key in keys - self._fetchers.keys():
            fetcher = ReplicaFetcher(self, *key)
            self._fetchers[key] = fetcher
            fetcher.start()
        for key, fetcher in list(self._fetchers.items()):
            if key in keys:
                fetcher.wake()
            else:
                del self._fetchers[key]
                fetcher.stop()

    async def shutdown(self) -> None:
        self._closed = True
        fetchers, self._fetchers = list(self._fetchers.values()), {}
        for fetcher in fetchers:
            fetcher.stop()
        for fetcher in fetchers:
            await fetcher.stopped()


class ReplicaFetcher:
    """Fetches the partitions of one fetcher id that this broker follows from one leader."""

    def __init__(self, manager: ReplicaFetcherManager, leader_id: int, fetcher_id: int = 0) -> None:
        self.manager = manager
        self.leader_id = leader_id
        self.fetcher_id = fetcher_id
        self._woken = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._connection: AsyncBrokerConnection | None = None
        self._session: FetchSessionHandler[tuple[uuid.UUID, FetchPosition]] = FetchSessionHandler()
        self._stopping = False

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"replica-fetcher-{self.fetcher_id}-{self.leader_id}"
        )

    def wake(self) -> None:
        self._woken.set()

    def stop(self) -> None:
        self._stopping = True
        self._woken.set()
        if self._task is not None:
            self._task.cancel()

    async def stopped(self) -> None:
        """Wait until the loop has ended (``asyncio.wait`` leaves a cancellation of this
        waiter to this waiter; suppressing CancelledError around ``await task`` would not)."""
        if self._task is not None:
            await asyncio.wait({self._task})
            if not self._task.cancelled() and self._task.exception() is not None:
                log.error(
                    "fetcher from broker %d failed", self.leader_id, exc_info=self._task.exception()
                )
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def partitions(self) -> dict[TopicPartition, Partition[Log]]:
        """The followed partitions this fetcher serves."""
        return self.manager.assigned((self.leader_id, self.fetcher_id))

    async def _run(self) -> None:
        settings = self.manager.settings
        while not self._stopping:
            self._woken.clear()
            partitions = self.partitions()
            if not partitions:
                await self._woken.wait()
                continue
            try:
                connection = await self._connect()
                queries = {}
                fetches = {}
                for tp, partition in partitions.items():
                    request = partition.next_follower_request()
                    if isinstance(request, EpochQuery):
                        queries[tp] = (partition, request)
                    elif isinstance(request, FetchPosition):
                        fetches[tp] = (partition, request)
                if queries:
                    await self._offsets_for_leader_epoch(connection, queries)
                elif fetches and not await self._fetch(connection, fetches):
                    await self._backoff(settings.fetch_backoff_ms)
            except BrokerConnectionError as exc:
                if self._connection is not None:
                    self._connection.close()
                    self._connection = None
                if isinstance(exc, SaslAuthenticationFailed):
                    log.error("replica fetcher to broker %d: %s", self.leader_id, exc)
                else:
                    log.info("fetching from broker %d: %s; retrying", self.leader_id, exc)
                await self._backoff(settings.fetch_backoff_ms)

    async def _backoff(self, ms: int) -> None:
        """Sleep ``ms``, or less if the roles change meanwhile."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._woken.wait(), ms / 1000)

    async def _connect(self) -> AsyncBrokerConnection:
        if self._connection is not None:
            return self._connection
        manager = self.manager
        broker = next((b for b in manager.metadata.brokers() if b.node_id == self.leader_id), None)
        endpoint = broker.endpoint(manager.listener_name) if broker is not None else None
        if endpoint is None:
            raise BrokerConnectionError(
                f"broker {self.leader_id} has no {manager.listener_name} endpoint registered"
            )
        self._connection = await AsyncBrokerConnection.connect(
            *endpoint,
            f"broker-{manager.replica_manager.node_id}-fetcher-{self.fetcher_id}-{self.leader_id}",
            manager.settings.socket_timeout_ms / 1000,
            manager.security,
        )
        return self._connection

    async def _offsets_for_leader_epoch(
        self,
        connection: AsyncBrokerConnection,
        queries: dict[TopicPartition, tuple[Partition[Log], EpochQuery]],
    ) -> None:
        version = connection.version(OFFSET_FOR_LEADER_EPOCH, 4)
        if version is None or version < 3:
            raise BrokerConnectionError(f"broker {self.leader_id} lacks OffsetForLeaderEpoch v3+")
        module = schemas.request_module(OFFSET_FOR_LEADER_EPOCH, version)
        by_topic: dict[str, list[Any]] = {}
        for tp, (_, query) in queries.items():
            by_topic.setdefault(tp.topic, []).append(
                schemas.build(
                    module.OffsetForLeaderPartition,
                    partition=tp.partition,
                    current_leader_epoch=query.current_leader_epoch,
                    leader_epoch=query.leader_epoch,
                )
            )
        request = schemas.build(
            module.OffsetForLeaderEpochRequest,
            replica_id=self.manager.replica_manager.node_id,
            topics=tuple(
                schemas.build(module.OffsetForLeaderTopic, topic=t, partitions=tuple(ps))
                for t, ps in by_topic.items()
            ),
        )
        response = await connection.request(request, self.manager.settings.socket_timeout_ms / 1000)
        for topic in response.topics:
            for answer in topic.partitions:
                found = queries.get(TopicPartition(topic.topic, answer.partition))
                if found is None:
                    continue
                partition, query = found
                if answer.error_code == ErrorCode.none:
                    partition.on_epoch_end_offset(query, answer.leader_epoch, answer.end_offset)
                else:
                    log.debug("OffsetForLeaderEpoch %s: %s", topic.topic, answer.error_code)

    async def _fetch(
        self,
        connection: AsyncBrokerConnection,
        fetches: dict[TopicPartition, tuple[Partition[Log], FetchPosition]],
    ) -> bool:
        """One Fetch in this fetcher's session; False (back off) if partitions were answered
        and none of them made progress, or the response has an error other than a session's."""
        manager = self.manager
        settings = manager.settings
        version = connection.version(FETCH, LAST_FOLLOWER_REQUEST_VERSION)
        if version is None or version < FIRST_REPLICA_STATE_VERSION:
            raise BrokerConnectionError(f"broker {self.leader_id} lacks Fetch v15+")
        wanted: dict[TopicPartition, tuple[uuid.UUID, FetchPosition]] = {}
        for tp, (_, position) in fetches.items():
            topic = manager.metadata.topic(tp.topic)
            if topic is not None:
                wanted[tp] = (topic.topic_id, position)
        if not wanted:
            return False
        session = self._session.build(wanted)
        kind = RequestKind(FETCH, version, flexible=True)
        try:
            frame = await connection.request_encoded(
                kind,
                self._fetch_request(version, session),
                (settings.socket_timeout_ms + settings.fetch_wait_max_ms) / 1000,
            )
            response = decode_fetch_response(version, kind_response_body(kind, frame))
        except ValueError as e:
            self._session.handle_error()
            connection.close()
            raise BrokerConnectionError(f"unreadable Fetch response: {e}") from None
        except BaseException:
            self._session.handle_error()
            raise
        if not self._session.handle_response(session, response.error_code, response.session_id):
            log.info("fetch from broker %d: error code %d", self.leader_id, response.error_code)
            # A session the leader lost or no longer matches: the next request is a full one.
            return response.error_code in SESSION_ERRORS
        names = {topic_id: tp.topic for tp, (topic_id, _) in session.session.items()}
        answered = progress = False
        now_ms = int(time.time() * 1000)
        for topic_id, answers in response.topics:
            name = names.get(topic_id)
            if name is None:
                continue
            for answer in answers:
                tp = TopicPartition(name, answer.partition_index)
                found = fetches.get(tp)
                if found is None:
                    continue
                answered = True
                partition, position = found
                if answer.error_code != ErrorCode.none:
                    log.debug("fetch of %s from %d: %s", tp, self.leader_id, answer.error_code)
                    partition.on_fetch_error(position, ErrorCode(answer.error_code))
                    self._session.resend(tp)
                    continue
                high_watermark = partition.high_watermark
                records = answer.records or b""
                if partition.on_fetch_response(position, records, answer.high_watermark, now_ms):
                    progress = True
                    manager.topic_stats.replicated(len(records))
                    if records or partition.high_watermark != high_watermark:
                        manager.replica_manager.follower_appended(
                            tp, partition.high_watermark != high_watermark
                        )
        # An incremental answer without partitions: nothing changed while the leader waited.
        return progress or not answered

    def _fetch_request(
        self, version: int, session: SessionRequest[tuple[uuid.UUID, FetchPosition]]
    ) -> bytes:
        """The Fetch request body for ``session``: the partitions it sends and forgets, by
        topic id."""
        manager = self.manager
        settings = manager.settings
        sent: dict[uuid.UUID, list[FetchRequestPartition]] = {}
        for tp, (topic_id, position) in session.to_send.items():
            sent.setdefault(topic_id, []).append(
                FetchRequestPartition(
                    partition=tp.partition,
                    current_leader_epoch=position.current_leader_epoch,
                    fetch_offset=position.fetch_offset,
                    last_fetched_epoch=-1,
                    log_start_offset=-1,
                    partition_max_bytes=settings.fetch_max_bytes,
                )
            )
        forgotten: dict[uuid.UUID, list[int]] = {}
        for tp, (topic_id, _) in session.to_forget.items():
            forgotten.setdefault(topic_id, []).append(tp.partition)
        node_id = manager.replica_manager.node_id
        return encode_follower_fetch_request(
            version,
            replica_id=node_id,
            replica_epoch=manager.metadata.broker_epoch(node_id),
            max_wait_ms=settings.fetch_wait_max_ms,
            min_bytes=settings.fetch_min_bytes,
            max_bytes=settings.response_max_bytes,
            session_id=session.session_id,
            session_epoch=session.epoch,
            topics=list(sent.items()),
            forgotten=list(forgotten.items()),
        )
