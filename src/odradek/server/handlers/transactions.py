"""Transaction APIs on the coordinator side: InitProducerId (transactional), AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn, DescribeTransactions, ListTransactions, and TxnOffsetCommit (which,
as in Kafka, goes to the group's coordinator and leaves the offsets pending until the
transaction's marker reaches __consumer_offsets).

Each asks the transaction coordinator (``broker.components["transaction_coordinator"]``)
and answers once its __transaction_state record is replicated, as Kafka answers after the
append's callback. A transactional id whose partition is not loaded here gets
NOT_COORDINATOR (a partition is loaded in one go on the event loop, so
COORDINATOR_LOAD_IN_PROGRESS never has to be answered). PRODUCER_FENCED is answered as
INVALID_PRODUCER_EPOCH to versions that predate it (KIP-588), as Kafka's KafkaApis does:
InitProducerId before v4, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn before v2.

Transactions version 2 (KIP-890) is chosen per request, as Kafka chooses it: EndTxn v5
bumps the epoch and answers the next producer id and epoch, and AddPartitionsToTxn v5 from
a partition leader without VerifyOnly begins a transaction of version 2 (the leader adds
the partition its client wrote to); earlier versions keep the protocol before it.

Authorization, as KafkaApis: writing to a transaction (AddPartitionsToTxn before v4,
AddOffsetsToTxn, EndTxn, TxnOffsetCommit) needs WRITE on its transactional id, else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED; its topics need WRITE (AddPartitionsToTxn; internal
topics never may) or READ (TxnOffsetCommit), else TOPIC_AUTHORIZATION_FAILED; its group READ,
else GROUP_AUTHORIZATION_FAILED. AddPartitionsToTxn v4+ is the brokers' own (CLUSTER_ACTION).
DescribeTransactions needs DESCRIBE on each id and shows only topics the caller may
describe; ListTransactions lists only the ids the caller may describe.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

from odradek.coordinator.offset_metadata import OffsetCommit
from odradek.coordinator.records import OFFSETS_TOPIC
from odradek.coordinator.runtime import CoordinatorWriteError
from odradek.coordinator.service import GroupCoordinatorService
from odradek.coordinator.transaction.coordinator import EPOCH_BUMP_VERSION, InitProducerIdResult
from odradek.coordinator.transaction.metadata import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from odradek.coordinator.transaction.service import TransactionCoordinatorService
from odradek.metadata.topic_names import INTERNAL_TOPICS
from odradek.protocol import schemas
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records import NO_SEQUENCE
from odradek.server.add_partitions_to_txn_manager import SupportedOperation, verify_partitions
from odradek.server.authorization import (
    AclOperation,
    ResourceType,
    authorize,
    authorize_cluster,
    denied,
    filter_authorized,
    group_refusal,
    refusal,
)
from odradek.server.context import RequestContext
from odradek.storage import TopicPartition
from odradek.storage.producer_state import NO_GUARD, VerificationGuard

#: The first versions that know PRODUCER_FENCED.
PRODUCER_FENCED_SINCE: dict[int, int] = {
    ApiKey.INIT_PRODUCER_ID: 4,
    ApiKey.ADD_PARTITIONS_TO_TXN: 2,
    ApiKey.ADD_OFFSETS_TO_TXN: 2,
    ApiKey.END_TXN: 2,
}
#: AddPartitionsToTxn v4 batches transactions and adds the broker's VerifyOnly form (KIP-890).
BATCHED_SINCE = 4
#: AddPartitionsToTxn v5 knows TRANSACTION_ABORTABLE; v4 is told INVALID_TXN_STATE instead.
ABORTABLE_SINCE = 5


def service(ctx: RequestContext) -> TransactionCoordinatorService:
    return ctx.broker.components["transaction_coordinator"]


def _for_version(ctx: RequestContext, api_key: int, error: int) -> ErrorCode:
    if error == ErrorCode.producer_fenced and ctx.api_version < PRODUCER_FENCED_SINCE[api_key]:
        return ErrorCode.invalid_producer_epoch
    return ErrorCode(error)


async def init_transactional_producer_id(ctx: RequestContext, request: Any) -> InitProducerIdResult:
    """InitProducerId with a transactional id (producer_ids.py answers the rest)."""
    svc = service(ctx)
    result = await svc.write(
        svc.core.init_producer_id,
        request.transactional_id,
        request.transaction_timeout // datetime.timedelta(milliseconds=1),
        getattr(request, "producer_id", -1),
        getattr(request, "producer_epoch", -1),
        enable_two_phase=getattr(request, "enable2_pc", False),
        keep_prepared=getattr(request, "keep_prepared_txn", False),
    )
    if isinstance(result, InitProducerIdResult):
        return dataclasses.replace(
            result, error=_for_version(ctx, ApiKey.INIT_PRODUCER_ID, result.error)
        )
    return InitProducerIdResult(ErrorCode(result))


async def handle_add_partitions_to_txn(ctx: RequestContext, request: Any) -> Any:
    svc = service(ctx)
    module = schemas.response_module(ApiKey.ADD_PARTITIONS_TO_TXN, ctx.api_version)

    if ctx.api_version >= BATCHED_SINCE and not authorize_cluster(ctx, AclOperation.CLUSTER_ACTION):
        return denied(ctx, request, ErrorCode.cluster_authorization_failed)

    async def one(tid: str, pid: int, epoch: int, verify_only: bool, topics: Any) -> Any:
        tps = [TopicPartition(t.name, p) for t in topics for p in t.partitions]
        # A leader adding a partition for its client (not VerifyOnly, v5) does it for a client
        # of transactions version 2 (KIP-890): the produce added the partition implicitly.
        added_version = EPOCH_BUMP_VERSION if ctx.api_version >= ABORTABLE_SINCE else 0
        errors: dict[TopicPartition, int] | None
        if ctx.api_version < BATCHED_SINCE and not authorize(
            ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, tid
        ):
            errors = dict.fromkeys(tps, ErrorCode.transactional_id_authorization_failed)
        elif verify_only:
            errors = {
                tp: ErrorCode.invalid_txn_state
                if code == ErrorCode.transaction_abortable and ctx.api_version < ABORTABLE_SINCE
                else code
                for tp, code in verify_partitions(svc, tid, pid, epoch, tps).items()
            }
        else:
            errors = _add_errors(ctx, tps)
            if errors is None:
                code = await svc.write(
                    svc.core.add_partitions,
                    tid,
                    pid,
                    epoch,
                    tps,
                    client_transaction_version=added_version,
                )
                code = _for_version(ctx, ApiKey.ADD_PARTITIONS_TO_TXN, code)
                errors = dict.fromkeys(tps, code)
        by_topic: dict[str, list[Any]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(
                schemas.build(
                    module.AddPartitionsToTxnPartitionResult,
                    partition_index=tp.partition,
                    partition_error_code=errors[tp],
                )
            )
        return tuple(
            schemas.build(
                module.AddPartitionsToTxnTopicResult, name=name, results_by_partition=tuple(rs)
            )
            for name, rs in by_topic.items()
        )

    if ctx.api_version < BATCHED_SINCE:
        return schemas.build(
            module.AddPartitionsToTxnResponse,
            throttle_time=0,
            results_by_topic_v3_and_below=await one(
                request.v3_and_below_transactional_id,
                request.v3_and_below_producer_id,
                request.v3_and_below_producer_epoch,
                False,
                request.v3_and_below_topics,
            ),
        )
    results = []
    for txn in request.transactions:
        results.append(
            schemas.build(
                module.AddPartitionsToTxnResult,
                transactional_id=txn.transactional_id,
                topic_results=await one(
                    txn.transactional_id,
                    txn.producer_id,
                    txn.producer_epoch,
                    txn.verify_only,
                    txn.topics,
                ),
            )
        )
    return schemas.build(
        module.AddPartitionsToTxnResponse,
        throttle_time=0,
        error_code=ErrorCode.none,
        results_by_transaction=tuple(results),
    )


def _add_errors(ctx: RequestContext, tps: list[TopicPartition]) -> dict[TopicPartition, int] | None:
    """Kafka's checks before a client's partitions reach the coordinator: a topic the caller
    may not WRITE gets TOPIC_AUTHORIZATION_FAILED, an unknown partition
    UNKNOWN_TOPIC_OR_PARTITION, and the others OPERATION_NOT_ATTEMPTED; None if all pass."""
    metadata = ctx.broker.metadata
    writable = filter_authorized(
        ctx,
        AclOperation.WRITE,
        ResourceType.TOPIC,
        {tp.topic for tp in tps if tp.topic not in INTERNAL_TOPICS},
    )

    def error(tp: TopicPartition) -> int | None:
        if tp.topic not in writable:
            return ErrorCode.topic_authorization_failed
        topic = metadata.topic(tp.topic)
        if topic is None or not 0 <= tp.partition < len(topic.partitions):
            return ErrorCode.unknown_topic_or_partition
        return None

    errors = {tp: error(tp) for tp in tps}
    if all(e is None for e in errors.values()):
        return None
    return {tp: ErrorCode.operation_not_attempted if e is None else e for tp, e in errors.items()}


async def handle_add_offsets_to_txn(ctx: RequestContext, request: Any) -> Any:
    if (refused := _transaction_refusal(ctx, request)) is not None:
        return refused
    if (refused := group_refusal(ctx, request, AclOperation.READ)) is not None:
        return refused
    svc = service(ctx)
    code = await svc.write(
        svc.core.add_offsets,
        request.transactional_id,
        request.producer_id,
        request.producer_epoch,
        request.group_id,
    )
    return schemas.build(
        schemas.response_schema(ApiKey.ADD_OFFSETS_TO_TXN, ctx.api_version),
        throttle_time=0,
        error_code=_for_version(ctx, ApiKey.ADD_OFFSETS_TO_TXN, code),
    )


def _transaction_refusal(ctx: RequestContext, request: Any) -> Any | None:
    """The request's TRANSACTIONAL_ID_AUTHORIZATION_FAILED response unless its transactional
    id may be written, else None."""
    return refusal(
        ctx,
        request,
        AclOperation.WRITE,
        ResourceType.TRANSACTIONAL_ID,
        request.transactional_id,
        ErrorCode.transactional_id_authorization_failed,
    )


async def handle_end_txn(ctx: RequestContext, request: Any) -> Any:
    if (refused := _transaction_refusal(ctx, request)) is not None:
        return refused
    svc = service(ctx)
    tid = request.transactional_id
    code = await svc.write(
        svc.core.end_txn,
        tid,
        request.producer_id,
        request.producer_epoch,
        request.committed,
        client_transaction_version=EPOCH_BUMP_VERSION if ctx.api_version >= 5 else 0,
    )
    # v5 (transactions version 2) answers the producer id and epoch of the next transaction,
    # -1 with an error; earlier versions have no such fields.
    producer_id, producer_epoch = (
        svc.core.end_txn_producer(tid)
        if code == ErrorCode.none and svc.coordinates(tid)
        else (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
    )
    return schemas.build(
        schemas.response_schema(ApiKey.END_TXN, ctx.api_version),
        throttle_time=0,
        error_code=_for_version(ctx, ApiKey.END_TXN, code),
        producer_id=producer_id,
        producer_epoch=producer_epoch,
    )


async def handle_describe_transactions(ctx: RequestContext, request: Any) -> Any:
    svc = service(ctx)
    module = schemas.response_module(ApiKey.DESCRIBE_TRANSACTIONS, ctx.api_version)
    states = []
    for tid in request.transactional_ids:
        refused = not authorize(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, tid)
        meta = svc.core.transactions.get(tid) if svc.coordinates(tid) and not refused else None
        if refused:
            error = ErrorCode.transactional_id_authorization_failed
        elif not svc.coordinates(tid):
            error = ErrorCode.not_coordinator
        elif meta is None:
            error = ErrorCode.transactional_id_not_found
        else:
            error = ErrorCode.none
        topics: dict[str, list[int]] = {}
        partitions = meta.topic_partitions if meta else ()
        described = filter_authorized(
            ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, {tp.topic for tp in partitions}
        )
        for tp in sorted(partitions, key=lambda t: (t.topic, t.partition)):
            if tp.topic in described:  # the others are left out, as Kafka leaves them
                topics.setdefault(tp.topic, []).append(tp.partition)
        states.append(
            schemas.build(
                module.TransactionState,
                error_code=error,
                transactional_id=tid,
                transaction_state=meta.state.state_name if meta else "",
                transaction_timeout=meta.txn_timeout_ms if meta else 0,  # Kafka leaves 0s
                transaction_start_time=_datetime(meta.txn_start_timestamp if meta else 0),
                producer_id=meta.producer_id if meta else -1,
                producer_epoch=meta.producer_epoch if meta else -1,
                topics=tuple(
                    schemas.build(module.TopicData, topic=t, partitions=tuple(ps))
                    for t, ps in topics.items()
                ),
            )
        )
    return schemas.build(
        module.DescribeTransactionsResponse, throttle_time=0, transaction_states=tuple(states)
    )


async def _verify_offsets_partition(
    ctx: RequestContext, request: Any, groups: GroupCoordinatorService
) -> tuple[VerificationGuard | None, ErrorCode | None]:
    """KIP-890 for TxnOffsetCommit (Kafka's GroupCoordinator verifies through the same
    manager as a produce): unless the producer's transaction is open in the group's
    __consumer_offsets partition, its transaction coordinator must confirm that partition
    (added by AddOffsetsToTxn; from v5, transactions version 2, it is added now). The guard
    the write carries (None: verification is off), and the error for every offset if the
    partition was not confirmed."""
    verifier = ctx.broker.components["add_partitions_to_txn"]
    operation = SupportedOperation.for_txn_offset_commit(ctx.api_version)
    if not verifier.applies_to(operation):
        return None, None
    tp = TopicPartition(OFFSETS_TOPIC, groups.core.partition_for(request.group_id))
    try:
        guard = ctx.broker.replica_manager.start_transaction_verification(
            tp, request.producer_id, NO_SEQUENCE, request.producer_epoch, ctx.now_ms
        )
    except KafkaError:  # no longer led here: the group moved
        return None, ErrorCode.not_coordinator
    if guard is NO_GUARD:
        return guard, None
    unverified = await verifier.verify(
        request.transactional_id,
        request.producer_id,
        request.producer_epoch,
        [tp],
        operation,
    )
    return guard, unverified.get(tp)


def _datetime(ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)


async def handle_list_transactions(ctx: RequestContext, request: Any) -> Any:
    svc = service(ctx)
    module = schemas.response_module(ApiKey.LIST_TRANSACTIONS, ctx.api_version)
    found, unknown = svc.core.list_transactions(
        request.state_filters,
        request.producer_id_filters,
        getattr(request, "duration_filter", -1),
        ctx.now_ms,
    )
    return schemas.build(
        module.ListTransactionsResponse,
        throttle_time=0,
        error_code=ErrorCode.none,
        unknown_state_filters=tuple(unknown),
        transaction_states=tuple(
            schemas.build(
                module.TransactionState,
                transactional_id=m.transactional_id,
                producer_id=m.producer_id,
                transaction_state=m.state.state_name,
            )
            for m in found
            if authorize(
                ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, m.transactional_id
            )
        ),
    )


async def handle_txn_offset_commit(ctx: RequestContext, request: Any) -> Any:
    if (refused := _transaction_refusal(ctx, request)) is not None:
        return refused
    if (refused := group_refusal(ctx, request, AclOperation.READ)) is not None:
        return refused
    groups: GroupCoordinatorService = ctx.broker.components["group_coordinator"]
    module = schemas.response_module(ApiKey.TXN_OFFSET_COMMIT, ctx.api_version)
    metadata = ctx.broker.metadata
    readable = filter_authorized(
        ctx, AclOperation.READ, ResourceType.TOPIC, (t.name for t in request.topics)
    )

    def exists(name: str, partition: int) -> bool:
        topic = metadata.topic(name)
        return topic is not None and 0 <= partition < len(topic.partitions)

    commits = [
        OffsetCommit(
            t.name,
            p.partition_index,
            p.committed_offset,
            getattr(p, "committed_leader_epoch", -1),
            p.committed_metadata,
        )
        for t in request.topics
        if t.name in readable
        for p in t.partitions
        if exists(t.name, p.partition_index)
    ]
    errors: list[int] = []
    if commits:
        if not groups.coordinates(request.group_id):
            errors = [ErrorCode.not_coordinator] * len(commits)
        elif (verified := await _verify_offsets_partition(ctx, request, groups))[1] is not None:
            errors = [verified[1]] * len(commits)
        else:
            try:
                errors = groups.call_verified(
                    verified[0],
                    groups.core.txn_commit_offsets,
                    [request.group_id],
                    request.group_id,
                    request.producer_id,
                    request.producer_epoch,
                    getattr(request, "member_id", ""),
                    getattr(request, "group_instance_id", None),
                    getattr(request, "generation_id", -1),
                    commits,
                )
                replicated = await groups.await_replicated(
                    ctx.broker.config["offsets.commit.timeout.ms"]
                )
                if replicated != ErrorCode.none:
                    errors = [replicated] * len(commits)
            except CoordinatorWriteError as exc:
                errors = [exc.error_code] * len(commits)
    it = iter(errors)
    return schemas.build(
        module.TxnOffsetCommitResponse,
        throttle_time=0,
        topics=tuple(
            schemas.build(
                module.TxnOffsetCommitResponseTopic,
                name=t.name,
                partitions=tuple(
                    schemas.build(
                        module.TxnOffsetCommitResponsePartition,
                        partition_index=p.partition_index,
                        error_code=ErrorCode.topic_authorization_failed
                        if t.name not in readable
                        else next(it)
                        if exists(t.name, p.partition_index)
                        else ErrorCode.unknown_topic_or_partition,
                    )
                    for p in t.partitions
                ),
            )
            for t in request.topics
        ),
    )
