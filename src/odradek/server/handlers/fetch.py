"""Fetch: read from partitions up to the high watermark, long-poll in the purgatory, sendfile.

A read_committed fetch (isolation level 1) reads up to the last stable offset instead
and answers the aborted transactions overlapping what it read (producer id, first
offset), from the segments' .txnindex; the records still go out as file regions, and
the consumer drops the aborted ones itself, as with Kafka.

The request is decoded by kio (it holds no records); the response is encoded by
the hand-written encoder with the log's FileRegions as record data, so record
bytes go from the page cache to the socket without entering Python.

A fetch that names a replica (ReplicaState from v15, replica_id before) is a
follower's: each partition goes through ``ReplicaManager.fetch_for_follower``, which
records the follower's progress (high watermark, ISR) and reads up to the log end
offset rather than the high watermark, or, when the follower has caught up on it,
through ``Partition.fetch_for_idle_follower`` (see ``_read_for_follower``). The high
watermark answered is the one after that progress, so a follower learns of a commit on
the fetch that made it.

Authorization, as KafkaApis.handleFetchRequest: a follower's fetch needs CLUSTER_ACTION on
the cluster (the brokers' principal is a super user, or has that ACL), else every partition
gets TOPIC_AUTHORIZATION_FAILED; a consumer's needs READ on each topic, else that topic's
partitions get TOPIC_AUTHORIZATION_FAILED and are not read. They stay in the fetch session,
as in Kafka.

A consumer's fetch under a ``consumer_byte_rate`` quota, as KafkaApis.handleFetchRequest:
it asks for at most what the quota allows over its windows (Kafka's
getMaxValueInQuotaWindow), the response's size is recorded against the quota, and a
response that puts the client over it is not sent: the client gets an empty response
carrying the throttle time instead (the size is taken back), its connection is muted for
that time, and it fetches the same offsets again afterwards, so nothing is lost. The
positions of a throttled fetch's session are left as they were (a new session is not
created), so the next fetch's answer is complete. Followers' fetches are never throttled.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.fetch import FetchPartitionResponse, FetchTopicResponse, encode_fetch_response
from odradek.protocol.response import Region
from odradek.replication.partition import READ_COMMITTED
from odradek.server.authorization import (
    AclOperation,
    ResourceType,
    authorize_cluster,
    filter_authorized,
)
from odradek.server.context import RequestContext
from odradek.server.fetch_session import FINAL_EPOCH, INITIAL_EPOCH, CachedPartition, FetchSession
from odradek.storage import TopicPartition


async def handle(ctx: RequestContext, request):
    broker = ctx.broker
    sessions = broker.fetch_sessions
    # Which partitions to read, at what positions, and whether the response is incremental.
    # Before v7 there are no sessions: every fetch is a sessionless full fetch.
    session_id = getattr(request, "session_id", 0)
    session_epoch = getattr(request, "session_epoch", FINAL_EPOCH)
    session: FetchSession | None = None
    # v13+ names topics by id; ids we do not know are answered UNKNOWN_TOPIC_ID.
    unknown_ids: list[FetchTopicResponse] = []
    try:
        if session_epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id:
                sessions.remove(session_id)
            wanted = _requested_partitions(broker, request, unknown_ids)
            if session_epoch == INITIAL_EPOCH:
                session = sessions.new_session(wanted, ctx.now_ms)
        else:
            session = sessions.incremental(session_id, session_epoch, ctx.now_ms)
            for tp, cached in _requested_partitions(broker, request, unknown_ids).items():
                known = session.partitions.get(tp)
                if known is not None:
                    # A new position, but the client still has what we last told it.
                    cached.high_watermark, cached.log_start_offset = (
                        known.high_watermark,
                        known.log_start_offset,
                    )
                session.partitions[tp] = cached
            for forgotten in request.forgotten_topics_data:
                _forget(session, forgotten)
            wanted = session.partitions
    except KafkaError as e:
        return encode_fetch_response(ctx.api_version, [], error_code=e.error_code, session_id=0)
    incremental = session is not None and session_epoch > 0

    replica_id, replica_epoch = replica(request)
    denied = _unauthorized_topics(ctx, wanted, replica_id)
    deadline = time.monotonic() + request.max_wait.total_seconds()
    quota = broker.client_quotas.fetch if replica_id < 0 else None
    user, client_id = ctx.connection.principal.name, ctx.header.client_id or ""
    max_bytes, min_bytes = request.max_bytes, request.min_bytes
    if quota is not None and quota.enabled:
        allowed = quota.max_value_in_window(user, client_id)
        if allowed is not None:
            max_bytes = min(max_bytes, int(allowed))
            min_bytes = min(min_bytes, max_bytes)
    else:
        quota = None
    while True:
        results = _read(
            broker,
            wanted,
            max_bytes,
            request.isolation_level,
            replica_id,
            replica_epoch,
            denied,
        )
        size = sum(r.records_size for r in results.values())
        errors = unknown_ids or any(r.error_code for r in results.values())
        remaining = deadline - time.monotonic()
        if (
            size >= min_bytes
            or errors
            or remaining <= 0
            or not wanted
            or broker.fetch_purgatory.closed
        ):
            break
        await broker.fetch_purgatory.wait(wanted.keys(), remaining)

    sent = [
        (tp, result)
        for tp, result in results.items()
        if not incremental or _has_news(wanted[tp], result)
    ]
    topics: list[FetchTopicResponse] = []
    for tp, result in sent:
        if not topics or topics[-1].topic != tp.topic:
            image = broker.metadata.topic(tp.topic)
            topics.append(
                FetchTopicResponse(tp.topic, [], image.topic_id if image is not None else None)
            )
        topics[-1].partitions.append(result)
    topics += unknown_ids
    session_id = session.session_id if session is not None else 0
    response = encode_fetch_response(ctx.api_version, topics, session_id=session_id)
    if quota is not None:
        now_ms = int(time.time() * 1000)
        throttle_ms = quota.record(user, client_id, response.size, now_ms)
        if throttle_ms:
            quota.unrecord(user, client_id, response.size, now_ms)
            quota.throttled(user, client_id, throttle_ms, now_ms)
            if session is not None and not incremental:
                sessions.remove(session.session_id)
                session_id = 0
            throttled = encode_fetch_response(
                ctx.api_version, [], throttle_time_ms=throttle_ms, session_id=session_id
            )
            throttled.mute_ms = throttle_ms
            return throttled
    broker.topic_stats.fetched(
        ((tp.topic, r.error_code, r.records_size) for tp, r in results.items()), replica_id >= 0
    )
    if session is not None:
        for tp, result in sent:
            wanted[tp].high_watermark = result.high_watermark
            wanted[tp].log_start_offset = result.log_start_offset
    return response


def _topic_name(broker, topic) -> str | None:
    """The name of a request's topic: given directly before v13, looked up by id from v13."""
    if hasattr(topic, "topic"):
        return topic.topic
    image = broker.metadata.topic_by_id(topic.topic_id)
    return image.name if image is not None else None


