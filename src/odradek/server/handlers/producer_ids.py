"""InitProducerId, and the broker component that owns the persisted producer id state.

An idempotent producer (no transactional id) gets a fresh id at epoch 0 here; a
transactional id goes to the transaction coordinator (handlers/transactions.py).

v6 adds KIP-939's two-phase commit flags, Enable2Pc and KeepPreparedTxn, and answers the
kept transaction's producer id and epoch in OngoingTxnProducerId/Epoch (-1 when none was
kept); coordinator/transaction/two_phase.py has the rules and the errors.

Authorization first, as KafkaApis.handleInitProducerIdRequest: a transactional id needs
WRITE on it, and TWO_PHASE_COMMIT too with Enable2Pc (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent producer needs
IDEMPOTENT_WRITE on the cluster or WRITE on some topic (KIP-679's authorizeByResourceType),
else CLUSTER_AUTHORIZATION_FAILED. (Kafka 4's Produce no longer checks IDEMPOTENT_WRITE:
this is where an idempotent producer is admitted.)
"""

from __future__ import annotations

from pathlib import Path

from odradek.coordinator.transaction import two_phase
from odradek.coordinator.transaction.coordinator import InitProducerIdResult
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
from odradek.server.handlers.transactions import init_transactional_producer_id, service

STATE_FILE = "__producer_ids.json"
#: InitProducerId v6 adds KIP-939's flags and the ongoing transaction's id and epoch.
TWO_PHASE_SINCE = 6


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


def _authorization_error(ctx: RequestContext, request) -> ErrorCode | None:
    transactional_id = request.transactional_id
    if transactional_id is not None:
        needed = [AclOperation.WRITE]
        if getattr(request, "enable2_pc", False):
            needed.append(AclOperation.TWO_PHASE_COMMIT)
        if all(
            authorize(ctx, op, ResourceType.TRANSACTIONAL_ID, transactional_id) for op in needed
        ):
            return None
        return ErrorCode.transactional_id_authorization_failed
    if authorize_cluster(
        ctx, AclOperation.IDEMPOTENT_WRITE, log_denied=False
    ) or authorize_by_resource_type(ctx, AclOperation.WRITE, ResourceType.TOPIC):
        return None
    return ErrorCode.cluster_authorization_failed


async def handle_init_producer_id(ctx: RequestContext, request) -> object:
    module = schemas.response_module(ApiKey.INIT_PRODUCER_ID, ctx.api_version)
    manager: ProducerIdManager = ctx.broker.components["producer_ids"].manager
    refused = _authorization_error(ctx, request)
    if refused is None and request.transactional_id == "":
        # Kafka's TransactionCoordinator: null means idempotent only; empty is a malformed request
        refused = ErrorCode.invalid_request
    if refused is None:
        refused = two_phase.request_error(
            request.transactional_id,
            getattr(request, "enable2_pc", False),
            getattr(request, "keep_prepared_txn", False),
            service(ctx).config.transaction_two_phase_commit_enable,
        )
    if refused is not None:
        return schemas.build(
            module.InitProducerIdResponse,
            throttle_time=0,
            error_code=refused,
            producer_id=-1,
            producer_epoch=-1,
        )
    if request.transactional_id is None:
        granted = InitProducerIdResult(ErrorCode.none, manager.generate_producer_id(), 0)
    else:
        granted = await init_transactional_producer_id(ctx, request)
    ok = granted.error == ErrorCode.none
    ongoing = (
        {
            "ongoing_txn_producer_id": granted.ongoing_producer_id if ok else -1,
            "ongoing_txn_producer_epoch": granted.ongoing_producer_epoch if ok else -1,
        }
        if ctx.api_version >= TWO_PHASE_SINCE
        else {}
    )
    return schemas.build(
        module.InitProducerIdResponse,
        throttle_time=0,
        error_code=granted.error,
        producer_id=granted.producer_id if ok else -1,
        producer_epoch=granted.producer_epoch if ok else -1,
        **ongoing,
    )
