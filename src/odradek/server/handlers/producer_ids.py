"""InitProducerId, and the broker component that owns the persisted producer id state.

v6 adds KIP-939's two-phase commit flags. This broker runs no transaction
coordinator with 2PC, so it answers as Kafka's TransactionCoordinator does with
``transaction.two.phase.commit.enable=false`` (Kafka's default): a transactional
producer asking for Enable2Pc gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED, one asking
to KeepPreparedTxn gets UNSUPPORTED_VERSION (Kafka does not implement keeping a
prepared transaction either), and OngoingTxnProducerId/Epoch are always -1.
An idempotent producer (no transactional id) is granted an id whatever the flags,
as Kafka's coordinator grants it before looking at them.
"""

from __future__ import annotations

from pathlib import Path

from odradek.metadata.producer_ids import ProducerIdManager
from odradek.protocol import schemas
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.context import RequestContext

STATE_FILE = "__producer_ids.json"
#: InitProducerId v4 introduced PRODUCER_FENCED (KIP-588); older clients know INVALID_PRODUCER_EPOCH.
PRODUCER_FENCED_SINCE = 4


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
    if request.transactional_id == "":
        # Kafka's TransactionCoordinator: null means idempotent only; empty is a malformed request
        return schemas.build(
            module.InitProducerIdResponse,
            throttle_time=0,
            error_code=ErrorCode.invalid_request,
            producer_id=-1,
            producer_epoch=-1,
        )
    refused = _two_phase_commit_error(request)
    if refused is not None:
        return schemas.build(
            module.InitProducerIdResponse,
            throttle_time=0,
            error_code=refused,
            producer_id=-1,
            producer_epoch=-1,
        )
    try:
        granted = manager.init_producer_id(
            request.transactional_id,
            getattr(request, "producer_id", -1),
            getattr(request, "producer_epoch", -1),
        )
    except KafkaError as exc:
        error = exc.error_code
        if error == ErrorCode.producer_fenced and ctx.api_version < PRODUCER_FENCED_SINCE:
            error = ErrorCode.invalid_producer_epoch
        return schemas.build(
            module.InitProducerIdResponse,
            throttle_time=0,
            error_code=error,
            producer_id=-1,
            producer_epoch=-1,
        )
    return schemas.build(
        module.InitProducerIdResponse,
        throttle_time=0,
        error_code=ErrorCode.none,
        producer_id=granted.producer_id,
        producer_epoch=granted.epoch,
    )