def _forget(session: FetchSession, forgotten) -> None:
    """Drop a request's forgotten partitions from ``session``. From v13 they are named by topic
    id and matched against the ids the session was given, not against the metadata: a deleted
    topic's id names no topic any more, yet its partitions must leave the session (left in
    it, each would answer an error on every fetch, and an error answers a fetch at once)."""
    topic_id = getattr(forgotten, "topic_id", None)
    if topic_id is None:
        for index in forgotten.partitions:
            session.partitions.pop(TopicPartition(forgotten.topic, index), None)
        return
    indexes = set(forgotten.partitions)
    for tp in [
        tp
        for tp, cached in session.partitions.items()
        if cached.topic_id == topic_id and tp.partition in indexes
    ]:
        del session.partitions[tp]


def _requested_partitions(
    broker, request, unknown_ids: list[FetchTopicResponse]
) -> OrderedDict[TopicPartition, CachedPartition]:
    wanted: OrderedDict[TopicPartition, CachedPartition] = OrderedDict()
    for topic in request.topics:
        name = _topic_name(broker, topic)
        if name is None:
            unknown_ids.append(
                FetchTopicResponse(
                    "",
                    [
                        FetchPartitionResponse(p.partition, error_code=ErrorCode.unknown_topic_id)
                        for p in topic.partitions
                    ],
                    topic.topic_id,
                )
            )
            continue
        for p in topic.partitions:
            wanted[TopicPartition(name, p.partition)] = CachedPartition(
                fetch_offset=p.fetch_offset,
                max_bytes=p.partition_max_bytes,
                current_leader_epoch=getattr(p, "current_leader_epoch", -1),
                topic_id=getattr(topic, "topic_id", None),
            )
    return wanted


def replica(request: Any) -> tuple[int, int]:
    """(replica id, broker epoch) of a follower's fetch; replica id -1 for a consumer's."""
    state = getattr(request, "replica_state", None)
    if state is not None:
        return state.replica_id, state.replica_epoch
    return getattr(request, "replica_id", -1), -1


