"""Group APIs (classic protocol and offsets) over the broker's GroupCoordinatorService.

Each handler turns the kio request into one call on the sans-I/O core through
the service (which persists to __consumer_offsets before we answer) and builds
the response for the request's version. A group's coordinator is the leader of
its __consumer_offsets partition: FindCoordinator names that broker, and every
other group API answers NOT_COORDINATOR for a group whose partition is not loaded
here (calls through the service check it; the handlers that only read the core
check ``coordinates`` themselves, per group where Kafka answers per group). Reads
(OffsetFetch, DescribeGroups, ListGroups, ConsumerGroupDescribe) answer the groups as of
their partition's high watermark, as Kafka's (see coordinator/uncommitted.py); OffsetFetch
checks the member asking against the live group, because the answers to heartbeats here
do not wait for replication and the member may already hold an epoch still being replicated.

Authorization, as KafkaApis: joining, syncing, heartbeats, leaving and committing need
READ on the group, fetching offsets and describing need DESCRIBE, deleting groups and
offsets DELETE (GROUP_AUTHORIZATION_FAILED); committed and deleted offsets need READ on
their topics, fetched ones DESCRIBE (TOPIC_AUTHORIZATION_FAILED; offsets of topics the
caller may not describe are left out of an all-topics fetch). ListGroups lists every group
to those who may DESCRIBE the cluster, else the groups they may describe. FindCoordinator
needs DESCRIBE on the group or transactional id it names.
"""

from __future__ import annotations

import uuid

from odradek.coordinator.classic_group import ClassicGroup, GroupState, JoinResult, SyncResult
from odradek.coordinator.consumer_group import ConsumerGroup
from odradek.coordinator.consumer_protocol import ConsumerHeartbeatResult
from odradek.coordinator.coordinator import GroupCoordinator
from odradek.coordinator.offset_metadata import OffsetCommit
from odradek.coordinator.records import OFFSETS_TOPIC
from odradek.coordinator.runtime import CoordinatorWriteError
from odradek.coordinator.service import GroupCoordinatorService
from odradek.coordinator.transaction.coordinator import TransactionCoordinator
from odradek.coordinator.transaction.records import TRANSACTION_STATE_TOPIC
from odradek.coordinator.transaction.service import TransactionCoordinatorService
from odradek.protocol import schemas
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.server.authorization import (
    AUTHORIZED_OPERATIONS_OMITTED,
    CLUSTER_NAME,
    AclOperation,
    ResourceType,
    authorize,
    authorized_operations,
    filter_authorized,
    group_refusal,
)
from odradek.server.context import RequestContext

#: JoinGroup v4 made the member id required (KIP-394).
REQUIRE_MEMBER_ID_SINCE = 4
#: ConsumerGroupHeartbeat v1 made clients generate their member id (KIP-1082).
CLIENT_MEMBER_ID_SINCE = 1
#: DescribeGroups v6 answers GROUP_ID_NOT_FOUND for unknown and non-classic groups (KIP-1043).
DESCRIBE_GROUPS_NOT_FOUND_SINCE = 6
#: ConsumerGroupDescribe v1 member types (KIP-1099): the protocol the member speaks.
MEMBER_TYPE_CLASSIC, MEMBER_TYPE_CONSUMER = 0, 1
#: OffsetCommit and OffsetFetch v10 name topics by id, not by name.
TOPIC_IDS_SINCE = 10
#: FindCoordinator key types.
KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION = 0, 1


def _service(ctx: RequestContext) -> GroupCoordinatorService:
    return ctx.broker.components["group_coordinator"]


def _module(ctx: RequestContext, api_key: int):
    return schemas.response_module(api_key, ctx.api_version)


def _cls(ctx: RequestContext, api_key: int):
    return schemas.response_schema(api_key, ctx.api_version)


# -- FindCoordinator --------------------------------------------------------------------


