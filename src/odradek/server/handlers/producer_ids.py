"""InitProducerId, and the broker component that owns the persisted producer id state.

An idempotent producer (no transactional id) gets a fresh id at epoch 0 here; a
transactional id goes to the transaction coordinator (handlers/transactions.py).

v6 adds KIP-939's two-phase commit flags. This broker runs no transaction
coordinator with 2PC, so it answers as Kafka's TransactionCoordinator does with
``transaction.two.phase.commit.enable=false`` (Kafka's default): a transactional
producer asking for Enable2Pc gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED, one asking
to KeepPreparedTxn gets UNSUPPORTED_VERSION (Kafka does not implement keeping a
prepared transaction either), and OngoingTxnProducerId/Epoch are always -1.
An idempotent producer (no transactional id) is granted an id whatever the flags,
as Kafka's coordinator grants it before looking at them.

Authorization first, as KafkaApis.handleInitProducerIdRequest: a transactional id needs
WRITE on it (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent producer needs
IDEMPOTENT_WRITE on the cluster or WRITE on some topic (KIP-679's authorizeByResourceType),
else CLUSTER_AUTHORIZATION_FAILED. (Kafka 4's Produce no longer checks IDEMPOTENT_WRITE:
this is where an idempotent producer is admitted.)
"""

from __future__ import annotations

from pathlib import Path

from odradek.metadata.producer_ids import ProducerIdManager
from odradek.protocol import schemas
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.server.authorization import (
    AclOperation,
    ResourceType,
    authorize,
    authorize_by_resource_type,
    authorize_cluster,
)
from odradek.server.context import RequestContext
from odradek.server.handlers.transactions import init_transactional_producer_id

STATE_FILE = "__producer_ids.json"


class ProducerIds:
    """Broker component (see server/components.py): the ProducerIdManager of this node's data dir."""

    def __init__(self, broker) -> None:
        self.manager = ProducerIdManager(
            Path(broker.config.log_dirs[0]) / STATE_FILE,
            take_block=broker.metadata.producer_id_blocks(),
        )

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass


def _authorization_error(ctx: RequestContext, transactional_id: str | None) -> ErrorCode | None:
    if transactional_id is not None:
        if authorize(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            return None
        return ErrorCode.transactional_id_authorization_failed
    if authorize_cluster(
        ctx, AclOperation.IDEMPOTENT_WRITE, log_denied=False
    ) or authorize_by_resource_type(ctx, AclOperation.WRITE, ResourceType.TOPIC):
        return None
    return ErrorCode.cluster_authorization_failed


def _two_phase_commit_error(request) -> ErrorCode | None:
    """The error of a v6 request using KIP-939's flags on a broker without 2PC, checked as Kafka's
    coordinator does after the null and empty transactional id cases."""
    if not request.transactional_id:
        return None
    if getattr(request, "enable2_pc", False):
        return ErrorCode.transactional_id_authorization_failed
    if getattr(request, "keep_prepared_txn", False):
        return ErrorCode.unsupported_version
    return None


async def handle_init_producer_id(ctx: RequestContext, request) -> object:
    module = schemas.response_module(ApiKey.INIT_PRODUCER_ID, ctx.api_version)
    manager: ProducerIdManager = ctx.broker.components["producer_ids"].manager
    refused = _authorization_error(ctx, request.transactional_id)
    if refused is None and request.transactional_id == "":
        # Kafka's TransactionCoordinator: null means idempotent only; empty is a malformed request
        refused = ErrorCode.invalid_request
    if refused is None:
        refused = _two_phase_commit_error(request)
    if refused is not None:
        return schemas.build(
            module.InitProducerIdResponse,
            throttle_time=0,
            error_code=refused,
            producer_id=-1,
            producer_epoch=-1,
        )
    if request.transactional_id is None:
        error, producer_id, epoch = ErrorCode.none, manager.generate_producer_id(), 0
    else:
        granted = await init_transactional_producer_id(ctx, request)
        error, producer_id, epoch = granted.error, granted.producer_id, granted.producer_epoch
    return schemas.build(
        module.InitProducerIdResponse,
        throttle_time=0,
        error_code=error,
        producer_id=producer_id if error == ErrorCode.none else -1,
        producer_epoch=epoch if error == ErrorCode.none else -1,
    )
