"""The transaction coordinator's APIs against a real broker, through kio: the exact error codes
Kafka 4 answers per version, DescribeTransactions and ListTransactions, and the coordinator's
state surviving a killed broker (loaded from __transaction_state) with the open transaction
then aborted by its timeout, and the partition leader's verification of transactional writes
(KIP-890) answered in process by the coordinator on the same broker.
"""

from __future__ import annotations

import datetime
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.add_partitions_to_txn.v3 import request as add_v3
from kio.schema.add_partitions_to_txn.v5 import request as add_v5
from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.end_txn.v1.request import EndTxnRequest as EndTxnV1
from kio.schema.end_txn.v4.request import EndTxnRequest
from kio.schema.end_txn.v5.request import EndTxnRequest as EndTxnV5
from kio.schema.init_producer_id.v3.request import InitProducerIdRequest as InitV3
from kio.schema.init_producer_id.v5.request import InitProducerIdRequest
from kio.schema.list_transactions.v1.request import ListTransactionsRequest
from kio.schema.produce.v9 import request as produce_v9
from kio.schema.produce.v12 import request as produce_v12
from kio.schema.txn_offset_commit.v3 import request as txn_offset_commit_v3
from kio.schema.txn_offset_commit.v5 import request as txn_offset_commit_v5
from kio.static.primitive import i32Timedelta
from kio_client import KioClient, incremental_alter, transaction_coordinator

from odradek import EmbeddedBroker
from odradek.protocol.errors import ErrorCode
from tests.integration.test_write_txn_markers import produce_response
from tests.integration.wire_client import WireClient

CONFIG = {
    "transaction.state.log.num.partitions": "3",
    "offsets.topic.num.partitions": "3",
    "transaction.max.timeout.ms": "120000",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
}


VERIFICATION = "transaction.partition.verification.enable"


def ms(n: int) -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=n))


def coordinator_ready(broker: EmbeddedBroker):
    return transaction_coordinator(broker.bootstrap_servers)


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(config=CONFIG) as b:
        yield b


@pytest.fixture(scope="module")
def topic(broker: EmbeddedBroker) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(name, 2, 1)])[name].result(10)
    return name


def tid() -> str:
    return f"tx-{uuid.uuid4().hex[:8]}"


def init(client: KioClient, transactional_id: str, timeout_ms: int = 60000, pid=-1, epoch=-1):
    return client.send(
        InitProducerIdRequest(
            transactional_id=transactional_id,
            transaction_timeout=ms(timeout_ms),
            producer_id=pid,
            producer_epoch=epoch,
        )
    )


def add(client: KioClient, transactional_id: str, pid: int, epoch: int, topic: str, *parts: int):
    response = client.send(
        add_v3.AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=transactional_id,
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=(add_v3.AddPartitionsToTxnTopic(name=topic, partitions=parts),),
        )
    )
    return {
        p.partition_index: p.partition_error_code
        for t in response.results_by_topic_v3_and_below
        for p in t.results_by_partition
    }


def end(client: KioClient, transactional_id: str, pid: int, epoch: int, commit: bool):
    return client.send(
        EndTxnRequest(
            transactional_id=transactional_id,
            producer_id=pid,
            producer_epoch=epoch,
            committed=commit,
        )
    ).error_code


def describe(client: KioClient, transactional_id: str):
    (state,) = client.send(
        DescribeTransactionsRequest(transactional_ids=(transactional_id,))
    ).transaction_states
    return state


def wait_for_state(client: KioClient, transactional_id: str, state: str):
    deadline = time.monotonic() + 30
    while (found := describe(client, transactional_id)).transaction_state != state:
        assert time.monotonic() < deadline, f"still {found.transaction_state}"
        time.sleep(0.05)
    return found


def test_find_coordinator_for_a_transactional_id(broker: EmbeddedBroker) -> None:
    coordinator = coordinator_ready(broker)
    assert f"{coordinator.host}:{coordinator.port}" == broker.bootstrap_servers


