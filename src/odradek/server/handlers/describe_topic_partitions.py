"""DescribeTopicPartitions (KIP-966): topics and their partitions, one bounded page at a time.

Admin clients (confluent-kafka's describe_topics, the Java admin) use it in
place of Metadata so that topics with many partitions are described in pages.
As Kafka's DescribeTopicPartitionsRequestHandler and metadata cache:

- the topics are the requested ones (or every topic when none is named), in
  name order, starting at the cursor's topic and, for that topic, at the
  cursor's partition;
- one response describes at most min(ResponsePartitionLimit,
  ``max.request.partition.size.limit``) partitions (at least 1); when it stops
  inside a topic, or before the next topic, NextCursor says where to go on;
- a named topic that does not exist is UNKNOWN_TOPIC_OR_PARTITION (an illegal
  name INVALID_TOPIC_EXCEPTION); with every topic asked for, none are errors;
- a cursor naming a topic outside the requested list, or a negative partition,
  is INVALID_REQUEST for every requested topic;
- every described topic carries its authorized operations;
- a topic the caller may not DESCRIBE is left out of every-topic pages and answered
  TOPIC_AUTHORIZATION_FAILED (no id, no partitions) when named.

``paginate`` is the sans-I/O page cut, so its rules are tested without a broker.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from odradek.metadata.image import PartitionImage, TopicImage
from odradek.metadata.topic_names import INTERNAL_TOPICS, InvalidTopicName, validate_topic_name
from odradek.protocol import schemas
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.error_response import error_response
from odradek.protocol.errors import ErrorCode
from odradek.server.authorization import (
    AUTHORIZED_OPERATIONS_OMITTED,
    AclOperation,
    ResourceType,
    authorize,
    authorized_operations,
)
from odradek.server.context import RequestContext

NO_LEADER = -1
ZERO_UUID = uuid.UUID(int=0)


@dataclass(frozen=True, slots=True)
class PageEntry:
    name: str
    #: None when the topic does not exist.
    topic: TopicImage | None
    #: The partition indexes this page describes.
    partitions: range


@dataclass(frozen=True, slots=True)
class Page:
    entries: list[PageEntry]
    #: (topic, partition) where the next page starts, None when this one is the last.
    next_cursor: tuple[str, int] | None


def paginate(
    names: Iterable[str],
    lookup: Callable[[str], TopicImage | None],
    cursor: tuple[str, int] | None,
    limit: int,
    include_unknown: bool,
) -> Page:
    """Cut one page of at most ``limit`` partitions from the sorted topic ``names``."""
    entries: list[PageEntry] = []
    remaining = limit
    for name in names:
        if remaining == 0:
            # The next page starts at this topic, whether or not it exists.
            return Page(entries, (name, 0))
        topic = lookup(name)
        if topic is None:
            if include_unknown:
                entries.append(PageEntry(name, None, range(0)))
            continue
        count = len(topic.partitions)
        start = cursor[1] if cursor is not None and name == cursor[0] else 0
        upper = min(count, start + remaining)
        entries.append(PageEntry(name, topic, range(start, upper)))
        if upper < count:
            return Page(entries, (name, upper))
        remaining -= len(range(start, upper))
    return Page(entries, None)


class _InvalidRequest(Exception):
    pass


def _names(ctx: RequestContext, request) -> tuple[list[str], bool]:
    """The topics to describe from the cursor on, sorted, and whether every topic was asked for."""
    cursor = request.cursor
    start = cursor.topic_name if cursor is not None else ""
    fetch_all = not request.topics
    if fetch_all:
        names = {name for name in ctx.broker.metadata.topics() if name >= start}
    else:
        names = {t.name for t in request.topics if t.name >= start}
        if cursor is not None and cursor.topic_name not in names:
            raise _InvalidRequest
    if cursor is not None and cursor.partition_index < 0:
        raise _InvalidRequest
    return sorted(names), fetch_all


async def handle_describe_topic_partitions(ctx: RequestContext, request) -> object:
    module = schemas.response_module(ApiKey.DESCRIBE_TOPIC_PARTITIONS, ctx.api_version)
    cls = schemas.response_schema(ApiKey.DESCRIBE_TOPIC_PARTITIONS, ctx.api_version)
    try:
        names, fetch_all = _names(ctx, request)
    except _InvalidRequest:
        return error_response(cls, request, ErrorCode.invalid_request)
    limit = max(
        min(
            ctx.broker.config["max.request.partition.size.limit"], request.response_partition_limit
        ),
        1,
    )
    described = {
        name
        for name in names
        if authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name, log_denied=not fetch_all)
    }
    if fetch_all:
        names = [name for name in names if name in described]

    def lookup(name: str) -> TopicImage | None:
        return ctx.broker.metadata.topic(name) if name in described else None

    cursor = request.cursor
    page = paginate(
        names,
        lookup,
        (cursor.topic_name, cursor.partition_index) if cursor is not None else None,
        limit,
        include_unknown=not fetch_all,
    )
    listener = ctx.connection.listener_name
    brokers = ctx.broker.metadata.brokers()
    reachable = {b.node_id for b in brokers if b.endpoint(listener) is not None}
    registered = {b.node_id for b in brokers}

    def partition(p: PartitionImage) -> object:
        return schemas.build(
            module.DescribeTopicPartitionsResponsePartition,
            error_code=ErrorCode.none,
            partition_index=p.partition,
            leader_id=p.leader if p.leader in reachable else NO_LEADER,
            leader_epoch=p.leader_epoch,
            replica_nodes=p.replicas,
            isr_nodes=p.isr,
            eligible_leader_replicas=(),
            last_known_elr=(),
            offline_replicas=tuple(r for r in p.replicas if r not in registered),
        )

    def topic(entry: PageEntry) -> object:
        if entry.name not in described:
            return schemas.build(
                module.DescribeTopicPartitionsResponseTopic,
                error_code=ErrorCode.topic_authorization_failed,
                name=entry.name,
                topic_id=ZERO_UUID,
                is_internal=False,
                partitions=(),
                topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
            )
        ops = authorized_operations(ctx, ResourceType.TOPIC, entry.name)
        if entry.topic is None:
            return schemas.build(
                module.DescribeTopicPartitionsResponseTopic,
                error_code=_unknown_topic_error(entry.name),
                name=entry.name,
                topic_id=ZERO_UUID,
                is_internal=entry.name in INTERNAL_TOPICS,
                partitions=(),
                topic_authorized_operations=ops,
            )
        return schemas.build(
            module.DescribeTopicPartitionsResponseTopic,
            error_code=ErrorCode.none,
            name=entry.name,
            topic_id=entry.topic.topic_id,
            is_internal=entry.topic.internal,
            partitions=tuple(partition(entry.topic.partitions[i]) for i in entry.partitions),
            topic_authorized_operations=ops,
        )

    next_cursor = None
    if page.next_cursor is not None:
        next_cursor = schemas.build(
            module.Cursor, topic_name=page.next_cursor[0], partition_index=page.next_cursor[1]
        )
    return schemas.build(
        cls,
        throttle_time=0,
        topics=tuple(topic(e) for e in page.entries),
        next_cursor=next_cursor,
    )


def _unknown_topic_error(name: str) -> ErrorCode:
    try:
        validate_topic_name(name)
    except InvalidTopicName:
        return ErrorCode.invalid_topic_exception
    return ErrorCode.unknown_topic_or_partition