async def handle_find_coordinator(ctx: RequestContext, request):
    """The leader of the key's partition of __consumer_offsets (key type 0, a group) or of
    __transaction_state (key type 1, a transactional id), created first if missing."""
    metadata = ctx.broker.metadata
    listener = ctx.connection.listener_name
    key_type = getattr(request, "key_type", KEY_TYPE_GROUP)
    core: GroupCoordinator | TransactionCoordinator
    if key_type == KEY_TYPE_TRANSACTION:
        txn: TransactionCoordinatorService = ctx.broker.components["transaction_coordinator"]
        topic = metadata.topic(TRANSACTION_STATE_TOPIC)
        if topic is None:
            # Created now if enough brokers are alive; this request is answered as unavailable.
            txn.ensure_transaction_state_topic()
        core = txn.core
    else:
        svc = _service(ctx)
        topic = metadata.topic(OFFSETS_TOPIC)
        if topic is None:
            svc.ensure_offsets_topic()
        core = svc.core
    cls = _cls(ctx, ApiKey.FIND_COORDINATOR)
    not_available = (ErrorCode.coordinator_not_available, "The coordinator is not available.")
    nobody = (-1, "", -1)

    def answer(key_type: int, key: str) -> tuple[tuple[int, str | None], tuple[int, str, int]]:
        """(error, message), (node id, host, port) of the leader of ``key``'s partition."""
        if key_type not in (KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION):
            return (ErrorCode.invalid_request, f"Unknown coordinator type {key_type}"), nobody
        if key_type == KEY_TYPE_GROUP and not authorize(
            ctx, AclOperation.DESCRIBE, ResourceType.GROUP, key
        ):
            return (ErrorCode.group_authorization_failed, "Group authorization failed."), nobody
        if key_type == KEY_TYPE_TRANSACTION and not authorize(
            ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key
        ):
            return (
                ErrorCode.transactional_id_authorization_failed,
                "Transactional Id authorization failed.",
            ), nobody
        if topic is None:
            return not_available, nobody
        leader = topic.partitions[core.partition_for(key)].leader
        broker = next((b for b in metadata.brokers() if b.node_id == leader), None)
        endpoint = broker.endpoint(listener) if broker is not None else None
        if endpoint is None:
            # No leader, a leader not registered (down), or not reachable on this listener.
            return not_available, nobody
        return (ErrorCode.none, None), (leader, *endpoint)

    if ctx.api_version >= 4:
        module = _module(ctx, ApiKey.FIND_COORDINATOR)
        coordinators = []
        for key in request.coordinator_keys:
            (error, message), (node_id, host, port) = answer(key_type, key)
            coordinators.append(
                schemas.build(
                    module.Coordinator,
                    key=key,
                    node_id=node_id,
                    host=host,
                    port=port,
                    error_code=error,
                    error_message=message,
                )
            )
        return schemas.build(cls, throttle_time=0, coordinators=tuple(coordinators))
    (error, message), (node_id, host, port) = answer(key_type, request.key)
    return schemas.build(
        cls,
        throttle_time=0,
        error_code=error,
        error_message=message,
        node_id=node_id,
        host=host,
        port=port,
    )


# -- JoinGroup / SyncGroup / Heartbeat / LeaveGroup ---------------------------------------