def test_init_producer_id_timeouts_epochs_and_fencing(broker: EmbeddedBroker) -> None:
    coordinator_ready(broker)
    t = tid()
    with KioClient(broker.bootstrap_servers) as client:
        assert init(client, t, 120001).error_code == ErrorCode.invalid_transaction_timeout
        assert init(client, t, 0).error_code == ErrorCode.invalid_transaction_timeout
        first = init(client, t)
        assert (first.error_code, first.producer_epoch) == (ErrorCode.none, 0)
        second = init(client, t)  # a new instance: same id, next epoch
        assert (second.producer_id, second.producer_epoch) == (first.producer_id, 1)
        bumped = init(client, t, pid=second.producer_id, epoch=second.producer_epoch)  # KIP-360
        assert bumped.producer_epoch == 2
        stale = init(client, t, pid=first.producer_id, epoch=first.producer_epoch)
        assert stale.error_code == ErrorCode.producer_fenced
        old = client.send(
            InitV3(
                transactional_id=t,
                transaction_timeout=ms(60000),
                producer_id=first.producer_id,
                producer_epoch=first.producer_epoch,
            )
        )
        assert old.error_code == ErrorCode.invalid_producer_epoch  # v3 predates PRODUCER_FENCED


def test_add_partitions_verify_end_and_describe(broker: EmbeddedBroker, topic: str) -> None:
    coordinator_ready(broker)
    t = tid()
    with KioClient(broker.bootstrap_servers) as client:
        got = init(client, t)
        pid, epoch = got.producer_id, got.producer_epoch
        assert end(client, t, pid, epoch, True) == ErrorCode.invalid_txn_state  # nothing open
        assert add(client, t, pid, epoch, "no-such-topic", 0) == {
            0: ErrorCode.unknown_topic_or_partition
        }
        assert add(client, t, pid + 1, epoch, topic, 0) == {
            0: ErrorCode.invalid_producer_id_mapping
        }
        assert add(client, t, pid, epoch + 1, topic, 0) == {0: ErrorCode.producer_fenced}

        def verify(*parts: int) -> dict[int, int]:
            request = add_v5.AddPartitionsToTxnRequest(
                transactions=(
                    add_v5.AddPartitionsToTxnTransaction(
                        transactional_id=t,
                        producer_id=pid,
                        producer_epoch=epoch,
                        verify_only=True,
                        topics=(add_v5.AddPartitionsToTxnTopic(name=topic, partitions=parts),),
                    ),
                )
            )
            (result,) = client.send(request).results_by_transaction
            return {
                p.partition_index: p.partition_error_code
                for r in result.topic_results
                for p in r.results_by_partition
            }

        assert verify(0) == {0: ErrorCode.transaction_abortable}  # v5 knows it
        assert add(client, t, pid, epoch, topic, 0, 1) == {0: ErrorCode.none, 1: ErrorCode.none}
        assert verify(0, 1) == {0: ErrorCode.none, 1: ErrorCode.none}
        state = describe(client, t)
        assert state.error_code == ErrorCode.none
        assert (state.transaction_state, state.producer_id, state.producer_epoch) == (
            "Ongoing",
            pid,
            epoch,
        )
        assert [(d.topic, list(d.partitions)) for d in state.topics] == [(topic, [0, 1])]
        old = client.send(
            EndTxnV1(transactional_id=t, producer_id=pid, producer_epoch=epoch + 1, committed=True)
        )
        assert old.error_code == ErrorCode.invalid_producer_epoch  # v1 predates PRODUCER_FENCED
        assert end(client, t, pid, epoch, False) == ErrorCode.none
        assert wait_for_state(client, t, "CompleteAbort").topics == ()
        assert end(client, t, pid, epoch, False) == ErrorCode.none  # a retry
        assert end(client, t, pid, epoch, True) == ErrorCode.invalid_txn_state
        missing = describe(client, "never-used")
        assert missing.error_code == ErrorCode.transactional_id_not_found


