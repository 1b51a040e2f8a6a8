"""CreateTopics, DeleteTopics and CreatePartitions.

Checks follow Kafka's order: duplicates in the request, name rules, existence and
'.'/'_' collisions, partitions and replication factor against the live brokers,
then configs through LogConfig. The MetadataStore makes the change durable and
the ReplicaManager, subscribed to it, creates or deletes the logs. Creation
awaits the ReplicaManager, which makes the logs a chunk at a time so that a
topic of thousands of partitions does not stall other clients; the name is
reserved from validation on, so a concurrent request for it sees it taken.

Authorization, as KafkaApis (TOPIC_AUTHORIZATION_FAILED, checked after duplicates and
before existence): creating needs CREATE on the cluster or on the topic, and a created
topic's configs are returned only with DESCRIBE_CONFIGS on it; deleting needs DELETE on the
topic (and DESCRIBE when it is named by id); adding partitions needs ALTER on the topic.

Under a ``controller_mutation_rate`` quota each topic's partitions created, added or
deleted are counted before the change (not for validate_only), as Kafka's ZkAdminManager:
a strict quota (CreateTopics v6+, DeleteTopics v5+, CreatePartitions v3+) answers
THROTTLING_QUOTA_EXCEEDED for the topics that come after the quota ran out, an older
version's permissive one makes every change; both answer the throttle time
(``server.throttling``).
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Sequence

from odradek.metadata.image import TopicImage
from odradek.metadata.store import (
    InvalidPartitions,
    InvalidReplicationFactor,
    TopicExists,
    UnknownTopic,
)
from odradek.metadata.topic_names import INTERNAL_TOPICS, colliding_topic, validate_topic_name
from odradek.protocol import schemas
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.authorization import (
    CLUSTER_NAME,
    AclOperation,
    ResourceType,
    authorize,
    filter_authorized,
)
from odradek.server.context import RequestContext
from odradek.server.handlers.configs import describe_topic, validated_topic_config
from odradek.server.throttling import controller_mutation_quota, mutation_throttle_ms

#: The first versions that know THROTTLING_QUOTA_EXCEEDED: their quota is strict (KIP-599).
STRICT_CREATE_TOPICS, STRICT_DELETE_TOPICS, STRICT_CREATE_PARTITIONS = 6, 5, 3


class InvalidRequest(KafkaError):
    error_code = ErrorCode.invalid_request


class InvalidTopic(KafkaError):
    error_code = ErrorCode.invalid_topic_exception


class InvalidReplicaAssignment(KafkaError):
    error_code = ErrorCode.invalid_replica_assignment


class TopicAuthorizationFailed(KafkaError):
    error_code = ErrorCode.topic_authorization_failed


class ThrottlingQuotaExceeded(KafkaError):
    error_code = ErrorCode.throttling_quota_exceeded


def _count_mutations(ctx: RequestContext, quota, partitions: int) -> None:
    """ThrottlingQuotaExceeded when the request's strict quota refuses ``partitions``."""
    if quota is not None and not quota.record(partitions, ctx.now_ms):
        raise ThrottlingQuotaExceeded("The throttling quota has been exceeded.")


class TopicDeletionDisabled(KafkaError):
    error_code = ErrorCode.topic_deletion_disabled


class UnknownTopicId(KafkaError):
    error_code = ErrorCode.unknown_topic_id


def _duplicates(names: Sequence[str]) -> set[str]:
    return {name for name, count in Counter(names).items() if count > 1}


# -- CreateTopics --------------------------------------------------------------------------


def _check_assignments(ctx: RequestContext, assignments: Sequence, first_partition: int = 0) -> int:
    """Validate a manual assignment; returns its replication factor."""
    live = {b.node_id for b in ctx.broker.metadata.brokers()}
    sizes = set()
    for expected, assignment in enumerate(assignments, start=first_partition):
        partition = getattr(assignment, "partition_index", expected)
        if partition != expected:
            raise InvalidReplicaAssignment(
                "Partitions should be a consecutive 0-based integer sequence"
            )
        replicas = list(assignment.broker_ids)
        if not replicas:
            raise InvalidReplicaAssignment(f"Empty replica list for partition {partition}")
        if len(set(replicas)) != len(replicas):
            raise InvalidReplicaAssignment(
                f"Duplicate brokers not allowed in replica assignment: {replicas}"
            )
        unknown = sorted(set(replicas) - live)
        if unknown:
            raise InvalidReplicaAssignment(f"Unknown broker(s) {unknown} in replica assignment")
        sizes.add(len(replicas))
    if len(sizes) > 1:
        raise InvalidReplicaAssignment("All partitions should have the same number of replicas")
    return sizes.pop() if sizes else 0


