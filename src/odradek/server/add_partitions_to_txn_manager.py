"""AddPartitionsToTxnManager: a partition leader asks transaction coordinators (KIP-890).

With ``transaction.partition.verification.enable`` (dynamic, default true, as in Kafka),
the leader of a partition that receives a transactional write from a producer with no
transaction open there first asks the producer's transaction coordinator whether the
partition is in its ongoing transaction (AddPartitionsToTxn v4+, VerifyOnly), so that
a late or hanging produce cannot open a transaction the coordinator never ends. The
guard that makes the answer safe against a marker written meanwhile lives with the
producer state (storage/producer_state.py); this module only asks.

As Kafka's AddPartitionsToTxnManager: requests to one coordinator broker are batched
(one in flight per broker; what arrives meanwhile goes in the next request, at most one
entry per transactional id: a newer epoch fences the older entry with
INVALID_PRODUCER_EPOCH, the same epoch answers the older NETWORK_EXCEPTION so that its
client retries, an older epoch is answered INVALID_PRODUCER_EPOCH at once). They go over
an inter-broker connection (the inter-broker listener's security); when this broker is
the coordinator the question is answered in process. A broker too old for v4 is not
asked (the write goes on unverified, as Kafka does on a version mismatch); an
unreachable one answers NETWORK_EXCEPTION and a missing coordinator
COORDINATOR_NOT_AVAILABLE. The coordinator's answers are mapped as Kafka maps them for
the client's version (``SupportedOperation``): PRODUCER_FENCED becomes
INVALID_PRODUCER_EPOCH, and TRANSACTION_ABORTABLE becomes INVALID_TXN_STATE for clients
that predate it.

For a client of transactions version 2 (Produce v12+, TxnOffsetCommit v5+, KIP-890 part
2) the question is not only asked but acted on: the request goes with VerifyOnly false
(v5), and the coordinator adds the partitions to the producer's transaction, beginning it
if need be. Such a client never sends AddPartitionsToTxn or AddOffsetsToTxn itself.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from odradek.coordinator.hashing import partition_for
from odradek.coordinator.transaction.coordinator import EPOCH_BUMP_VERSION
from odradek.coordinator.transaction.records import TRANSACTION_STATE_TOPIC
from odradek.coordinator.transaction.service import TransactionCoordinatorService
from odradek.network.client import BrokerConnectionError, NodeConnections
from odradek.protocol import schemas
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.server.config import BrokerConfig
from odradek.server.handlers.configs import dynamic_broker_configs
from odradek.storage import TopicPartition

log = logging.getLogger(__name__)

VERIFICATION_ENABLE = "transaction.partition.verification.enable"
#: AddPartitionsToTxn versions a broker sends: v4 brought VerifyOnly and batching, v5
#: TRANSACTION_ABORTABLE.
BROKER_VERSIONS = (4, 5)
#: Kafka's request.timeout.ms default, the bound on one round trip to a coordinator.
REQUEST_TIMEOUT_MS = 30_000


class SupportedOperation(enum.Enum):
    """What the asking client understands (Kafka's TransactionSupportedOperation)."""

    #: Produce up to v10, TxnOffsetCommit up to v3: no TRANSACTION_ABORTABLE.
    DEFAULT_ERROR = "defaultError"
    #: Produce v11, TxnOffsetCommit v4: TRANSACTION_ABORTABLE is passed on.
    GENERIC_ERROR = "genericError"
    #: Produce v12+, TxnOffsetCommit v5+ (transactions version 2): the partition is added.
    ADD_PARTITION = "addPartition"

    @classmethod
    def for_produce(cls, version: int) -> SupportedOperation:
        if version >= 12:
            return cls.ADD_PARTITION
        return cls.GENERIC_ERROR if version >= 11 else cls.DEFAULT_ERROR

    @classmethod
    def for_txn_offset_commit(cls, version: int) -> SupportedOperation:
        if version >= 5:
            return cls.ADD_PARTITION
        return cls.GENERIC_ERROR if version >= 4 else cls.DEFAULT_ERROR

    @property
    def verify_only(self) -> bool:
        return self is not SupportedOperation.ADD_PARTITION


def unverified(
    errors: Mapping[TopicPartition, int], operation: SupportedOperation
) -> dict[TopicPartition, ErrorCode]:
    """The partitions a coordinator did not confirm, with the error the client is given."""
    out = {}
    for tp, error in errors.items():
        if error == ErrorCode.none:
            continue
        if error == ErrorCode.producer_fenced:
            error = ErrorCode.invalid_producer_epoch  # what producers handle here
        elif error == ErrorCode.transaction_abortable and operation is (
            SupportedOperation.DEFAULT_ERROR
        ):
            error = ErrorCode.invalid_txn_state
        out[tp] = ErrorCode(error)
    return out


def verify_partitions(
    svc: TransactionCoordinatorService,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    partitions: list[TopicPartition],
) -> dict[TopicPartition, ErrorCode]:
    """AddPartitionsToTxn's VerifyOnly question at the coordinator: over the wire (the
    AddPartitionsToTxn handler), or in process when the asking leader is this broker."""
    if not svc.coordinates(transactional_id):
        return dict.fromkeys(partitions, ErrorCode.not_coordinator)
    return svc.core.verify_partitions(transactional_id, producer_id, producer_epoch, partitions)


@dataclass(slots=True)
class _Asked:
    """One transactional id's question waiting for its coordinator broker."""

    producer_id: int
    producer_epoch: int
    partitions: list[TopicPartition]
    operation: SupportedOperation
    answer: asyncio.Future[dict[TopicPartition, ErrorCode]]


class AddPartitionsToTxnManager:
    """Broker component (server/components.py) named "add_partitions_to_txn"."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        #: transaction.partition.verification.enable as configured now (static, then dynamic).
        self.enabled: bool = broker.config[VERIFICATION_ENABLE]
        #: Coordinator broker -> transactional id -> its question for the next request.
        self._waiting: dict[int, dict[str, _Asked]] = {}
        #: Coordinator broker -> the task sending its requests, one at a time.
        self._senders: dict[int, asyncio.Task[None]] = {}
        self._connections = NodeConnections(
            lambda: broker.metadata.brokers(),
            broker.config.inter_broker_listener_name,
            f"broker-{broker.node_id}-txn-verification",
            REQUEST_TIMEOUT_MS / 1000,
            broker.inter_broker_security,
        )

    async def start(self) -> None:
        self.reconfigure(dynamic_broker_configs(self.broker.metadata, self.broker.node_id))
        self.broker.metadata.broker_config_listeners.append(self._reapply)

    async def stop(self) -> None:
        for task in list(self._senders.values()):
            task.cancel()
        self._connections.close()

    def reconfigure(self, dynamic: Mapping[str, str]) -> None:
        """Apply this broker's dynamic configs (AlterConfigs here, or through the store)."""
        self.enabled = BrokerConfig({**self.broker.config.originals, **dynamic})[
            VERIFICATION_ENABLE
        ]

    def _reapply(self) -> None:
        self.reconfigure(dynamic_broker_configs(self.broker.metadata, self.broker.node_id))

    def applies_to(self, operation: SupportedOperation) -> bool:
        """Whether a write of ``operation``'s client goes through ``verify``: always for
        transactions version 2, which relies on it to add partitions; else while enabled."""
        return self.enabled or not operation.verify_only

    def coordinator_of(self, transactional_id: str) -> int | None:
        """The broker leading ``transactional_id``'s __transaction_state partition, if any."""
        topic = self.broker.metadata.topic(TRANSACTION_STATE_TOPIC)
        if topic is None or not topic.partitions:
            return None
        leader = topic.partitions[partition_for(transactional_id, len(topic.partitions))].leader
        return leader if leader >= 0 else None

    async def verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        operation: SupportedOperation,
    ) -> dict[TopicPartition, ErrorCode]:
        """Ask ``transactional_id``'s coordinator whether ``partitions`` are in the producer's
        ongoing transaction; the partitions not confirmed, with the client's error."""
        tps = list(partitions)
        node = self.coordinator_of(transactional_id)
        if node is None:
            return dict.fromkeys(tps, ErrorCode.coordinator_not_available)
        if node == self.broker.node_id:
            svc = self.broker.components["transaction_coordinator"]
            if operation.verify_only:
                errors = verify_partitions(svc, transactional_id, producer_id, producer_epoch, tps)
            else:
                code = await svc.write(
                    svc.core.add_partitions,
                    transactional_id,
                    producer_id,
                    producer_epoch,
                    tps,
                    client_transaction_version=EPOCH_BUMP_VERSION,
                )
                errors = dict.fromkeys(tps, code)
            return unverified(errors, operation)
        waiting = self._waiting.setdefault(node, {})
        earlier = waiting.get(transactional_id)
        if earlier is not None:
            if earlier.producer_epoch > producer_epoch:
                return dict.fromkeys(tps, ErrorCode.invalid_producer_epoch)
            fenced = earlier.producer_epoch < producer_epoch
            earlier.answer.set_result(
                dict.fromkeys(
                    earlier.partitions,
                    ErrorCode.invalid_producer_epoch if fenced else ErrorCode.network_exception,
                )
            )
        answer: asyncio.Future[dict[TopicPartition, ErrorCode]] = (
            asyncio.get_running_loop().create_future()
        )
        waiting[transactional_id] = _Asked(producer_id, producer_epoch, tps, operation, answer)
        if node not in self._senders:
            task = asyncio.get_running_loop().create_task(self._send_all(node))
            self._senders[node] = task
        return await answer

    async def _send_all(self, node: int) -> None:
        """Send what waits for ``node``, one request at a time, until nothing does."""
        try:
            while batch := self._waiting.pop(node, None):
                answers = await self._send(node, batch)
                for tid, asked in batch.items():
                    if not asked.answer.done():
                        asked.answer.set_result(unverified(answers.get(tid, {}), asked.operation))
        finally:
            self._senders.pop(node, None)

    async def _send(
        self, node: int, batch: dict[str, _Asked]
    ) -> dict[str, dict[TopicPartition, int]]:
        """One AddPartitionsToTxn request to ``node`` for ``batch``: each id's partition errors."""

        def every(error: int) -> dict[str, dict[TopicPartition, int]]:
            return {tid: dict.fromkeys(a.partitions, error) for tid, a in batch.items()}

        try:
            connection = await self._connections.get(node)
            version = connection.version(ApiKey.ADD_PARTITIONS_TO_TXN, BROKER_VERSIONS[1])
            adding = any(not a.operation.verify_only for a in batch.values())
            if adding and version != BROKER_VERSIONS[1]:
                return every(ErrorCode.unsupported_version)
            if version is None or version < BROKER_VERSIONS[0]:
                log.warning("broker %d cannot verify transactions; appends go on unverified", node)
                return {}
            response = await connection.request(_request(version, batch), REQUEST_TIMEOUT_MS / 1000)
        except BrokerConnectionError as exc:
            log.info("transaction verification with broker %d: %s", node, exc)
            self._connections.drop(node)
            return every(ErrorCode.network_exception)
        if response.error_code != ErrorCode.none:
            # The client is not told of the brokers' own authorization: verification failed.
            if response.error_code == ErrorCode.cluster_authorization_failed:
                return every(ErrorCode.invalid_txn_state)
            return every(response.error_code)
        return {
            result.transactional_id: {
                TopicPartition(topic.name, p.partition_index): p.partition_error_code
                for topic in result.topic_results
                for p in topic.results_by_partition
            }
            for result in response.results_by_transaction
        }


def _request(version: int, batch: dict[str, _Asked]) -> Any:
    module = schemas.request_module(ApiKey.ADD_PARTITIONS_TO_TXN, version)
    transactions_ = []
    for tid, asked in batch.items():
        by_topic: dict[str, list[int]] = {}
        for tp in asked.partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        transactions_.append(
            schemas.build(
                module.AddPartitionsToTxnTransaction,
                transactional_id=tid,
                producer_id=asked.producer_id,
                producer_epoch=asked.producer_epoch,
                verify_only=asked.operation.verify_only,
                topics=tuple(
                    schemas.build(module.AddPartitionsToTxnTopic, name=t, partitions=tuple(ps))
                    for t, ps in by_topic.items()
                ),
            )
        )
    return schemas.build(module.AddPartitionsToTxnRequest, transactions=tuple(transactions_))
