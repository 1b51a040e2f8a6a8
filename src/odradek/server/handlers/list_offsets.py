"""ListOffsets: offsets by timestamp, earliest (-2), latest (-1), max timestamp (-3), earliest local (-4),
latest tiered (-5, v9+).

There is no remote tier, so earliest local is the log start offset and latest
tiered answers offset -1 with leader epoch -1, as Kafka does when remote storage
is off. v10's timeout only bounds remote-storage lookups, so it changes nothing here.
"""

from __future__ import annotations

from odradek.protocol import schemas
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.replication.partition import READ_COMMITTED
from odradek.server.context import RequestContext
from odradek.storage import TopicPartition

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5


async def handle(ctx: RequestContext, request):
    module = schemas.response_module(ApiKey.LIST_OFFSETS, ctx.api_version)
    cls = schemas.response_schema(ApiKey.LIST_OFFSETS, ctx.api_version)
    isolation = getattr(request, "isolation_level", 0)
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            code, timestamp, offset, epoch = ErrorCode.none, -1, -1, -1
            try:
                partition = ctx.broker.replica_manager.partition(TopicPartition(topic.name, p.partition_index))
                partition.check_leader_epoch(getattr(p, "current_leader_epoch", -1))
                epoch = partition.leader_epoch
                if p.timestamp == LATEST:
                    offset = partition.last_stable_offset if isolation == READ_COMMITTED else partition.high_watermark
                elif p.timestamp in (EARLIEST, EARLIEST_LOCAL):
                    offset = partition.log_start_offset
                elif p.timestamp == LATEST_TIERED:
                    epoch = -1
                else:
                    found = partition.log.fetch_offset_by_timestamp(p.timestamp)
                    if found is not None and found[0] < partition.high_watermark:
                        offset, timestamp = found
            except KafkaError as e:
                code, epoch = e.error_code, -1
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
        topics.append(schemas.build(module.ListOffsetsTopicResponse, name=topic.name, partitions=tuple(partitions)))
    return schemas.build(cls, throttle_time=0, topics=tuple(topics))
