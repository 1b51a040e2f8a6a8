"""WriteTxnMarkers (API 27): a transaction coordinator has this broker write COMMIT or ABORT
markers to partitions it leads.

Each marker of the request is one transaction's outcome for some partitions; each is
written through ``ReplicaManager.write_txn_markers`` (the path a coordinator on this
broker takes too) as a control batch with ``from_client`` False, acks=all, and the
request waits for the markers' replication, as Kafka's KafkaApis.handleWriteTxnMarkersRequest.
Per partition the answer is Kafka's: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER,
INVALID_PRODUCER_EPOCH (the marker's epoch is older than the producer's here),
TRANSACTION_COORDINATOR_FENCED (its coordinator epoch is older than the last marker's),
NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR.

Versions 1 and 2 are served (Kafka 4 removed v0, KIP-896). v2's TransactionVersion
says whether the transaction is one of transactions version 2, whose markers carry an
epoch bumped past the transaction's records: such a marker must not end a transaction
open in its own epoch, the producer's next one (see ProducerStateManager.end_txn).
WriteTxnMarkers is an inter-broker API: it needs ALTER or CLUSTER_ACTION on the cluster
(the brokers' principal is a super user), else every partition gets
CLUSTER_AUTHORIZATION_FAILED, as Kafka answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from odradek.protocol import schemas
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.server.authorization import AclOperation, authorize_cluster
from odradek.server.context import RequestContext
from odradek.storage import TopicPartition

#: Kafka's request.timeout.ms default, which bounds the wait for the markers' replication.
MARKER_REPLICATION_TIMEOUT_MS = 30_000


async def handle(ctx: RequestContext, request) -> object:
    module = schemas.response_module(ApiKey.WRITE_TXN_MARKERS, ctx.api_version)
    if authorize_cluster(ctx, AclOperation.ALTER, log_denied=False) or authorize_cluster(
        ctx, AclOperation.CLUSTER_ACTION
    ):
        results = await asyncio.gather(*(_write(ctx, marker) for marker in request.markers))
    else:
        results = [
            {
                TopicPartition(t.name, index): ErrorCode.cluster_authorization_failed
                for t in marker.topics
                for index in t.partition_indexes
            }
            for marker in request.markers
        ]
    return schemas.build(
        module.WriteTxnMarkersResponse,
        markers=tuple(
            schemas.build(
                module.WritableTxnMarkerResult,
                producer_id=marker.producer_id,
                topics=tuple(
                    schemas.build(
                        module.WritableTxnMarkerTopicResult,
                        name=topic.name,
                        partitions=tuple(
                            schemas.build(
                                module.WritableTxnMarkerPartitionResult,
                                partition_index=index,
                                error_code=errors[TopicPartition(topic.name, index)],
                            )
                            for index in topic.partition_indexes
                        ),
                    )
                    for topic in marker.topics
                ),
            )
            for marker, errors in zip(request.markers, results, strict=True)
        ),
    )


async def _write(ctx: RequestContext, marker) -> dict[TopicPartition, ErrorCode]:
    """One transaction's markers: the error of each of its partitions (a
    ``__consumer_offsets`` partition's offsets follow through the group coordinator's
    marker listener)."""
    partitions: Sequence[TopicPartition] = [
        TopicPartition(topic.name, index)
        for topic in marker.topics
        for index in topic.partition_indexes
    ]
    return await ctx.broker.replica_manager.write_txn_markers(
        partitions,
        marker.producer_id,
        marker.producer_epoch,
        marker.transaction_result,
        marker.coordinator_epoch,
        MARKER_REPLICATION_TIMEOUT_MS,
        getattr(marker, "transaction_version", 0),
    )