def _plan_topic(ctx: RequestContext, topic) -> tuple[int, int, dict[str, str]]:
    """(partitions, replication factor, config overrides) a CreatableTopic asks for, validated."""
    metadata = ctx.broker.metadata
    validate_topic_name(topic.name)
    if topic.name in INTERNAL_TOPICS:
        raise InvalidRequest(f"Creation of internal topic {topic.name} is prohibited.")
    existing = set(metadata.topics()) | metadata.pending_topics()
    if topic.name in existing:
        raise TopicExists(f"Topic '{topic.name}' already exists.")
    collision = colliding_topic(topic.name, existing)
    if collision is not None:
        raise InvalidTopic(f"Topic '{topic.name}' collides with existing topic: {collision}")
    if topic.assignments:
        if topic.num_partitions != -1 or topic.replication_factor != -1:
            raise InvalidRequest(
                "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time."
            )
        partitions = len(topic.assignments)
        replication = _check_assignments(ctx, topic.assignments)
    else:
        partitions = topic.num_partitions
        if partitions == -1:
            partitions = ctx.broker.config["num.partitions"]
        elif partitions <= 0:
            raise InvalidPartitions(
                "Number of partitions was set to an invalid non-positive value."
            )
        replication = topic.replication_factor
        if replication == -1:
            replication = ctx.broker.config["default.replication.factor"]
        elif replication <= 0:
            raise InvalidReplicationFactor(
                "Replication factor must be larger than 0, or -1 to use the default value."
            )
    live = len(metadata.brokers())
    if replication > live:
        raise InvalidReplicationFactor(
            f"Unable to replicate the partition {replication} time(s): The target replication factor "
            f"of {replication} cannot be reached because only {live} broker(s) are registered."
        )
    names = [c.name for c in topic.configs]
    if _duplicates(names):
        raise InvalidRequest(f"Duplicate config names in request: {sorted(_duplicates(names))}")
    configs = {c.name: c.value for c in topic.configs}
    validated_topic_config(ctx, configs)
    return partitions, replication, configs


async def handle_create_topics(ctx: RequestContext, request) -> object:
    module = schemas.response_module(ApiKey.CREATE_TOPICS, ctx.api_version)
    duplicates = _duplicates([t.name for t in request.topics])
    names = [t.name for t in request.topics]
    creatable = (
        set(names)
        if authorize(ctx, AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=False)
        else filter_authorized(ctx, AclOperation.CREATE, ResourceType.TOPIC, names)
    )
    quota = controller_mutation_quota(ctx, STRICT_CREATE_TOPICS)
    results = []
    for topic in request.topics:
        fields: dict = {
            "name": topic.name,
            "topic_id": None,
            "error_message": None,
            "configs": None,
        }
        try:
            if topic.name in duplicates:
                raise InvalidRequest(
                    f"Create topics request from client contains multiple entries for topic {topic.name}"
                )
            if topic.name not in creatable:
                raise TopicAuthorizationFailed("Authorization failed.")
            partitions, replication, configs = _plan_topic(ctx, topic)
            if request.validate_only:
                image = None
            else:
                _count_mutations(ctx, quota, partitions)
                image = await ctx.broker.replica_manager.create_topic(
                    topic.name,
                    partitions,
                    replication,
                    configs,
                    assignment=[list(a.broker_ids) for a in topic.assignments] or None,
                )
                fields["topic_id"] = image.topic_id
            fields.update(
                error_code=ErrorCode.none, num_partitions=partitions, replication_factor=replication
            )
            if authorize(ctx, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, topic.name):
                fields["configs"] = _created_configs(
                    ctx, module, image or _draft_image(topic.name, configs)
                )
            else:  # created, but its configs are not the caller's to see
                fields["topic_config_error_code"] = ErrorCode.topic_authorization_failed
        except KafkaError as exc:
            fields.update(error_code=exc.error_code, error_message=str(exc))
        results.append(schemas.build(module.CreatableTopicResult, **fields))
    return schemas.build(
        module.CreateTopicsResponse,
        throttle_time=mutation_throttle_ms(ctx, quota),
        topics=tuple(results),
    )


def _draft_image(name: str, configs: dict[str, str]) -> TopicImage:
    """A stand-in image so validate_only can describe the configs a topic would get."""
    return TopicImage(name=name, topic_id=uuid.UUID(int=0), partitions=(), configs=configs)


def _created_configs(ctx: RequestContext, module, image: TopicImage) -> tuple:
    """CreateTopics v5+ returns the new topic's effective configs (KIP-525)."""
    if not hasattr(module, "CreatableTopicConfigs"):
        return ()
    return tuple(
        module.CreatableTopicConfigs(
            name=c.name,
            value=c.value,
            read_only=c.read_only,
            config_source=int(c.source),
            is_sensitive=c.is_sensitive,
        )
        for c in describe_topic(ctx, image)
    )


