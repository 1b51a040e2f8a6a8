"""Metadata: brokers, cluster id, controller, topics with ids, partitions, leaders and epochs.

Asking for an unknown topic creates it when auto.create.topics.enable is on and
the request allows it (v4+), with num.partitions and default.replication.factor,
as Kafka does; the new topic is returned ready once its logs exist. A topic
whose creation is still under way (a large CreateTopics) is answered with
LEADER_NOT_AVAILABLE, as Kafka answers for a topic it is still creating.

Brokers are described by their endpoint on the listener the request came in
on (advertised.listeners, matched by listener name). A leader not advertised
on that listener makes its partitions answer LISTENER_NOT_FOUND (v6+) or
LEADER_NOT_AVAILABLE, and a broker without such an endpoint is left out, as
Kafka's metadata cache does. In a cluster, a partition without a live leader
(leader -1 after its last in-sync replica died) answers LEADER_NOT_AVAILABLE
with leader -1, and replicas on brokers that are not registered are listed as
offline_replicas.

Authorization, as KafkaApis.handleTopicMetadataRequest: a topic the caller may not DESCRIBE
is left out of an all-topics answer and answered TOPIC_AUTHORIZATION_FAILED when named
(by id: without its name), so its existence is not disclosed either way. Auto-creation
needs CREATE on the cluster or on the topic, else TOPIC_AUTHORIZATION_FAILED. The cluster's
authorized operations need DESCRIBE on the cluster, else they are 0.
"""

from __future__ import annotations

import logging

from odradek.metadata.image import TopicImage
from odradek.metadata.topic_names import INTERNAL_TOPICS, validate_topic_name
from odradek.protocol import schemas
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.authorization import (
    AUTHORIZED_OPERATIONS_OMITTED,
    CLUSTER_NAME,
    AclOperation,
    ResourceType,
    authorize,
    authorized_operations,
    cluster_authorized_operations,
)
from odradek.server.context import RequestContext

log = logging.getLogger(__name__)


async def handle(ctx: RequestContext, request):
    broker = ctx.broker
    store = broker.metadata
    module = schemas.response_module(ApiKey.METADATA, ctx.api_version)
    cls = schemas.response_schema(ApiKey.METADATA, ctx.api_version)

    listener = ctx.connection.listener_name
    endpoints = {b.node_id: (b, b.endpoint(listener)) for b in store.brokers()}
    reachable = {node for node, (_, endpoint) in endpoints.items() if endpoint is not None}
    no_listener = (
        ErrorCode.listener_not_found if ctx.api_version >= 6 else ErrorCode.leader_not_available
    )

    include_topic_ops = getattr(request, "include_topic_authorized_operations", False)
    live = set(endpoints)

    def _ops(name: str | None) -> int:
        return authorized_operations(ctx, ResourceType.TOPIC, name or "", include_topic_ops)

    def _topic(topic: TopicImage):
        return _describe_topic(module, topic, live, reachable, no_listener, _ops(topic.name))

    all_topics = request.topics is None or (ctx.api_version == 0 and not request.topics)
    topics = []
    if all_topics:
        topics = [
            _topic(t)
            for t in store.topics().values()
            if authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, t.name, log_denied=False)
        ]
    else:
        allow_auto = getattr(request, "allow_auto_topic_creation", True)
        for wanted in request.topics:
            name = wanted.name
            topic = store.topic(name) if name is not None else None
            if name is None and getattr(wanted, "topic_id", None) is not None:
                topic = store.topic_by_id(wanted.topic_id)
            described = name if name is not None else topic.name if topic is not None else None
            if described is not None and not authorize(
                ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, described
            ):
                topics.append(_refused_topic(module, name, wanted))
                continue
            if topic is None and name is not None and name in store.pending_topics():
                topics.append(
                    _error_topic(module, name, wanted, ErrorCode.leader_not_available, _ops(name))
                )
                continue
            if (
                topic is None
                and name is not None
                and allow_auto
                and broker.config["auto.create.topics.enable"]
            ):
                if not _may_create(ctx, name):
                    topics.append(_refused_topic(module, name, wanted))
                    continue
                topic = await _auto_create(broker, name, topics, module, _ops(name))
                if topic is None:
                    continue
            if topic is None:
                topics.append(
                    _error_topic(
                        module, name, wanted, ErrorCode.unknown_topic_or_partition, _ops(name)
                    )
                )
            else:
                topics.append(_topic(topic))

    brokers = tuple(
        schemas.build(
            module.MetadataResponseBroker,
            node_id=b.node_id,
            host=endpoint[0],
            port=endpoint[1],
            rack=b.rack,
        )
        for b, endpoint in endpoints.values()
        if endpoint is not None
    )
    return schemas.build(
        cls,
        throttle_time=0,
        brokers=brokers,
        cluster_id=store.cluster_id,
        controller_id=store.controller_id,
        topics=tuple(topics),
        cluster_authorized_operations=cluster_authorized_operations(
            ctx, getattr(request, "include_cluster_authorized_operations", False)
        ),
        error_code=ErrorCode.none,
    )


def _may_create(ctx: RequestContext, name: str) -> bool:
    """Auto-creation's check: CREATE on the cluster (not logged when denied), else on the topic."""
    return authorize(
        ctx, AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=False
    ) or authorize(ctx, AclOperation.CREATE, ResourceType.TOPIC, name)


async def _auto_create(broker, name: str, topics: list, module, ops: int) -> TopicImage | None:
    try:
        validate_topic_name(name)
        if name in INTERNAL_TOPICS:
            raise KafkaError(f"{name} is internal", ErrorCode.invalid_topic_exception)
        return await broker.replica_manager.create_topic(
            name, broker.config["num.partitions"], broker.config["default.replication.factor"]
        )
    except KafkaError as e:
        log.info("auto creation of topic %r refused: %s", name, e)
        topics.append(_error_topic(module, name, None, e.error_code, ops))
        return None


def _error_topic(module, name, wanted, code, ops: int):
    return schemas.build(
        module.MetadataResponseTopic,
        error_code=code,
        name=name,
        topic_id=getattr(wanted, "topic_id", None) if wanted is not None else None,
        is_internal=False,
        partitions=(),
        topic_authorized_operations=ops,
    )


def _refused_topic(module, name, wanted):
    """TOPIC_AUTHORIZATION_FAILED for a named topic, without its operations."""
    return _error_topic(
        module, name, wanted, ErrorCode.topic_authorization_failed, AUTHORIZED_OPERATIONS_OMITTED
    )


def _partition_error(leader: int, live: set[int], reachable: set[int], no_listener: ErrorCode):
    if leader in reachable:
        return ErrorCode.none
    return no_listener if leader in live else ErrorCode.leader_not_available


def _describe_topic(
    module,
    topic: TopicImage,
    live: set[int],
    reachable: set[int],
    no_listener: ErrorCode,
    ops: int,
):
    partitions = tuple(
        schemas.build(
            module.MetadataResponsePartition,
            error_code=_partition_error(p.leader, live, reachable, no_listener),
            partition_index=p.partition,
            leader_id=p.leader if p.leader in reachable else -1,
            leader_epoch=p.leader_epoch,
            replica_nodes=p.replicas,
            isr_nodes=p.isr,
            offline_replicas=tuple(r for r in p.replicas if r not in live),
        )
        for p in topic.partitions
    )
    return schemas.build(
        module.MetadataResponseTopic,
        error_code=ErrorCode.none,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.internal,
        partitions=partitions,
        topic_authorized_operations=ops,
    )