async def handle_join_group(ctx: RequestContext, request):
    if (refused := group_refusal(ctx, request, AclOperation.READ)) is not None:
        return refused
    svc = _service(ctx)
    session_timeout = int(request.session_timeout.total_seconds() * 1000)
    rebalance = getattr(request, "rebalance_timeout", None)
    rebalance_timeout = (
        int(rebalance.total_seconds() * 1000) if rebalance is not None else session_timeout
    )
    client_id = ctx.header.client_id or ""
    client_host = "/" + ctx.connection.peer_host
    topics = _topic_metadata(ctx)

    def start(callback, now_ms):
        svc.core.join_group(
            request.group_id,
            request.member_id,
            getattr(request, "group_instance_id", None),
            client_id,
            client_host,
            request.protocol_type,
            [(p.name, p.metadata) for p in request.protocols],
            session_timeout,
            rebalance_timeout,
            ctx.api_version >= REQUIRE_MEMBER_ID_SINCE,
            callback,
            now_ms,
            topics=topics,
        )

    try:
        result: JoinResult = await svc.wait(start, [request.group_id])
    except CoordinatorWriteError as e:
        result = JoinResult(e.error_code, member_id=request.member_id)
    module = _module(ctx, ApiKey.JOIN_GROUP)
    members = tuple(
        schemas.build(
            module.JoinGroupResponseMember, member_id=m, group_instance_id=i, metadata=meta
        )
        for m, i, meta in result.members
    )
    return schemas.build(
        _cls(ctx, ApiKey.JOIN_GROUP),
        throttle_time=0,
        error_code=result.error,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name
        if ctx.api_version >= 7
        else (result.protocol_name or ""),
        leader=result.leader,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=members,
    )


async def handle_sync_group(ctx: RequestContext, request):
    if (refused := group_refusal(ctx, request, AclOperation.READ)) is not None:
        return refused
    svc = _service(ctx)
    assignments = {a.member_id: a.assignment for a in request.assignments}
    topics = _topic_metadata(ctx)

    def start(callback, now_ms):
        svc.core.sync_group(
            request.group_id,
            request.member_id,
            getattr(request, "group_instance_id", None),
            request.generation_id,
            getattr(request, "protocol_type", None),
            getattr(request, "protocol_name", None),
            assignments,
            callback,
            now_ms,
            topics=topics,
        )

    try:
        result: SyncResult = await svc.wait(start, [request.group_id])
    except CoordinatorWriteError as e:
        result = SyncResult(e.error_code)
    return schemas.build(
        _cls(ctx, ApiKey.SYNC_GROUP),
        throttle_time=0,
        error_code=result.error,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )


async def handle_heartbeat(ctx: RequestContext, request):
    if (refused := group_refusal(ctx, request, AclOperation.READ)) is not None:
        return refused
    svc = _service(ctx)
    try:
        error = svc.call(
            svc.core.heartbeat,
            [request.group_id],
            request.group_id,
            request.member_id,
            getattr(request, "group_instance_id", None),
            request.generation_id,
        )
    except CoordinatorWriteError as e:
        error = e.error_code
    return schemas.build(_cls(ctx, ApiKey.HEARTBEAT), throttle_time=0, error_code=error)


async def handle_leave_group(ctx: RequestContext, request):
    if (refused := group_refusal(ctx, request, AclOperation.READ)) is not None:
        return refused
    svc = _service(ctx)
    cls = _cls(ctx, ApiKey.LEAVE_GROUP)
    if ctx.api_version >= 3:
        leaving = [(m.member_id, m.group_instance_id) for m in request.members]
    else:
        leaving = [(request.member_id, None)]
    try:
        error, errors = svc.call(
            svc.core.leave_group, [request.group_id], request.group_id, leaving
        )
    except CoordinatorWriteError as e:
        error, errors = e.error_code, [e.error_code] * len(leaving)
    if ctx.api_version < 3:
        return schemas.build(cls, throttle_time=0, error_code=error or errors[0])
    module = _module(ctx, ApiKey.LEAVE_GROUP)
    members = tuple(
        schemas.build(module.MemberResponse, member_id=m, group_instance_id=i, error_code=e)
        for (m, i), e in zip(leaving, errors)
    )
    return schemas.build(
        cls, throttle_time=0, error_code=error, members=members if not error else ()
    )


# -- Offsets ------------------------------------------------------------------------------


def _topic_ids(ctx: RequestContext) -> dict[str, uuid.UUID]:
    return {name: t.topic_id for name, t in ctx.broker.metadata.topics().items()}