def _unauthorized_topics(ctx: RequestContext, wanted, replica_id: int) -> frozenset[str]:
    """The topics of ``wanted`` this fetch may not read (none without an authorizer)."""
    if ctx.broker.authorizer is None:
        return frozenset()
    names = {tp.topic for tp in wanted}
    if replica_id >= 0:
        return (
            frozenset() if authorize_cluster(ctx, AclOperation.CLUSTER_ACTION) else frozenset(names)
        )
    return frozenset(names - filter_authorized(ctx, AclOperation.READ, ResourceType.TOPIC, names))


def _has_news(cached: CachedPartition, result: FetchPartitionResponse) -> bool:
    return bool(
        result.records
        or result.error_code
        or result.high_watermark != cached.high_watermark
        or result.log_start_offset != cached.log_start_offset
    )


def _read(
    broker,
    wanted,
    max_bytes: int,
    isolation_level: int,
    replica_id: int = -1,
    replica_epoch: int = -1,
    denied: frozenset[str] = frozenset(),
) -> dict[TopicPartition, FetchPartitionResponse]:
    """One pass over the partitions within the response's and each partition's byte limits.

    As Kafka does, the first partition with data may exceed the limits by one
    batch (min_one_message) so that a consumer can always make progress.
    """
    if replica_id >= 0:
        return _read_for_follower(broker, wanted, max_bytes, replica_id, replica_epoch, denied)
    results: dict[TopicPartition, FetchPartitionResponse] = {}
    budget = max_bytes
    for tp, cached in wanted.items():
        result = FetchPartitionResponse(tp.partition)
        results[tp] = result
        if tp.topic in denied:
            result.error_code = ErrorCode.topic_authorization_failed
            continue
        try:
            partition = broker.replica_manager.partition(tp)
            partition.check_leader_epoch(cached.current_leader_epoch)
            result.high_watermark = partition.high_watermark
            result.last_stable_offset = partition.last_stable_offset
            result.log_start_offset = partition.log_start_offset
            if isolation_level == READ_COMMITTED:
                result.aborted_transactions = []  # null only for read_uncommitted
            limit = min(cached.max_bytes, budget)
            if cached.fetch_offset == result.high_watermark or (limit <= 0 and budget < max_bytes):
                continue
            data = partition.read(
                cached.fetch_offset,
                max(limit, 0),
                isolation_level,
                min_one_message=budget == max_bytes,
            )
        except KafkaError as e:
            result.error_code = e.error_code
            continue
        result.records = list(data.regions)
        if data.aborted_transactions:
            result.aborted_transactions = [
                (txn.producer_id, txn.first_offset) for txn in data.aborted_transactions
            ]
        budget -= data.size
    return results


def _read_for_follower(
    broker,
    wanted,
    max_bytes: int,
    replica_id: int,
    replica_epoch: int,
    denied: frozenset[str],
) -> dict[TopicPartition, FetchPartitionResponse]:
    """``_read`` for a follower: up to the log end offset, through the ReplicaManager (the
    follower's progress may move the high watermark or the ISR).

    A partition the follower has caught up on takes Partition.fetch_for_idle_follower's
    short way (an incremental answer then leaves it out like any partition without news).
    A follower's session holds every partition it follows from here, most of them idle, so
    this is most of what a follower fetch costs.
    """
    results: dict[TopicPartition, FetchPartitionResponse] = {}
    budget = max_bytes
    replica_manager = broker.replica_manager
    now_ms = int(time.time() * 1000)
    for tp, cached in wanted.items():
        if tp.topic in denied:
            results[tp] = FetchPartitionResponse(
                tp.partition, error_code=ErrorCode.topic_authorization_failed
            )
            continue
        records: list[Region] = []
        try:
            partition = replica_manager.partition(tp)
            if not partition.fetch_for_idle_follower(
                replica_id, cached.fetch_offset, cached.current_leader_epoch, now_ms, replica_epoch
            ):
                data = replica_manager.fetch_for_follower(
                    tp,
                    replica_id,
                    cached.fetch_offset,
                    cached.current_leader_epoch,
                    max(min(cached.max_bytes, budget), 0),
                    now_ms,
                    replica_epoch,
                )
                records = list(data.regions)
                budget -= data.size
        except KafkaError as e:
            results[tp] = FetchPartitionResponse(tp.partition, error_code=e.error_code)
            continue
        results[tp] = FetchPartitionResponse(
            tp.partition,
            high_watermark=partition.high_watermark,
            last_stable_offset=partition.last_stable_offset,
            log_start_offset=partition.log_start_offset,
            records=records,
        )
    return results
