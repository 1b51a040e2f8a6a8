"""ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments.

Kafka's brokers forward these to the controller; here the MetadataStore is the
controller's side, so the handlers only translate between the protocol and the
store's ``elect_leaders`` / ``alter_partition_reassignments`` /
``list_partition_reassignments``, and keep working unchanged on any backend.
Protocol rules that are not the controller's decisions live here, as in
Kafka's handlers: an election over every partition (null TopicPartitions) does
not report partitions whose election was not needed; an unknown election type
is INVALID_REQUEST. The requests' timeouts bound nothing because the store
answers at once (a single node completes every accepted change immediately).

Authorization, as KafkaApis: electing leaders and altering reassignments need ALTER on the
cluster, listing reassignments DESCRIBE; refused, the request gets
CLUSTER_AUTHORIZATION_FAILED as its top-level error.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from odradek.metadata.image import OngoingReassignment
from odradek.metadata.store import ElectionType, TopicPartitionKey
from odradek.protocol import schemas
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.error_response import error_response
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.authorization import AclOperation, authorize_cluster, denied
from odradek.server.context import RequestContext


def _error(result: KafkaError | None) -> tuple[ErrorCode, str | None]:
    return (ErrorCode.none, None) if result is None else (result.error_code, str(result))


# -- ElectLeaders --------------------------------------------------------------------------


async def handle_elect_leaders(ctx: RequestContext, request) -> object:
    if not authorize_cluster(ctx, AclOperation.ALTER):
        return denied(ctx, request, ErrorCode.cluster_authorization_failed)
    cls = schemas.response_schema(ApiKey.ELECT_LEADERS, ctx.api_version)
    module = schemas.response_module(ApiKey.ELECT_LEADERS, ctx.api_version)
    try:
        election_type = ElectionType(getattr(request, "election_type", ElectionType.PREFERRED))
    except ValueError:
        return error_response(cls, request, ErrorCode.invalid_request)
    store = ctx.broker.metadata
    by_topic: dict[str, list[int]]
    if request.topic_partitions is None:
        results = store.elect_leaders(election_type, None)
        by_topic = {name: [] for name in store.topics()}
        for (name, index), result in results.items():
            if result is None or result.error_code != ErrorCode.election_not_needed:
                by_topic.setdefault(name, []).append(index)
    else:
        wanted = [(t.topic, p) for t in request.topic_partitions for p in t.partitions]
        results = store.elect_leaders(election_type, wanted)
        by_topic = defaultdict(list)
        for t in request.topic_partitions:
            by_topic[t.topic].extend(t.partitions)

    def partition(topic: str, index: int) -> object:
        code, message = _error(results[(topic, index)])
        return schemas.build(
            module.PartitionResult, partition_id=index, error_code=code, error_message=message
        )

    return schemas.build(
        cls,
        throttle_time=0,
        error_code=ErrorCode.none,
        replica_election_results=tuple(
            schemas.build(
                module.ReplicaElectionResult,
                topic=topic,
                partition_result=tuple(partition(topic, i) for i in indexes),
            )
            for topic, indexes in by_topic.items()
        ),
    )


# -- AlterPartitionReassignments -------------------------------------------------------------


async def handle_alter_partition_reassignments(ctx: RequestContext, request) -> object:
    if not authorize_cluster(ctx, AclOperation.ALTER):
        return denied(ctx, request, ErrorCode.cluster_authorization_failed)
    module = schemas.response_module(ApiKey.ALTER_PARTITION_REASSIGNMENTS, ctx.api_version)
    allow_rf_change = getattr(request, "allow_replication_factor_change", True)
    targets = {
        (t.name, p.partition_index): p.replicas for t in request.topics for p in t.partitions
    }
    results = ctx.broker.metadata.alter_partition_reassignments(targets, allow_rf_change)

    def partition(topic: str, index: int) -> object:
        code, message = _error(results[(topic, index)])
        return schemas.build(
            module.ReassignablePartitionResponse,
            partition_index=index,
            error_code=code,
            error_message=message,
        )

    return schemas.build(
        module.AlterPartitionReassignmentsResponse,
        throttle_time=0,
        allow_replication_factor_change=allow_rf_change,
        error_code=ErrorCode.none,
        error_message=None,
        responses=tuple(
            schemas.build(
                module.ReassignableTopicResponse,
                name=t.name,
                partitions=tuple(partition(t.name, p.partition_index) for p in t.partitions),
            )
            for t in request.topics
        ),
    )


# -- ListPartitionReassignments --------------------------------------------------------------


async def handle_list_partition_reassignments(ctx: RequestContext, request) -> object:
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        return denied(ctx, request, ErrorCode.cluster_authorization_failed)
    module = schemas.response_module(ApiKey.LIST_PARTITION_REASSIGNMENTS, ctx.api_version)
    wanted = None
    if request.topics is not None:
        wanted = [(t.name, p) for t in request.topics for p in t.partition_indexes]
    ongoing = ctx.broker.metadata.list_partition_reassignments(wanted)
    return schemas.build(
        module.ListPartitionReassignmentsResponse,
        throttle_time=0,
        error_code=ErrorCode.none,
        error_message=None,
        topics=_ongoing_topics(module, ongoing),
    )


def _ongoing_topics(module, ongoing: Mapping[TopicPartitionKey, OngoingReassignment]) -> tuple:
    by_topic: dict[str, list] = defaultdict(list)
    for (name, index), r in sorted(ongoing.items()):
        by_topic[name].append(
            schemas.build(
                module.OngoingPartitionReassignment,
                partition_index=index,
                replicas=r.replicas,
                adding_replicas=r.adding,
                removing_replicas=r.removing,
            )
        )
    return tuple(
        schemas.build(module.OngoingTopicReassignment, name=name, partitions=tuple(parts))
        for name, parts in by_topic.items()
    )
