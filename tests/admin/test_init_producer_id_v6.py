"""InitProducerId v6 (KIP-939's Enable2Pc and KeepPreparedTxn) against real brokers, through kio.

With transaction.two.phase.commit.enable=false (Kafka's default) Enable2Pc from a
transactional producer is TRANSACTIONAL_ID_AUTHORIZATION_FAILED and the ongoing-transaction
fields stay -1; without a transactional id (an idempotent producer) the flags do not matter,
as in Kafka. With it enabled, a prepared transaction survives InitProducerId with
KeepPreparedTxn, which answers its identity, and the next epoch it hands out commits it.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.add_partitions_to_txn.v3 import request as add_v3
from kio.schema.api_versions.v2.request import ApiVersionsRequest
from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.end_txn.v4.request import EndTxnRequest
from kio.schema.init_producer_id.v5.request import InitProducerIdRequest as InitProducerIdV5
from kio.schema.init_producer_id.v6.request import InitProducerIdRequest
from kio.static.primitive import i32Timedelta
from kio_client import KioClient, transaction_coordinator

from odradek import EmbeddedBroker
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode

TIMEOUT = i32Timedelta.parse(datetime.timedelta(seconds=60))


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        transaction_coordinator(b.bootstrap_servers)
        yield b


def init(
    broker: EmbeddedBroker,
    transactional_id: str | None,
    *,
    enable2_pc: bool = False,
    keep_prepared_txn: bool = False,
    producer_id: int = -1,
    producer_epoch: int = -1,
):
    request = InitProducerIdRequest(
        transactional_id=transactional_id,
        transaction_timeout=TIMEOUT,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        enable2_pc=enable2_pc,
        keep_prepared_txn=keep_prepared_txn,
    )
    with KioClient(broker.bootstrap_servers) as client:
        return client.send(request)


def test_api_versions_advertises_v6(broker: EmbeddedBroker) -> None:
    with KioClient(broker.bootstrap_servers) as client:  # v2: its response header is not flexible
        keys = client.send(ApiVersionsRequest()).api_keys
    assert [
        (k.min_version, k.max_version) for k in keys if k.api_key == ApiKey.INIT_PRODUCER_ID
    ] == [(0, 6)]


def test_idempotent_producer_gets_an_id(broker: EmbeddedBroker) -> None:
    first, second = init(broker, None), init(broker, None, enable2_pc=True, keep_prepared_txn=True)
    for answer in (first, second):
        assert (
            answer.error_code == ErrorCode.none
            and answer.producer_id >= 0
            and answer.producer_epoch == 0
        )
        assert (answer.ongoing_txn_producer_id, answer.ongoing_txn_producer_epoch) == (-1, -1)
    assert first.producer_id != second.producer_id


def test_transactional_producer_without_2pc_bumps_its_epoch(broker: EmbeddedBroker) -> None:
    tid = f"tx-{uuid.uuid4().hex[:8]}"
    first = init(broker, tid)
    second = init(broker, tid, producer_id=first.producer_id, producer_epoch=first.producer_epoch)
    assert (first.error_code, second.error_code) == (ErrorCode.none, ErrorCode.none)
    assert (second.producer_id, second.producer_epoch) == (
        first.producer_id,
        first.producer_epoch + 1,
    )
    assert (second.ongoing_txn_producer_id, second.ongoing_txn_producer_epoch) == (-1, -1)


def test_enable_2pc_is_refused_as_with_two_phase_commit_disabled(broker: EmbeddedBroker) -> None:
    tid = f"tx-{uuid.uuid4().hex[:8]}"
    answer = init(broker, tid, enable2_pc=True)
    assert answer.error_code == ErrorCode.transactional_id_authorization_failed
    assert (answer.producer_id, answer.producer_epoch) == (-1, -1)
    # Refused before any state changed: the id starts at epoch 0 afterwards.
    assert init(broker, tid).producer_epoch == 0


def test_keep_prepared_txn_needs_enable_2pc(broker: EmbeddedBroker) -> None:
    tid = f"tx-{uuid.uuid4().hex[:8]}"
    answer = init(broker, tid, keep_prepared_txn=True)
    assert answer.error_code == ErrorCode.invalid_request
    assert (answer.producer_id, answer.producer_epoch) == (-1, -1)
    refused = init(broker, tid, keep_prepared_txn=True, enable2_pc=True)
    assert refused.error_code == ErrorCode.transactional_id_authorization_failed


def test_v5_still_served(broker: EmbeddedBroker) -> None:
    with KioClient(broker.bootstrap_servers) as client:
        answer = client.send(
            InitProducerIdV5(
                transactional_id=None,
                transaction_timeout=TIMEOUT,
                producer_id=-1,
                producer_epoch=-1,
            )
        )
    assert answer.error_code == ErrorCode.none and answer.producer_id >= 0


def test_an_empty_transactional_id_is_an_invalid_request(broker: EmbeddedBroker) -> None:
    """Kafka's TransactionCoordinator: null asks for an idempotent id, the empty string is malformed."""
    answer = init(broker, "")
    assert (answer.error_code, answer.producer_id, answer.producer_epoch) == (
        ErrorCode.invalid_request,
        -1,
        -1,
    )