async def handle_offset_commit(ctx: RequestContext, request):
    """Commit the offsets of partitions that exist; the others are UNKNOWN_TOPIC_OR_PARTITION.

    As Kafka's KafkaApis, partitions are checked against the metadata before the
    commit reaches the coordinator (which then sees only existing partitions and is
    not called at all when none is left), so a commit to a topic that does not
    exist fails instead of storing offsets nobody can consume.
    """
    if (refused := group_refusal(ctx, request, AclOperation.READ)) is not None:
        return refused
    svc = _service(ctx)
    metadata = ctx.broker.metadata
    # v10 names topics by id only; ids we do not know get UNKNOWN_TOPIC_ID.
    by_id = ctx.api_version >= TOPIC_IDS_SINCE
    names = {topic_id: name for name, topic_id in _topic_ids(ctx).items()} if by_id else {}
    resolved = [names.get(t.topic_id) if by_id else t.name for t in request.topics]
    readable = filter_authorized(
        ctx, AclOperation.READ, ResourceType.TOPIC, (n for n in resolved if n is not None)
    )

    def exists(name: str, partition: int) -> bool:
        topic = metadata.topic(name)
        return topic is not None and 0 <= partition < len(topic.partitions)

    commits = [
        OffsetCommit(
            name,
            p.partition_index,
            p.committed_offset,
            getattr(p, "committed_leader_epoch", -1),
            p.committed_metadata,
        )
        for t, name in zip(request.topics, resolved)
        if name is not None and name in readable
        for p in t.partitions
        if exists(name, p.partition_index)
    ]
    generation = getattr(
        request, "generation_id_or_member_epoch", getattr(request, "generation_id", -1)
    )
    errors: list[int] = []
    if commits:
        try:
            _error, errors = svc.call(
                svc.core.commit_offsets,
                [request.group_id],
                request.group_id,
                request.member_id,
                getattr(request, "group_instance_id", None),
                generation,
                commits,
            )
            replicated = await svc.await_replicated(ctx.broker.config["offsets.commit.timeout.ms"])
            if replicated != ErrorCode.none:
                errors = [replicated] * len(commits)
        except CoordinatorWriteError as e:
            errors = [e.error_code] * len(commits)
    module = _module(ctx, ApiKey.OFFSET_COMMIT)
    it = iter(errors)

    def error_of(name: str | None, partition: int) -> int:
        if name is None:
            return ErrorCode.unknown_topic_id
        if name not in readable:
            return ErrorCode.topic_authorization_failed
        return next(it) if exists(name, partition) else ErrorCode.unknown_topic_or_partition

    topics = tuple(
        schemas.build(
            module.OffsetCommitResponseTopic,
            name=name,
            topic_id=getattr(t, "topic_id", None),
            partitions=tuple(
                schemas.build(
                    module.OffsetCommitResponsePartition,
                    partition_index=p.partition_index,
                    error_code=error_of(name, p.partition_index),
                )
                for p in t.partitions
            ),
        )
        for t, name in zip(request.topics, resolved)
    )
    return schemas.build(_cls(ctx, ApiKey.OFFSET_COMMIT), throttle_time=0, topics=topics)


