"""Produce: append each partition's record batches, answer per partition.

The records arrive as memoryviews into the request frame (hand-written decoder)
and are handed to the log unchanged; the log validates and patches them in place
and writes them in one call. Errors are per partition and use the Kafka error
code the storage or replication layer attached. From v13 topics are named by id;
an id the metadata does not know is answered UNKNOWN_TOPIC_ID for each of its
partitions, as Kafka does. The response is hand-encoded (protocol.produce);
acks=0 gets no response at all.

Authorization, as KafkaApis.handleProduceRequest: records of a transaction (the first batch
of a partition says so) need WRITE on the request's transactional id, else every partition
gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED; each topic needs WRITE, else its partitions get
TOPIC_AUTHORIZATION_FAILED (before the unknown-topic check, so a topic's existence is not
disclosed). Without an authorizer none of this costs anything.

acks=all is Kafka's DelayedProduce: after the leader's append each partition is
complete once its high watermark reaches the end of the records
(``Partition.check_enough_replicas_reach_offset``, which also answers
NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below min.insync.replicas
meanwhile, and NOT_LEADER_OR_FOLLOWER when leadership moved). The request waits in
the produce purgatory, woken by high watermark moves, until every partition is
complete or the request's timeout passes (REQUEST_TIMED_OUT for those that are
not): ``ReplicaManager.await_replication``. A partition whose ISR is this broker alone (every partition of a single node)
is complete at its append: no wait, no purgatory entry. While a request waits, its
connection handles the next ones (it unmutes the channel, ``network/unmute.py``), and
still answers them in order.

Transaction verification (KIP-890, Kafka's appendRecordsWithTransactionVerification): with
``transaction.partition.verification.enable``, a request with a transactional id whose
partitions hold a transactional batch of a producer with no transaction open there is
appended only once the producer's coordinator confirmed those partitions
(server/add_partitions_to_txn_manager.py); each append carries the verification guard,
which the log checks. A partition not in the transaction gets INVALID_TXN_STATE
(TRANSACTION_ABORTABLE from v11); a verification that could not complete
(CONCURRENT_TRANSACTIONS, NETWORK_EXCEPTION, COORDINATOR_LOAD_IN_PROGRESS,
COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR) NOT_ENOUGH_REPLICAS, which every client
retries without refreshing its metadata, as Kafka answers. From v12 (a client of
transactions version 2) the same request adds the partitions to the transaction instead,
whatever the config says. A request without a transactional id costs nothing more.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter

from odradek.network.unmute import unmute_channel
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.produce import (
    FIRST_TOPIC_ID_VERSION,
    ProducePartitionResponse,
    ProduceRequest,
    encode_produce_response,
    throttle_time_position,
)
from odradek.protocol.records import first_batch_is_transactional, transactional_producer
from odradek.protocol.response import EncodedResponse
from odradek.replication.replica_manager import ReplicatedAppend
from odradek.server.add_partitions_to_txn_manager import SupportedOperation
from odradek.server.authorization import AclOperation, ResourceType, authorize
from odradek.server.context import RequestContext
from odradek.storage import TopicPartition
from odradek.storage.errors import RecordValidationError
from odradek.storage.producer_state import NO_GUARD, VerificationGuard

log = logging.getLogger(__name__)

#: Produce v8 added per-record errors to the response.
FIRST_RECORD_ERRORS_VERSION = 8
#: Errors that refuse the records themselves: their bytes count as BytesRejected, as Kafka's
#: log validation marks them (a failure elsewhere, such as not being the leader, does not).
REJECTED_RECORDS = frozenset(
    {
        ErrorCode.corrupt_message,
        ErrorCode.message_too_large,
        ErrorCode.record_list_too_large,
        ErrorCode.invalid_record,
        ErrorCode.invalid_timestamp,
    }
)
#: Verification errors that old clients would not retry: answered NOT_ENOUGH_REPLICAS.
UNVERIFIED_RETRIABLE = frozenset(
    {
        ErrorCode.concurrent_transactions,
        ErrorCode.network_exception,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.coordinator_not_available,
        ErrorCode.not_coordinator,
    }
)


async def handle(ctx: RequestContext, request: ProduceRequest) -> EncodedResponse | None:
    replicas, topic_stats = ctx.broker.replica_manager, ctx.broker.topic_stats
    acks, now_ms = request.acks, ctx.now_ms
    by_id = ctx.api_version >= FIRST_TOPIC_ID_VERSION
    results: list[tuple[str | uuid.UUID, list[ProducePartitionResponse]]] = []
    #: acks=all partitions not yet replicated, and their results to complete.
    delayed: list[ReplicatedAppend] = []
    delayed_results: list[ProducePartitionResponse] = []
    denied_all = ctx.broker.authorizer is not None and not _transaction_authorized(ctx, request)
    #: topic name -> whether WRITE is allowed (asked once per topic, with an authorizer only).
    writable: dict[str, bool] | None = None if ctx.broker.authorizer is None else {}
    #: The verification guard of each partition when verification applies, and the
    #: partitions refused by it.
    guards: dict[TopicPartition, VerificationGuard] | None = None
    unverified: dict[TopicPartition, ErrorCode] = {}
    if request.transactional_id is not None and not denied_all:
        operation = SupportedOperation.for_produce(ctx.api_version)
        if ctx.broker.components["add_partitions_to_txn"].applies_to(operation):
            guards, unverified = await _verify(ctx, request, writable, operation)
    for topic in request.topics:
        out: list[ProducePartitionResponse] = []
        name = topic.name
        if by_id:
            assert topic.topic_id is not None
            results.append((topic.topic_id, out))
            image = ctx.broker.metadata.topic_by_id(topic.topic_id)
            if image is None:
                out += (
                    ProducePartitionResponse(p.index, ErrorCode.unknown_topic_id)
                    for p in topic.partitions
                )
                continue
            name = image.name
        else:
            results.append((name, out))
        if denied_all or (writable is not None and not _writable(ctx, writable, name)):
            error = (
                ErrorCode.transactional_id_authorization_failed
                if denied_all
                else ErrorCode.topic_authorization_failed
            )
            out += (ProducePartitionResponse(p.index, error) for p in topic.partitions)
            continue
        for p in topic.partitions:
            result = ProducePartitionResponse(p.index)
            out.append(result)
            tp = TopicPartition(name, p.index)
            if acks not in (-1, 0, 1):
                result.error_code = ErrorCode.invalid_required_acks
                continue
            if unverified and tp in unverified:
                _refuse_unverified(result, unverified[tp])
                continue
            size = len(p.records) if p.records is not None else 0
            try:
                if p.records is None:
                    raise KafkaError("null records", ErrorCode.invalid_record)
                info = replicas.append_records(
                    tp,
                    p.records,
                    acks,
                    now_ms,
                    verification_guard=None if guards is None else guards.get(tp, NO_GUARD),
                )
            except RecordValidationError as e:
                result.error_code, result.error_message = e.error_code, str(e)
                if ctx.api_version >= FIRST_RECORD_ERRORS_VERSION:
                    result.record_errors = list(e.record_errors)
                topic_stats.append_failed(name, size)
                continue
            except KafkaError as e:
                result.error_code, result.error_message = e.error_code, str(e)
                if e.error_code != ErrorCode.unknown_topic_or_partition:  # no series per typo
                    topic_stats.append_failed(name, size if e.error_code in REJECTED_RECORDS else 0)
                continue
            except Exception as e:
                log.exception("append to %s failed", tp)
                result.error_code, result.error_message = ErrorCode.unknown_server_error, str(e)
                topic_stats.append_failed(name)
                continue
            topic_stats.appended(name, size, info.record_count)
            result.base_offset = info.first_offset
            result.log_append_time_ms = info.log_append_time_ms
            partition = replicas.partition(tp)
            result.log_start_offset = partition.log_start_offset
            if acks == -1:
                end, epoch = info.last_offset + 1, partition.leader_epoch
                done, error = partition.check_enough_replicas_reach_offset(end, epoch)
                if done:
                    result.error_code = error
                else:
                    delayed.append((tp, end, epoch))
                    delayed_results.append(result)
    if delayed:
        # Every partition is appended: the connection's next requests may go ahead
        # while this one waits for its followers (network/unmute.py).
        await unmute_channel()
        errors = await replicas.await_replication(delayed, request.timeout_ms)
        for result, error in zip(delayed_results, errors):
            result.error_code = error
    if acks == 0:
        return None
    response = EncodedResponse()
    if ctx.broker.request_metrics is not None:  # counted only when someone reads them
        response.error_counts = Counter(p.error_code for _, ps in results for p in ps)
    body = encode_produce_response(ctx.api_version, results)
    response.add(body)
    response.throttle_at = (0, throttle_time_position(ctx.api_version, body))
    return response


async def _verify(
    ctx: RequestContext,
    request: ProduceRequest,
    writable: dict[str, bool] | None,
    operation: SupportedOperation,
) -> tuple[dict[TopicPartition, VerificationGuard], dict[TopicPartition, ErrorCode]]:
    """Start verification where a producer's transactional batch would open a transaction,
    ask the coordinator about those partitions, and return every guard and the partitions
    refused (Kafka's maybeStartTransactionVerificationForPartitions)."""
    replicas, now_ms = ctx.broker.replica_manager, ctx.now_ms
    by_id = ctx.api_version >= FIRST_TOPIC_ID_VERSION
    guards: dict[TopicPartition, VerificationGuard] = {}
    refused: dict[TopicPartition, ErrorCode] = {}
    producers = set()
    for topic in request.topics:
        name = topic.name
        if by_id:
            assert topic.topic_id is not None
            image = ctx.broker.metadata.topic_by_id(topic.topic_id)
            if image is None:
                continue
            name = image.name
        if writable is not None and not _writable(ctx, writable, name):
            continue
        for p in topic.partitions:
            producer = transactional_producer(p.records)
            if producer is None:
                continue
            tp = TopicPartition(name, p.index)
            producers.add((producer.producer_id, producer.producer_epoch))
            try:
                guards[tp] = replicas.start_transaction_verification(
                    tp,
                    producer.producer_id,
                    producer.base_sequence,
                    producer.producer_epoch,
                    now_ms,
                )
            except KafkaError as e:
                refused[tp] = e.error_code
    if len(producers) > 1:  # Kafka refuses transactional records of several producers
        return guards, dict.fromkeys(guards, ErrorCode.invalid_producer_id_mapping)
    asked = [tp for tp, guard in guards.items() if guard is not NO_GUARD]
    if asked:
        ((producer_id, producer_epoch),) = producers
        assert request.transactional_id is not None
        refused |= await ctx.broker.components["add_partitions_to_txn"].verify(
            request.transactional_id,
            producer_id,
            producer_epoch,
            asked,
            operation,
        )
    return guards, refused


def _refuse_unverified(result: ProducePartitionResponse, error: ErrorCode) -> None:
    """The answer for a partition whose verification failed, as Kafka words it."""
    if error in UNVERIFIED_RETRIABLE:
        result.error_code = ErrorCode.not_enough_replicas
        result.error_message = (
            "Unable to verify the partition has been added to the transaction. "
            f"Underlying error: {error.name.upper()}"
        )
    else:
        result.error_code = error
        if error == ErrorCode.invalid_txn_state:
            result.error_message = "Partition was not added to the transaction"


def _transaction_authorized(ctx: RequestContext, request: ProduceRequest) -> bool:
    """False when the request carries transactional records its transactional id may not write."""
    if not any(
        first_batch_is_transactional(p.records) for t in request.topics for p in t.partitions
    ):
        return True
    transactional_id = request.transactional_id
    return transactional_id is not None and authorize(
        ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id
    )


def _writable(ctx: RequestContext, known: dict[str, bool], topic: str) -> bool:
    allowed = known.get(topic)
    if allowed is None:
        allowed = known[topic] = authorize(ctx, AclOperation.WRITE, ResourceType.TOPIC, topic)
    return allowed