@pytest.fixture(scope="module")
def two_phase_broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(config={"transaction.two.phase.commit.enable": "true"}) as b:
        transaction_coordinator(b.bootstrap_servers)
        yield b


def test_a_prepared_transaction_is_kept_and_committed_by_the_next_epoch(
    two_phase_broker: EmbeddedBroker,
) -> None:
    broker, tid = two_phase_broker, f"tx-{uuid.uuid4().hex[:8]}"
    topic = f"t-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
    first = init(broker, tid, enable2_pc=True)
    assert first.error_code == ErrorCode.none
    with KioClient(broker.bootstrap_servers) as client:
        added = client.send(
            add_v3.AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=tid,
                v3_and_below_producer_id=first.producer_id,
                v3_and_below_producer_epoch=first.producer_epoch,
                v3_and_below_topics=(add_v3.AddPartitionsToTxnTopic(name=topic, partitions=(0,)),),
            )
        )
        assert added.results_by_topic_v3_and_below[0].results_by_partition[
            0
        ].partition_error_code == (ErrorCode.none)
        (state,) = client.send(
            DescribeTransactionsRequest(transactional_ids=(tid,))
        ).transaction_states
        assert state.transaction_state == "Ongoing"
        assert state.transaction_timeout == datetime.timedelta(milliseconds=2**31 - 1)
    kept = init(broker, tid, enable2_pc=True, keep_prepared_txn=True)
    assert kept.error_code == ErrorCode.none
    assert (kept.ongoing_txn_producer_id, kept.ongoing_txn_producer_epoch) == (
        first.producer_id,
        first.producer_epoch,
    )
    assert (kept.producer_id, kept.producer_epoch) == (first.producer_id, first.producer_epoch + 1)
    with KioClient(broker.bootstrap_servers) as client:

        def end(epoch: int) -> ErrorCode:
            return client.send(
                EndTxnRequest(
                    transactional_id=tid,
                    producer_id=first.producer_id,
                    producer_epoch=epoch,
                    committed=True,
                )
            ).error_code

        assert end(first.producer_epoch) == ErrorCode.producer_fenced
        assert end(kept.producer_epoch) == ErrorCode.none
        (state,) = client.send(
            DescribeTransactionsRequest(transactional_ids=(tid,))
        ).transaction_states
        assert state.transaction_state in ("PrepareCommit", "CompleteCommit")
    # Nothing open any more: KeepPreparedTxn is an ordinary epoch bump.
    for _ in range(1000):  # CONCURRENT_TRANSACTIONS while the markers are being written
        after = init(broker, tid, enable2_pc=True, keep_prepared_txn=True)
        if after.error_code != ErrorCode.concurrent_transactions:
            break
    assert after.error_code == ErrorCode.none
    assert (after.ongoing_txn_producer_id, after.ongoing_txn_producer_epoch) == (-1, -1)