def _fetched_topics(
    ctx: RequestContext, group_id: str, topics, topic_cls, partition_cls, require_stable: bool
) -> tuple:
    """One group's OffsetFetch topics: by name, or (v10) by id, unknown ids answered UNKNOWN_TOPIC_ID.
    With RequireStable (v7+, KIP-447) a partition whose offset an open transaction is
    committing is answered UNSTABLE_OFFSET_COMMIT, so the consumer retries rather than
    start from an offset the transaction is about to move."""
    by_id = ctx.api_version >= TOPIC_IDS_SINCE
    ids = _topic_ids(ctx) if by_id else {}
    names = {topic_id: name for name, topic_id in ids.items()}
    unknown: list = []
    wanted: list[tuple[str, int]] | None = None
    if topics is not None:
        wanted = []
        for t in topics:
            name = names.get(t.topic_id) if by_id else t.name
            if name is None:
                unknown.append(
                    schemas.build(
                        topic_cls,
                        topic_id=t.topic_id,
                        partitions=tuple(
                            schemas.build(
                                partition_cls,
                                partition_index=p,
                                committed_offset=-1,
                                committed_leader_epoch=-1,
                                metadata="",
                                error_code=ErrorCode.unknown_topic_id,
                            )
                            for p in t.partition_indexes
                        ),
                    )
                )
            else:
                wanted.extend((name, p) for p in t.partition_indexes)
    core = _service(ctx).core
    fetched = core.fetch_offsets(group_id, wanted)
    unstable = core.pending_transactional_offsets(group_id) if require_stable else set()
    describable = filter_authorized(
        ctx,
        AclOperation.DESCRIBE,
        ResourceType.TOPIC,
        {topic for topic, _ in fetched},
        log_denied=wanted is not None,
    )
    by_topic: dict[str, list] = {}
    for (topic, partition), om in fetched.items():
        if topic not in describable:
            if wanted is None:  # every committed offset asked for: left out, not disclosed
                continue
            om, error = None, ErrorCode.topic_authorization_failed
        elif (topic, partition) in unstable:
            om, error = None, ErrorCode.unstable_offset_commit
        else:
            error = ErrorCode.none
        by_topic.setdefault(topic, []).append(
            schemas.build(
                partition_cls,
                partition_index=partition,
                committed_offset=om.offset if om else -1,
                committed_leader_epoch=om.leader_epoch if om else -1,
                metadata=om.metadata if om else "",
                error_code=error,
            )
        )
    # By id, a topic that no longer exists has no id to name it by: it is left out.
    return tuple(
        schemas.build(topic_cls, name=name, topic_id=ids.get(name), partitions=tuple(parts))
        for name, parts in by_topic.items()
        if not by_id or name in ids
    ) + tuple(unknown)


async def handle_offset_fetch(ctx: RequestContext, request):
    svc = _service(ctx)
    module = _module(ctx, ApiKey.OFFSET_FETCH)
    cls = _cls(ctx, ApiKey.OFFSET_FETCH)
    if ctx.api_version >= 8:
        groups = []
        for g in request.groups:
            error: int
            if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id):
                error = ErrorCode.group_authorization_failed
            elif svc.coordinates(g.group_id):
                error = svc.core.check_offset_fetch(
                    g.group_id, getattr(g, "member_id", None), getattr(g, "member_epoch", -1)
                )
            else:
                error = ErrorCode.not_coordinator
            topics = (
                ()
                if error
                else _fetched_topics(
                    ctx,
                    g.group_id,
                    g.topics,
                    module.OffsetFetchResponseTopics,
                    module.OffsetFetchResponsePartitions,
                    request.require_stable,
                )
            )
            groups.append(
                schemas.build(
                    module.OffsetFetchResponseGroup,
                    group_id=g.group_id,
                    error_code=error,
                    topics=topics,
                )
            )
        return schemas.build(cls, throttle_time=0, groups=tuple(groups))
    if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, request.group_id):
        return _offset_fetch_error(ctx, request, module, ErrorCode.group_authorization_failed)
    if not svc.coordinates(request.group_id):
        return _offset_fetch_error(ctx, request, module, ErrorCode.not_coordinator)
    topics = _fetched_topics(
        ctx,
        request.group_id,
        request.topics,
        module.OffsetFetchResponseTopic,
        module.OffsetFetchResponsePartition,
        getattr(request, "require_stable", False),
    )
    return schemas.build(cls, throttle_time=0, topics=topics, error_code=ErrorCode.none)


