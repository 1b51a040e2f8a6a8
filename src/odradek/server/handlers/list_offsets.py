"""ListOffsets: offsets by timestamp, earliest (-2), latest (-1), max timestamp (-3, v7+), earliest local
(-4, v8+), latest tiered (-5, v9+), earliest pending upload (-6, v11+, KIP-1023).

There is no remote tier, so earliest local is the log start offset, and latest
tiered and earliest pending upload answer offset -1 with leader epoch -1, as
Kafka's UnifiedLog does when remote storage is off. v10's timeout only bounds
remote-storage lookups, so it changes nothing here. As Kafka's ReplicaManager, a
special (negative) timestamp the request's version does not define, or one that
is no special timestamp at all, gets UNSUPPORTED_VERSION for its partition, and a
partition named twice gets INVALID_REQUEST for each of its entries. With
read_committed (isolation level 1) latest is the last stable offset, and an offset
found by timestamp must lie below it (below the high watermark for read_uncommitted),
as Kafka's lastFetchableOffset.
"""

from __future__ import annotations

from odradek.protocol import schemas
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.replication.partition import READ_COMMITTED
from odradek.server.authorization import AclOperation, ResourceType, filter_authorized
from odradek.server.context import RequestContext
from odradek.storage import TopicPartition

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
EARLIEST_PENDING_UPLOAD = -6
#: Kafka's ReplicaManager.timestampMinSupportedVersion: the first version defining each special timestamp.
TIMESTAMP_MIN_VERSION = {
    EARLIEST: 1,
    LATEST: 1,
    MAX_TIMESTAMP: 7,
    EARLIEST_LOCAL: 8,
    LATEST_TIERED: 9,
    EARLIEST_PENDING_UPLOAD: 11,
}


def timestamp_unsupported(timestamp: int, version: int) -> bool:
    """Kafka's isListOffsetsTimestampUnsupported."""
    return timestamp < 0 and version < TIMESTAMP_MIN_VERSION.get(timestamp, 2**15)


def duplicate_partitions(request) -> set[tuple[str, int]]:
    """Partitions named more than once in the request: Kafka's ListOffsetsRequest.duplicatePartitions,
    each of whose entries KafkaApis answers INVALID_REQUEST rather than guess which one was meant."""
    seen: set[tuple[str, int]] = set()
    duplicates: set[tuple[str, int]] = set()
    for topic in request.topics:
        for p in topic.partitions:
            key = (topic.name, p.partition_index)
            (duplicates if key in seen else seen).add(key)
    return duplicates


async def handle(ctx: RequestContext, request):
    module = schemas.response_module(ApiKey.LIST_OFFSETS, ctx.api_version)
    cls = schemas.response_schema(ApiKey.LIST_OFFSETS, ctx.api_version)
    isolation = getattr(request, "isolation_level", 0)
    duplicates = duplicate_partitions(request)
    described = filter_authorized(
        ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.name for t in request.topics)
    )
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            if topic.name not in described:
                code, timestamp, offset, epoch = ErrorCode.topic_authorization_failed, -1, -1, -1
            elif (topic.name, p.partition_index) in duplicates:
                code, timestamp, offset, epoch = ErrorCode.invalid_request, -1, -1, -1
            elif timestamp_unsupported(p.timestamp, ctx.api_version):
                code, timestamp, offset, epoch = ErrorCode.unsupported_version, -1, -1, -1
            else:
                code, timestamp, offset, epoch = _offset_for(
                    ctx, TopicPartition(topic.name, p.partition_index), p, isolation
                )
            partitions.append(
                schemas.build(
                    module.ListOffsetsPartitionResponse,
                    partition_index=p.partition_index,
                    error_code=code,
                    timestamp=timestamp,
                    offset=offset,
                    leader_epoch=epoch,
                    old_style_offsets=(),
                )
            )
        topics.append(
            schemas.build(
                module.ListOffsetsTopicResponse, name=topic.name, partitions=tuple(partitions)
            )
        )
    return schemas.build(cls, throttle_time=0, topics=tuple(topics))


def _offset_for(
    ctx: RequestContext, tp: TopicPartition, p, isolation: int
) -> tuple[ErrorCode, int, int, int]:
    """(error, timestamp, offset, leader epoch) answering one partition of the request."""
    timestamp, offset = -1, -1
    try:
        partition = ctx.broker.replica_manager.partition(tp)
        partition.check_leader_epoch(getattr(p, "current_leader_epoch", -1))
        epoch = partition.leader_epoch
        # Kafka's lastFetchableOffset: what a consumer of this isolation level may read below.
        fetchable = (
            partition.last_stable_offset
            if isolation == READ_COMMITTED
            else partition.high_watermark
        )
        if p.timestamp == LATEST:
            offset = fetchable
        elif p.timestamp in (EARLIEST, EARLIEST_LOCAL):
            offset = partition.log_start_offset
        elif p.timestamp in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):  # nothing is tiered
            epoch = -1
        else:
            found = partition.log.fetch_offset_by_timestamp(p.timestamp)
            if found is not None and found[0] < fetchable:
                offset, timestamp = found
    except KafkaError as e:
        return e.error_code, -1, -1, -1
    return ErrorCode.none, timestamp, offset, epoch