def test_list_transactions_filters(broker: EmbeddedBroker, topic: str) -> None:
    coordinator_ready(broker)
    t = tid()
    with KioClient(broker.bootstrap_servers) as client:
        got = init(client, t)
        add(client, t, got.producer_id, got.producer_epoch, topic, 0)

        def listed(states=(), pids=(), duration=-1) -> tuple[set[str], tuple[str, ...]]:
            response = client.send(
                ListTransactionsRequest(
                    state_filters=states, producer_id_filters=pids, duration_filter=duration
                )
            )
            assert response.error_code == ErrorCode.none
            names = {s.transactional_id for s in response.transaction_states}
            return names, response.unknown_state_filters

        assert t in listed()[0]
        assert t in listed(states=("Ongoing",))[0]
        assert t not in listed(states=("CompleteCommit",))[0]
        assert listed(pids=(got.producer_id,))[0] == {t}
        assert t not in listed(duration=3_600_000)[0]  # not open for an hour
        assert listed(states=("Bogus",)) == (set(), ("Bogus",))
        assert end(client, t, got.producer_id, got.producer_epoch, True) == ErrorCode.none


def test_state_survives_a_killed_broker_and_the_open_transaction_times_out(
    tmp_path: Path,
) -> None:
    with EmbeddedBroker(config=CONFIG, data_dir=tmp_path / "data") as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        admin.create_topics([NewTopic("crash", 1, 1)])["crash"].result(10)
        coordinator_ready(b)
        done, open_ = tid(), tid()
        with KioClient(b.bootstrap_servers) as client:
            first = init(client, done)
            add(client, done, first.producer_id, 0, "crash", 0)
            assert end(client, done, first.producer_id, 0, True) == ErrorCode.none
            wait_for_state(client, done, "CompleteCommit")
            # Long enough not to expire before the kill: the timeout runs from the AddPartitions.
            second = init(client, open_, timeout_ms=60000)
            add(client, open_, second.producer_id, 0, "crash", 0)
        b.restart(hard=True)
        with KioClient(b.bootstrap_servers) as client:
            assert describe(client, done).transaction_state == "CompleteCommit"
            state = describe(client, open_)
            assert (state.transaction_state, state.producer_epoch) == ("Ongoing", 0)
            assert [(d.topic, list(d.partitions)) for d in state.topics] == [("crash", [0])]
            # A new instance aborts it (epoch bumped to fence the old one), then gets its epoch.
            assert init(client, open_).error_code == ErrorCode.concurrent_transactions
            aborted = wait_for_state(client, open_, "CompleteAbort")
            assert aborted.producer_epoch == 1
            again = init(client, open_)
            assert (again.error_code, again.producer_epoch) == (ErrorCode.none, 2)


def test_a_transaction_past_its_timeout_is_aborted(broker: EmbeddedBroker, topic: str) -> None:
    coordinator_ready(broker)
    t = tid()
    with KioClient(broker.bootstrap_servers) as client:
        got = init(client, t, timeout_ms=1)
        add(client, t, got.producer_id, got.producer_epoch, topic, 1)
        aborted = wait_for_state(client, t, "CompleteAbort")
        assert aborted.producer_epoch == got.producer_epoch + 1  # the producer is fenced
        assert end(client, t, got.producer_id, got.producer_epoch, True) == (
            ErrorCode.producer_fenced
        )


def txn_offset_commit(
    client: KioClient,
    t: str,
    group: str,
    pid: int,
    epoch: int,
    topic: str,
    commit_v3: Any = txn_offset_commit_v3,
) -> list[int]:
    """TxnOffsetCommit v3 (or ``commit_v3``'s version) of offset 5 for ``topic``'s partition
    1: its error codes."""
    (result,) = client.send(
        commit_v3.TxnOffsetCommitRequest(
            transactional_id=t,
            group_id=group,
            producer_id=pid,
            producer_epoch=epoch,
            generation_id=-1,
            member_id="",
            group_instance_id=None,
            topics=(
                commit_v3.TxnOffsetCommitRequestTopic(
                    name=topic,
                    partitions=(
                        commit_v3.TxnOffsetCommitRequestPartition(
                            partition_index=1,
                            committed_offset=5,
                            committed_leader_epoch=-1,
                            committed_metadata="m",
                        ),
                    ),
                ),
            ),
        )
    ).topics
    return [p.error_code for p in result.partitions]