def _offset_fetch_error(ctx: RequestContext, request, module, error: ErrorCode):
    """A v0-v7 OffsetFetch failed for its group: v2+ say so once, older versions (no
    top-level error) on every partition asked for, as Kafka's getErrorResponse."""
    topics: tuple = ()
    if ctx.api_version < 2:
        topics = tuple(
            schemas.build(
                module.OffsetFetchResponseTopic,
                name=t.name,
                partitions=tuple(
                    schemas.build(
                        module.OffsetFetchResponsePartition,
                        partition_index=p,
                        committed_offset=-1,
                        committed_leader_epoch=-1,
                        metadata="",
                        error_code=error,
                    )
                    for p in t.partition_indexes
                ),
            )
            for t in request.topics or ()
        )
    return schemas.build(
        _cls(ctx, ApiKey.OFFSET_FETCH), throttle_time=0, topics=topics, error_code=error
    )


async def handle_offset_delete(ctx: RequestContext, request):
    if (refused := group_refusal(ctx, request, AclOperation.DELETE)) is not None:
        return refused
    svc = _service(ctx)
    readable = filter_authorized(
        ctx, AclOperation.READ, ResourceType.TOPIC, (t.name for t in request.topics)
    )
    wanted = [
        (t.name, p.partition_index)
        for t in request.topics
        if t.name in readable
        for p in t.partitions
    ]
    try:
        error, errors = svc.call(
            svc.core.delete_offsets, [request.group_id], request.group_id, wanted
        )
    except CoordinatorWriteError as e:
        error, errors = e.error_code, []
    module = _module(ctx, ApiKey.OFFSET_DELETE)
    it = iter(errors)
    topics = (
        ()
        if error
        else tuple(
            schemas.build(
                module.OffsetDeleteResponseTopic,
                name=t.name,
                partitions=tuple(
                    schemas.build(
                        module.OffsetDeleteResponsePartition,
                        partition_index=p.partition_index,
                        error_code=next(it)
                        if t.name in readable
                        else ErrorCode.topic_authorization_failed,
                    )
                    for p in t.partitions
                ),
            )
            for t in request.topics
        )
    )
    return schemas.build(
        _cls(ctx, ApiKey.OFFSET_DELETE), throttle_time=0, error_code=error, topics=topics
    )


# -- Admin ------------------------------------------------------------------------------------


async def handle_describe_groups(ctx: RequestContext, request):
    svc = _service(ctx)
    core = svc.core
    module = _module(ctx, ApiKey.DESCRIBE_GROUPS)
    include_ops = getattr(request, "include_authorized_operations", False)

    def group_ops(group_id: str) -> int:
        # As Kafka: reported for groups described without an error, when asked for.
        return authorized_operations(ctx, ResourceType.GROUP, group_id, include_ops)

    described = []
    for group_id in request.groups:
        refused = not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id)
        if refused or not svc.coordinates(group_id):
            described.append(
                schemas.build(
                    module.DescribedGroup,
                    error_code=ErrorCode.group_authorization_failed
                    if refused
                    else ErrorCode.not_coordinator,
                    error_message=None,
                    group_id=group_id,
                    group_state="",
                    protocol_type="",
                    protocol_data="",
                    members=(),
                    authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
                )
            )
            continue
        group = core.committed_group(group_id)
        if not isinstance(group, ClassicGroup) or group.state is GroupState.DEAD:
            # KIP-1043: v6+ says why (unknown, or not a classic group); older versions answer Dead.
            missing = ctx.api_version >= DESCRIBE_GROUPS_NOT_FOUND_SINCE
            message = (
                f"Group {group_id} is not a classic group."
                if isinstance(group, ConsumerGroup)
                else f"Group {group_id} not found."
            )
            described.append(
                schemas.build(
                    module.DescribedGroup,
                    error_code=ErrorCode.group_id_not_found if missing else ErrorCode.none,
                    error_message=message if missing else None,
                    group_id=group_id,
                    group_state=GroupState.DEAD.value,
                    protocol_type="",
                    protocol_data="",
                    members=(),
                    authorized_operations=AUTHORIZED_OPERATIONS_OMITTED
                    if missing
                    else group_ops(group_id),
                )
            )
            continue
        stable = group.state is GroupState.STABLE
        members = tuple(
            schemas.build(
                module.DescribedGroupMember,
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=m.metadata(group.protocol_name)
                if stable and group.protocol_name
                else b"",
                member_assignment=m.assignment if stable else b"",
            )
            for m in group.members.values()
        )
        described.append(
            schemas.build(
                module.DescribedGroup,
                error_code=ErrorCode.none,
                error_message=None,
                group_id=group_id,
                group_state=group.state.value,
                protocol_type=group.protocol_type or "",
                protocol_data=(group.protocol_name or "") if stable else "",
                members=members,
                authorized_operations=group_ops(group_id),
            )
        )
    return schemas.build(
        _cls(ctx, ApiKey.DESCRIBE_GROUPS), throttle_time=0, groups=tuple(described)
    )


