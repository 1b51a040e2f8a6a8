"""KIP-939: transactions whose commit an external coordinator decides (two-phase commit).

A producer asking InitProducerId v6 with Enable2Pc gets a transaction that no timeout
aborts: its transaction timeout is stored as Integer.MAX_VALUE, as Kafka stores it, and
that value is what marks it (``TransactionMetadata.is_two_phase``), so the mark survives a
reload from __transaction_state. The producer writes its records and flushes them without
EndTxn: the transaction is then *prepared*, and it stays Ongoing until its external
coordinator (a database, a stream processor's checkpoint, Spark's driver) has decided.

Whoever recovers the decision (the restarted external coordinator) asks InitProducerId
with KeepPreparedTxn. Instead of aborting the open transaction, as every other
InitProducerId does, the coordinator keeps it and answers two identities:
OngoingTxnProducerId/Epoch, the transaction's own, to compare with what was recorded when
it was prepared (Kafka's PreparedTxnState), and ProducerId/ProducerEpoch, a next epoch that
only this client holds. EndTxn with that next epoch then commits or aborts the kept
transaction; from then on the transaction's epoch is the next one, so its markers fence the
old producer on every partition, and until then any request with the old epoch is
PRODUCER_FENCED. A second KeepPreparedTxn hands out a further epoch, fencing the first
recovering client, while the transaction's own epoch stays what was recorded, so a
recovery that dies half-way can simply be run again.

The next epoch lives in memory only: writing it would need a __transaction_state field
Kafka's value version 0 does not have. After a coordinator failover between
KeepPreparedTxn and EndTxn the client's EndTxn is PRODUCER_FENCED and it recovers again,
with the transaction still prepared; nothing is lost or committed twice.

KeepPreparedTxn is refused with INVALID_REQUEST without Enable2Pc, and with
INVALID_TXN_STATE on an Ongoing transaction that was not started with two-phase commit
(Kafka's coordinator refuses to recover such a transaction). Whether clients may ask for
two-phase commit at all is ``transaction.two.phase.commit.enable`` (Kafka's default
false): Enable2Pc on a broker without it is TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as
Kafka answers, so a client cannot tell a disabled feature from a missing permission.
"""

from __future__ import annotations

from odradek.coordinator.transaction.metadata import (
    NO_PRODUCER_EPOCH,
    TransactionMetadata,
    TransactionState,
)
from odradek.protocol.errors import ErrorCode

#: The largest epoch a record batch can carry (Short.MaxValue).
MAX_WIRE_EPOCH = 32767


def request_error(
    transactional_id: str | None, enable_two_phase: bool, keep_prepared: bool, enabled: bool
) -> ErrorCode | None:
    """The error of an InitProducerId's KIP-939 flags, checked before any state is touched; None
    when they are acceptable. Without a transactional id (an idempotent producer) the flags do
    not matter, as Kafka grants such an id before looking at them."""
    if not transactional_id:
        return None
    if enable_two_phase and not enabled:
        return ErrorCode.transactional_id_authorization_failed
    if keep_prepared and not enable_two_phase:
        return ErrorCode.invalid_request
    return None


def keep_prepared(
    meta: TransactionMetadata, expected_producer_id: int, now_ms: int
) -> tuple[ErrorCode, int]:
    """KeepPreparedTxn on ``meta``'s Ongoing transaction: (error, the next epoch handed out)."""
    if not meta.is_two_phase():
        return ErrorCode.invalid_txn_state, NO_PRODUCER_EPOCH
    if expected_producer_id not in (-1, meta.producer_id):
        return ErrorCode.producer_fenced, NO_PRODUCER_EPOCH
    following = max(meta.producer_epoch, meta.next_producer_epoch) + 1
    if following > MAX_WIRE_EPOCH:
        # Kafka moves to a new producer id here; a kept transaction cannot change its id, so
        # it has to be aborted (InitProducerId without KeepPreparedTxn) instead.
        return ErrorCode.invalid_txn_state, NO_PRODUCER_EPOCH
    meta.next_producer_epoch = following
    meta.txn_last_update_timestamp = now_ms
    return ErrorCode.none, following


def take_over(meta: TransactionMetadata, producer_id: int, producer_epoch: int) -> None:
    """An EndTxn from the client holding the next epoch: the kept transaction becomes its own, so
    the rest of EndTxn sees a producer with the current epoch and the markers carry it."""
    if (
        meta.next_producer_epoch != NO_PRODUCER_EPOCH
        and meta.state == TransactionState.ONGOING
        and producer_id == meta.producer_id
        and producer_epoch == meta.next_producer_epoch
    ):
        meta.last_producer_epoch = meta.producer_epoch
        meta.producer_epoch = meta.next_producer_epoch
        meta.next_producer_epoch = NO_PRODUCER_EPOCH


def fenced_by_next_epoch(meta: TransactionMetadata) -> bool:
    """Whether a client took the transaction over: every request with the old epoch is fenced."""
    return meta.next_producer_epoch != NO_PRODUCER_EPOCH


def retire_next_epoch(meta: TransactionMetadata) -> None:
    """The kept transaction is aborted by the coordinator (a new InitProducerId without
    KeepPreparedTxn): bump from the next epoch, so that its holder is fenced too."""
    if meta.next_producer_epoch != NO_PRODUCER_EPOCH:
        meta.producer_epoch = max(meta.producer_epoch, meta.next_producer_epoch)
        meta.next_producer_epoch = NO_PRODUCER_EPOCH