def test_txn_offset_commit_is_unstable_until_the_transaction_commits(
    broker: EmbeddedBroker, topic: str
) -> None:
    from kio.schema.add_offsets_to_txn.v3.request import AddOffsetsToTxnRequest
    from kio.schema.offset_fetch.v7 import request as fetch_v7

    coordinator_ready(broker)
    t, group = tid(), f"g-{uuid.uuid4().hex[:8]}"
    with KioClient(broker.bootstrap_servers) as client:
        got = init(client, t)
        pid, epoch = got.producer_id, got.producer_epoch
        added = client.send(
            AddOffsetsToTxnRequest(
                transactional_id=t, producer_id=pid, producer_epoch=epoch, group_id=group
            )
        )
        assert added.error_code == ErrorCode.none
        assert txn_offset_commit(client, t, group, pid, epoch, topic) == [ErrorCode.none]

        def fetch(stable: bool) -> tuple[int, int]:
            (t_,) = client.send(
                fetch_v7.OffsetFetchRequest(
                    group_id=group,
                    topics=(fetch_v7.OffsetFetchRequestTopic(name=topic, partition_indexes=(1,)),),
                    require_stable=stable,
                )
            ).topics
            (p,) = t_.partitions
            return p.error_code, p.committed_offset

        assert fetch(True) == (ErrorCode.unstable_offset_commit, -1)
        assert fetch(False) == (ErrorCode.none, -1)  # nothing committed yet
        assert end(client, t, pid, epoch, True) == ErrorCode.none
        wait_for_state(client, t, "CompleteCommit")
        assert fetch(True) == (ErrorCode.none, 5)


def produce(
    broker: EmbeddedBroker,
    t: str,
    pid: int,
    epoch: int,
    topic: str,
    partition: int,
    seq: int,
    module: Any = produce_v9,
):
    """One transactional batch of ``t`` to ``topic``/``partition`` (Produce v9, or
    ``module``'s version): (error code, message)."""
    client = WireClient(broker.bootstrap_servers)
    try:
        answer = produce_response(
            client,
            topic,
            pid,
            epoch,
            seq,
            [b"v"],
            partition=partition,
            transactional_id=t,
            module=module,
        )
    finally:
        client.close()
    return answer.error_code, answer.error_message


def set_verification(client: KioClient, enabled: bool | None) -> None:
    """Set (or, with None, delete) transaction.partition.verification.enable cluster-wide."""
    op = (VERIFICATION, 0, str(enabled).lower()) if enabled is not None else (VERIFICATION, 1, None)
    assert incremental_alter(client, 4, "", [op]).error_code == ErrorCode.none


def test_a_partition_not_added_is_refused_while_verification_is_on(
    broker: EmbeddedBroker, topic: str
) -> None:
    """KIP-890 part 1: the leader asks the coordinator before a transaction opens in its
    partition; the config is dynamic."""
    coordinator_ready(broker)
    t = tid()
    with KioClient(broker.bootstrap_servers) as client:
        init_response = init(client, t)
        pid, epoch = init_response.producer_id, init_response.producer_epoch
        assert add(client, t, pid, epoch, topic, 0) == {0: ErrorCode.none}
        assert produce(broker, t, pid, epoch, topic, 0, 0)[0] == ErrorCode.none
        # Partition 1 was never added: v9 (before TRANSACTION_ABORTABLE) gets INVALID_TXN_STATE.
        assert produce(broker, t, pid, epoch, topic, 1, 0) == (
            ErrorCode.invalid_txn_state,
            "Partition was not added to the transaction",
        )
        # A producer the coordinator fenced: INVALID_PRODUCER_EPOCH, what producers handle.
        assert produce(broker, t, pid, epoch + 1, topic, 1, 0)[0] == (
            ErrorCode.invalid_producer_epoch
        )
        try:
            set_verification(client, False)
            assert produce(broker, t, pid, epoch, topic, 1, 0)[0] == ErrorCode.none
        finally:
            set_verification(client, None)  # back to the default, true
        assert produce(broker, t, pid, epoch, topic, 1, 1)[0] == ErrorCode.none  # open there now
        assert end(client, t, pid, epoch, False) == ErrorCode.none
        wait_for_state(client, t, "CompleteAbort")
        # Aborted: the next transaction must add partition 0 again before writing to it.
        assert produce(broker, t, pid, epoch, topic, 0, 1)[0] == ErrorCode.invalid_txn_state


