"""DescribeProducers (KIP-664): the active producers of each partition, from its producer state.

As Kafka's ReplicaManager.activeProducerState: a partition this broker does not
host is UNKNOWN_TOPIC_OR_PARTITION, one it does not lead NOT_LEADER_OR_FOLLOWER
(both without a message), otherwise every producer the log's producer state
keeps, with its epoch, last sequence, last timestamp, the coordinator epoch of its
last transaction marker and the first offset of its open transaction (-1 for none,
which is what Kafka reports for an idempotent producer). Each topic needs READ, else its
partitions get TOPIC_AUTHORIZATION_FAILED (KafkaApis.handleDescribeProducersRequest).
"""

from __future__ import annotations

from odradek.protocol import schemas
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.authorization import AclOperation, ResourceType, filter_authorized
from odradek.server.context import RequestContext
from odradek.storage import TopicPartition


async def handle_describe_producers(ctx: RequestContext, request) -> object:
    module = schemas.response_module(ApiKey.DESCRIBE_PRODUCERS, ctx.api_version)
    readable = filter_authorized(
        ctx, AclOperation.READ, ResourceType.TOPIC, (t.name for t in request.topics)
    )

    def partition(topic: str, index: int) -> object:
        if topic not in readable:
            return _error(module, index, ErrorCode.topic_authorization_failed)
        try:
            p = ctx.broker.replica_manager.partition(TopicPartition(topic, index))
        except KafkaError as e:
            return _error(module, index, e.error_code)
        if p.leader_id != ctx.broker.node_id:
            return _error(module, index, ErrorCode.not_leader_or_follower)
        producers = tuple(
            schemas.build(
                module.ProducerState,
                producer_id=entry.producer_id,
                producer_epoch=entry.epoch,
                last_sequence=entry.last_seq,
                last_timestamp=entry.last_timestamp,
                coordinator_epoch=entry.coordinator_epoch,
                current_txn_start_offset=entry.current_txn_first_offset,
            )
            for entry in list(p.log.producer_state.producers.values())
        )
        return schemas.build(
            module.PartitionResponse,
            partition_index=index,
            error_code=ErrorCode.none,
            error_message=None,
            active_producers=producers,
        )

    return schemas.build(
        module.DescribeProducersResponse,
        throttle_time=0,
        topics=tuple(
            schemas.build(
                module.TopicResponse,
                name=t.name,
                partitions=tuple(partition(t.name, i) for i in t.partition_indexes),
            )
            for t in request.topics
        ),
    )


def _error(module, index: int, code: ErrorCode) -> object:
    return schemas.build(
        module.PartitionResponse,
        partition_index=index,
        error_code=code,
        error_message=None,
        active_producers=(),
    )