async def handle_list_groups(ctx: RequestContext, request):
    core = _service(ctx).core
    module = _module(ctx, ApiKey.LIST_GROUPS)
    every = authorize(
        ctx, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=False
    )
    groups = tuple(
        schemas.build(
            module.ListedGroup,
            group_id=gid,
            protocol_type=ptype,
            group_state=state,
            group_type=gtype,
        )
        for gid, ptype, state, gtype in core.list_groups(
            getattr(request, "states_filter", ()), getattr(request, "types_filter", ())
        )
        if every or authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, gid, log_denied=False)
    )
    return schemas.build(
        _cls(ctx, ApiKey.LIST_GROUPS), throttle_time=0, error_code=ErrorCode.none, groups=groups
    )


async def handle_delete_groups(ctx: RequestContext, request):
    svc = _service(ctx)
    results: dict[str, int] = {}
    for group_id in request.groups_names:
        if not authorize(ctx, AclOperation.DELETE, ResourceType.GROUP, group_id):
            results[group_id] = ErrorCode.group_authorization_failed
            continue
        # One call per group: each is written to its own partition and fails or succeeds alone.
        try:
            results.update(svc.call(svc.core.delete_groups, [group_id], [group_id]))
        except CoordinatorWriteError as e:
            results[group_id] = e.error_code
    module = _module(ctx, ApiKey.DELETE_GROUPS)
    return schemas.build(
        _cls(ctx, ApiKey.DELETE_GROUPS),
        throttle_time=0,
        results=tuple(
            schemas.build(module.DeletableGroupResult, group_id=gid, error_code=err)
            for gid, err in results.items()
        ),
    )


# -- Consumer protocol (KIP-848) --------------------------------------------------------------


def _topic_metadata(ctx: RequestContext) -> dict[str, tuple]:
    return {
        name: (t.topic_id, len(t.partitions))
        for name, t in ctx.broker.metadata.topics().items()
        if not t.internal
    }