# -- DeleteTopics --------------------------------------------------------------------------


def _resolve_delete(ctx: RequestContext, name: str | None, topic_id) -> TopicImage:
    metadata = ctx.broker.metadata
    if name is not None and topic_id is not None and topic_id.int != 0:
        raise InvalidRequest("Topic name and topic id cannot both be set")
    if topic_id is not None and topic_id.int != 0:
        topic = metadata.topic_by_id(topic_id)
        if topic is None:
            raise UnknownTopicId(f"Topic id {topic_id} does not exist")
        return topic
    topic = metadata.topic(name) if name is not None else None
    if topic is None:
        raise UnknownTopic("This server does not host this topic-partition.")
    return topic


async def handle_delete_topics(ctx: RequestContext, request) -> object:
    module = schemas.response_module(ApiKey.DELETE_TOPICS, ctx.api_version)
    if hasattr(request, "topic_names"):
        wanted = [(name, None) for name in request.topic_names]
    else:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    quota = controller_mutation_quota(ctx, STRICT_DELETE_TOPICS)
    responses = []
    for name, topic_id in wanted:
        fields: dict = {"name": name, "topic_id": topic_id, "error_message": None}
        try:
            if not ctx.broker.config["delete.topic.enable"]:
                raise TopicDeletionDisabled("Topic deletion is disabled.")
            if name is not None and not authorize(
                ctx, AclOperation.DELETE, ResourceType.TOPIC, name
            ):
                raise TopicAuthorizationFailed("Authorization failed.")
            topic = _resolve_delete(ctx, name, topic_id)
            if name is None and not (
                authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topic.name)
                and authorize(ctx, AclOperation.DELETE, ResourceType.TOPIC, topic.name)
            ):  # named by id: the name is not disclosed to whoever may not describe it
                raise TopicAuthorizationFailed("Authorization failed.")
            fields.update(name=topic.name, topic_id=topic.topic_id)
            _count_mutations(ctx, quota, len(topic.partitions))
            ctx.broker.metadata.delete_topic(topic.name)
            fields["error_code"] = ErrorCode.none
        except KafkaError as exc:
            fields.update(error_code=exc.error_code, error_message=str(exc))
        responses.append(schemas.build(module.DeletableTopicResult, **fields))
    return schemas.build(
        module.DeleteTopicsResponse,
        throttle_time=mutation_throttle_ms(ctx, quota),
        responses=tuple(responses),
    )


# -- CreatePartitions ----------------------------------------------------------------------


async def handle_create_partitions(ctx: RequestContext, request) -> object:
    module = schemas.response_module(ApiKey.CREATE_PARTITIONS, ctx.api_version)
    duplicates = _duplicates([t.name for t in request.topics])
    quota = controller_mutation_quota(ctx, STRICT_CREATE_PARTITIONS)
    results = []
    for topic in request.topics:
        error, message = ErrorCode.none, None
        try:
            if topic.name in duplicates:
                raise InvalidRequest("Duplicate topic in request.")
            if not authorize(ctx, AclOperation.ALTER, ResourceType.TOPIC, topic.name):
                raise TopicAuthorizationFailed("The topic authorization is failed.")
            current = ctx.broker.metadata.topic(topic.name)
            if current is None:
                raise UnknownTopic(f"The topic '{topic.name}' does not exist.")
            existing = len(current.partitions)
            if topic.count <= existing:
                raise InvalidPartitions(
                    f"Topic currently has {existing} partitions, which is higher than or equal to the requested {topic.count}."
                    if topic.count < existing
                    else f"Topic already has {existing} partitions."
                )
            if topic.assignments is not None:
                if len(topic.assignments) != topic.count - existing:
                    raise InvalidReplicaAssignment(
                        f"Attempted to add {topic.count - existing} additional partition(s), "
                        f"but only {len(topic.assignments)} assignment(s) were specified."
                    )
                _check_assignments(ctx, topic.assignments, existing)
            if not request.validate_only:
                _count_mutations(ctx, quota, topic.count - existing)
                await ctx.broker.replica_manager.create_partitions(topic.name, topic.count)
        except KafkaError as exc:
            error, message = exc.error_code, str(exc)
        results.append(
            schemas.build(
                module.CreatePartitionsTopicResult,
                name=topic.name,
                error_code=error,
                error_message=message,
            )
        )
    return schemas.build(
        module.CreatePartitionsResponse,
        throttle_time=mutation_throttle_ms(ctx, quota),
        results=tuple(results),
    )
