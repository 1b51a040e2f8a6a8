"""Per-partition log APIs: DeleteRecords, OffsetForLeaderEpoch and DescribeLogDirs.

Authorization, as KafkaApis: DeleteRecords needs DELETE on each topic and
OffsetForLeaderEpoch DESCRIBE (or CLUSTER_ACTION on the cluster, as followers ask it),
else TOPIC_AUTHORIZATION_FAILED for the topic's partitions; DescribeLogDirs needs DESCRIBE
on the cluster, else CLUSTER_AUTHORIZATION_FAILED and no directories.
"""

from __future__ import annotations

import shutil
from collections import defaultdict
from pathlib import Path

from odradek.protocol import schemas
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.authorization import (
    AclOperation,
    ResourceType,
    authorize_cluster,
    filter_authorized,
)
from odradek.server.context import RequestContext
from odradek.storage import TopicPartition

#: DeleteRecords offset meaning "up to the high watermark".
HIGH_WATERMARK = -1


class OffsetOutOfRange(KafkaError):
    error_code = ErrorCode.offset_out_of_range


# -- DeleteRecords -------------------------------------------------------------------------


def _delete_records(ctx: RequestContext, tp: TopicPartition, offset: int) -> int:
    """Advance the log start offset to ``offset``; returns the new low watermark."""
    partition = ctx.broker.replica_manager.partition(tp)
    high_watermark = partition.high_watermark
    target = high_watermark if offset == HIGH_WATERMARK else offset
    if target < 0 or target > high_watermark:
        raise OffsetOutOfRange(
            f"Cannot increment the log start offset to {offset} of partition {tp.topic}-{tp.partition} "
            f"since it is larger than the high watermark {high_watermark}"
        )
    partition.log.maybe_increment_log_start_offset(target)
    return partition.log_start_offset


async def handle_delete_records(ctx: RequestContext, request) -> object:
    module = schemas.response_module(ApiKey.DELETE_RECORDS, ctx.api_version)
    deletable = filter_authorized(
        ctx, AclOperation.DELETE, ResourceType.TOPIC, (t.name for t in request.topics)
    )
    topics = []
    for topic in request.topics:
        results = []
        for p in topic.partitions:
            low_watermark, error = -1, ErrorCode.none
            if topic.name not in deletable:
                error = ErrorCode.topic_authorization_failed
            else:
                try:
                    low_watermark = _delete_records(
                        ctx, TopicPartition(topic.name, p.partition_index), p.offset
                    )
                except KafkaError as exc:
                    error = exc.error_code
            results.append(
                schemas.build(
                    module.DeleteRecordsPartitionResult,
                    partition_index=p.partition_index,
                    low_watermark=low_watermark,
                    error_code=error,
                )
            )
        topics.append(
            schemas.build(
                module.DeleteRecordsTopicResult, name=topic.name, partitions=tuple(results)
            )
        )
    return schemas.build(module.DeleteRecordsResponse, throttle_time=0, topics=tuple(topics))


# -- OffsetForLeaderEpoch ------------------------------------------------------------------


async def handle_offset_for_leader_epoch(ctx: RequestContext, request) -> object:
    """The end offset of the requested leader epoch (KIP-101/KIP-320), for truncation checks."""
    module = schemas.response_module(ApiKey.OFFSET_FOR_LEADER_EPOCH, ctx.api_version)
    names = [t.topic for t in request.topics]
    described = (
        set(names)
        if authorize_cluster(ctx, AclOperation.CLUSTER_ACTION, log_denied=False)
        else filter_authorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    )
    topics = []
    for topic in request.topics:
        results = []
        for p in topic.partitions:
            fields: dict = {"partition": p.partition, "error_code": ErrorCode.none}
            if topic.topic not in described:
                fields.update(
                    error_code=ErrorCode.topic_authorization_failed, leader_epoch=-1, end_offset=-1
                )
                results.append(schemas.build(module.EpochEndOffset, **fields))
                continue
            try:
                partition = ctx.broker.replica_manager.partition(
                    TopicPartition(topic.topic, p.partition)
                )
                epoch, end_offset = partition.last_offset_for_leader_epoch(
                    p.current_leader_epoch, p.leader_epoch
                )
                fields.update(leader_epoch=epoch, end_offset=end_offset)
            except KafkaError as exc:
                fields.update(error_code=exc.error_code, leader_epoch=-1, end_offset=-1)
            results.append(schemas.build(module.EpochEndOffset, **fields))
        topics.append(
            schemas.build(
                module.OffsetForLeaderTopicResult, topic=topic.topic, partitions=tuple(results)
            )
        )
    return schemas.build(module.OffsetForLeaderEpochResponse, throttle_time=0, topics=tuple(topics))


# -- DescribeLogDirs -----------------------------------------------------------------------


async def handle_describe_log_dirs(ctx: RequestContext, request) -> object:
    module = schemas.response_module(ApiKey.DESCRIBE_LOG_DIRS, ctx.api_version)
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        return schemas.build(
            module.DescribeLogDirsResponse,
            throttle_time=0,
            error_code=ErrorCode.cluster_authorization_failed,
            results=(),
        )
    wanted: dict[str, set[int]] | None = None
    if request.topics is not None:
        wanted = {t.topic: set(t.partitions) for t in request.topics}
    by_dir: dict[Path, dict[str, list]] = {
        Path(d).resolve(): defaultdict(list) for d in ctx.broker.config.log_dirs
    }
    for log in ctx.broker.log_manager.all_logs():
        tp = log.topic_partition
        if wanted is not None and tp.partition not in wanted.get(tp.topic, ()):
            continue
        topics = by_dir.setdefault(Path(log.dir).resolve().parent, defaultdict(list))
        topics[tp.topic].append(
            schemas.build(
                module.DescribeLogDirsPartition,
                partition_index=tp.partition,
                partition_size=log.size_in_bytes,
                offset_lag=0,
                is_future_key=False,
            )
        )
    results = []
    for log_dir, topics in by_dir.items():
        usage = shutil.disk_usage(log_dir)
        results.append(
            schemas.build(
                module.DescribeLogDirsResult,
                error_code=ErrorCode.none,
                log_dir=str(log_dir),
                topics=tuple(
                    schemas.build(
                        module.DescribeLogDirsTopic,
                        name=name,
                        partitions=tuple(sorted(parts, key=lambda p: p.partition_index)),
                    )
                    for name, parts in sorted(topics.items())
                ),
                total_bytes=usage.total,
                usable_bytes=usage.free,
            )
        )
    return schemas.build(
        module.DescribeLogDirsResponse,
        throttle_time=0,
        error_code=ErrorCode.none,
        results=tuple(results),
    )