def test_offsets_of_a_group_not_added_are_refused_while_verification_is_on(
    broker: EmbeddedBroker, topic: str
) -> None:
    """The group coordinator verifies TxnOffsetCommit with the transaction coordinator as a
    partition leader verifies a produce: AddOffsetsToTxn must have added the group."""
    coordinator_ready(broker)
    t, group = tid(), f"g-{uuid.uuid4().hex[:8]}"
    with KioClient(broker.bootstrap_servers) as client:
        got = init(client, t)
        pid, epoch = got.producer_id, got.producer_epoch
        assert add(client, t, pid, epoch, topic, 0) == {0: ErrorCode.none}  # Ongoing
        refused = txn_offset_commit(client, t, group, pid, epoch, topic)
        assert refused == [ErrorCode.invalid_txn_state]  # v3 predates TRANSACTION_ABORTABLE
        try:
            set_verification(client, False)
            assert txn_offset_commit(client, t, group, pid, epoch, topic) == [ErrorCode.none]
        finally:
            set_verification(client, None)
        assert end(client, t, pid, epoch, False) == ErrorCode.none


def end_v5(client: KioClient, t: str, pid: int, epoch: int, commit: bool):
    """EndTxn v5, a client of transactions version 2: the whole response."""
    return client.send(
        EndTxnV5(transactional_id=t, producer_id=pid, producer_epoch=epoch, committed=commit)
    )


def test_transactions_version_2_over_the_wire(broker: EmbeddedBroker, topic: str) -> None:
    """KIP-890 part 2: Produce v12 adds its partition without AddPartitionsToTxn, EndTxn v5
    answers the bumped epoch (which the markers carry), and the old epoch is fenced."""
    coordinator_ready(broker)
    t = tid()
    with KioClient(broker.bootstrap_servers) as client:
        got = init(client, t)
        pid, epoch = got.producer_id, got.producer_epoch
        assert produce(broker, t, pid, epoch, topic, 0, 0, produce_v12)[0] == ErrorCode.none
        state = describe(client, t)
        assert state.transaction_state == "Ongoing"
        assert [(d.topic, list(d.partitions)) for d in state.topics] == [(topic, [0])]
        assert produce(broker, t, pid, epoch, topic, 1, 0, produce_v12)[0] == ErrorCode.none
        ended = end_v5(client, t, pid, epoch, True)
        assert (ended.error_code, ended.producer_id, ended.producer_epoch) == (
            ErrorCode.none,
            pid,
            epoch + 1,
        )
        done = wait_for_state(client, t, "CompleteCommit")
        assert done.producer_epoch == epoch + 1
        # A retry of the EndTxn is answered as the first one was.
        retried = end_v5(client, t, pid, epoch, True)
        assert (retried.error_code, retried.producer_epoch) == (ErrorCode.none, epoch + 1)
        # The ended transaction's epoch is fenced: by the coordinator and by the markers.
        assert produce(broker, t, pid, epoch, topic, 0, 1, produce_v12)[0] == (
            ErrorCode.invalid_producer_epoch
        )
        # An abort naming the old epoch is no retry of the commit.
        assert end_v5(client, t, pid, epoch, False).error_code == ErrorCode.invalid_txn_state
        # The next transaction runs in the new epoch, its sequences from 0; TxnOffsetCommit v5
        # adds the group's partition itself (no AddOffsetsToTxn).
        assert produce(broker, t, pid, epoch + 1, topic, 0, 0, produce_v12)[0] == ErrorCode.none
        group = f"g-{uuid.uuid4().hex[:8]}"
        committed = txn_offset_commit(client, t, group, pid, epoch + 1, topic, txn_offset_commit_v5)
        assert committed == [ErrorCode.none]
        assert len(describe(client, t).topics) == 2  # the topic and __consumer_offsets
        assert end_v5(client, t, pid, epoch, False).error_code == ErrorCode.producer_fenced
        assert end_v5(client, t, pid, epoch + 1, False).error_code == ErrorCode.none
        assert wait_for_state(client, t, "CompleteAbort").producer_epoch == epoch + 2