async def handle_consumer_group_heartbeat(ctx: RequestContext, request):
    if (refused := group_refusal(ctx, request, AclOperation.READ)) is not None:
        return refused
    svc = _service(ctx)
    owned = None
    if request.topic_partitions is not None:
        owned = {
            tp.topic_id: set(tp.partitions) for tp in request.topic_partitions if tp.partitions
        }
    try:
        result = svc.call(
            svc.core.consumer_group_heartbeat,
            [request.group_id],
            request.group_id,
            request.member_id,
            request.member_epoch,
            request.instance_id,
            request.rack_id,
            int(request.rebalance_timeout.total_seconds() * 1000),
            None
            if request.subscribed_topic_names is None
            else list(request.subscribed_topic_names),
            request.server_assignor,
            owned,
            ctx.header.client_id or "",
            "/" + ctx.connection.peer_host,
            _topic_metadata(ctx),
            subscribed_topic_regex=getattr(request, "subscribed_topic_regex", None),
            member_id_required=ctx.api_version >= CLIENT_MEMBER_ID_SINCE,
        )
    except CoordinatorWriteError as e:
        result = ConsumerHeartbeatResult(
            e.error_code,
            request.member_id,
            request.member_epoch,
            svc.config.group_consumer_heartbeat_interval_ms,
        )
    module = _module(ctx, ApiKey.CONSUMER_GROUP_HEARTBEAT)
    assignment = None
    if result.assignment is not None and result.error == ErrorCode.none:
        assignment = schemas.build(
            module.Assignment,
            topic_partitions=tuple(
                schemas.build(module.TopicPartitions, topic_id=t, partitions=tuple(sorted(ps)))
                for t, ps in result.assignment.items()
            ),
        )
    return schemas.build(
        _cls(ctx, ApiKey.CONSUMER_GROUP_HEARTBEAT),
        throttle_time=0,
        error_code=result.error,
        error_message=result.error_message,
        member_id=result.member_id or None,
        member_epoch=result.member_epoch,
        heartbeat_interval=result.heartbeat_interval_ms,
        assignment=assignment,
    )


async def handle_consumer_group_describe(ctx: RequestContext, request):
    svc = _service(ctx)
    core = svc.core
    module = _module(ctx, ApiKey.CONSUMER_GROUP_DESCRIBE)
    names = {t.topic_id: name for name, t in ctx.broker.metadata.topics().items()}

    def assignment(a) -> object:
        return schemas.build(
            module.Assignment,
            topic_partitions=tuple(
                schemas.build(
                    module.TopicPartitions,
                    topic_id=t,
                    topic_name=names.get(t, ""),
                    partitions=tuple(sorted(ps)),
                )
                for t, ps in a.items()
            ),
        )

    def undescribed(group_id: str, error: ErrorCode, message: str | None, state: str) -> object:
        return schemas.build(
            module.DescribedGroup,
            error_code=error,
            error_message=message,
            group_id=group_id,
            group_state=state,
            group_epoch=-1,
            assignment_epoch=-1,
            assignor_name="",
            members=(),
            authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
        )

    described = []
    for group_id in request.group_ids:
        if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            described.append(undescribed(group_id, ErrorCode.group_authorization_failed, None, ""))
            continue
        group = core.committed_group(group_id)
        if not svc.coordinates(group_id):
            described.append(undescribed(group_id, ErrorCode.not_coordinator, None, ""))
            continue
        if not isinstance(group, ConsumerGroup):
            message = f"Group {group_id} is not a consumer group."
            described.append(undescribed(group_id, ErrorCode.group_id_not_found, message, "Dead"))
            continue
        members = tuple(
            schemas.build(
                module.Member,
                member_id=m.member_id,
                instance_id=m.instance_id,
                rack_id=m.rack_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=tuple(sorted(m.subscribed_topics())),
                subscribed_topic_regex=m.subscribed_topic_regex,
                assignment=assignment(m.to_send),
                target_assignment=assignment(group.target.get(m.member_id, {})),
                member_type=MEMBER_TYPE_CONSUMER if m.classic is None else MEMBER_TYPE_CLASSIC,
            )
            for m in group.members.values()
        )
        described.append(
            schemas.build(
                module.DescribedGroup,
                error_code=ErrorCode.none,
                error_message=None,
                group_id=group_id,
                group_state=group.state_name,
                group_epoch=group.group_epoch,
                assignment_epoch=group.assignment_epoch,
                assignor_name=group.preferred_assignor(),
                members=members,
                authorized_operations=authorized_operations(
                    ctx, ResourceType.GROUP, group_id, request.include_authorized_operations
                ),
            )
        )
    return schemas.build(
        _cls(ctx, ApiKey.CONSUMER_GROUP_DESCRIBE), throttle_time=0, groups=tuple(described)
    )
