"""Transactions in a real 3-broker cluster: markers to partitions led by other brokers
(WriteTxnMarkers over the network), __transaction_state replicated three ways, and the
transaction coordinator killed mid-transaction, and a partition leader verifying a transactional
write with a coordinator on another broker, and transactions version 2 across brokers
(KIP-890).

One cluster for the module; the tests run in order and the later ones kill brokers and
start them again. Data topics are placed by hand (replica assignments) so that each test
knows which broker leads what: the coordinator of a transactional id is the leader of its
__transaction_state partition, found through Metadata, and the data partitions are put on
the other brokers on purpose.

What a read_committed consumer sees is compared with what the test committed: every
committed record exactly once, nothing of an aborted transaction, and never stuck behind
a transaction whose producer is gone for longer than its timeout.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from confluent_kafka import (
    Consumer,
    ElectionType,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from kio.schema.describe_transactions.v0 import request as describe_transactions0
from kio.schema.end_txn.v5 import request as end_txn5
from kio.schema.find_coordinator.v4 import request as find_coordinator4
from kio.schema.init_producer_id.v4 import request as init_producer_id4
from kio.schema.produce.v12 import request as produce12

from odradek.coordinator.hashing import partition_for
from odradek.protocol.errors import ErrorCode
from odradek.server.embedded_cluster import EmbeddedCluster
from tests.cluster.test_cluster import create, partition_metadata, wait_until
from tests.integration.test_write_txn_markers import produce_response
from tests.integration.wire_client import WireClient

NODES = (1, 2, 3)
TXN_PARTITIONS = 3
TXN_STATE = "__transaction_state"
#: A transaction whose producer is gone is aborted this long after it began.
ABANDONED_TIMEOUT_MS = 4000


@pytest.fixture(scope="module")
def odradek_cluster_config() -> dict[str, str]:
    return {
        # A killed broker is noticed after its session times out: keep the wait short.
        "zookeeper.session.timeout.ms": "6000",
        "transaction.state.log.num.partitions": str(TXN_PARTITIONS),
        "transaction.state.log.replication.factor": "3",
        "transaction.state.log.min.isr": "2",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
        "offsets.topic.num.partitions": "3",
        "offsets.topic.replication.factor": "3",
        "group.initial.rebalance.delay.ms": "0",
    }


@pytest.fixture(scope="module")
def admin(odradek_cluster: EmbeddedCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": odradek_cluster.bootstrap_servers})


# ---- helpers --------------------------------------------------------------------------------


def new_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def find_transaction_coordinator(cluster: EmbeddedCluster, node: int, tid: str) -> int | None:
    """The coordinator broker ``node`` names for ``tid`` (FindCoordinator v4, key type 1)."""
    client = WireClient(cluster.broker(node).bootstrap_servers)
    try:
        answer = client.call(
            find_coordinator4.FindCoordinatorRequest(key_type=1, coordinator_keys=(tid,))
        )
    finally:
        client.close()
    (c,) = answer.coordinators
    return c.node_id if c.error_code == ErrorCode.none else None


def coordinator_of(cluster: EmbeddedCluster, admin: AdminClient, tid: str) -> int:
    """``tid``'s coordinator once every running broker agrees on it, and it is the leader of
    ``tid``'s __transaction_state partition."""
    running = [n for n in NODES if cluster.broker(n).pid is not None]

    def agreed() -> int | None:
        named = {find_transaction_coordinator(cluster, n, tid) for n in running}
        if len(named) != 1 or None in named:
            return None
        (node,) = named
        leader = partition_metadata(admin, TXN_STATE)[partition_for(tid, TXN_PARTITIONS)].leader
        return node if node == leader and node in running else None

    return wait_until(agreed, timeout=60, what=f"every broker to name {tid}'s coordinator")


def describe_transaction(cluster: EmbeddedCluster, node: int, tid: str):
    client = WireClient(cluster.broker(node).bootstrap_servers)
    try:
        answer = client.call(
            describe_transactions0.DescribeTransactionsRequest(transactional_ids=(tid,))
        )
    finally:
        client.close()
    (state,) = answer.transaction_states
    return state


def create_placed(admin: AdminClient, leaders: Iterable[int], min_isr: int = 2) -> str:
    """A topic with one partition per entry of ``leaders``, led by it and replicated to all
    three brokers (acks=all with ``min_isr``)."""
    name = new_name("txn")
    assignment = [[leader, *(n for n in NODES if n != leader)] for leader in leaders]
    create(
        admin,
        NewTopic(
            name,
            num_partitions=len(assignment),
            replica_assignment=assignment,
            config={"min.insync.replicas": str(min_isr)},
        ),
    )
    wait_until(
        lambda: (
            [m.leader for _, m in sorted(partition_metadata(admin, name).items())]
            == [a[0] for a in assignment]
        ),
        what=f"{name}'s leaders",
    )
    return name


def transactional_producer(cluster: EmbeddedCluster, tid: str, **extra: object) -> Producer:
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": tid} | extra)
    p.init_transactions(60)
    return p


def high_watermarks(cluster: EmbeddedCluster, tps: list[TopicPartition]) -> list[int]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "hw"})
    try:
        return [consumer.get_watermark_offsets(tp, timeout=10)[1] for tp in tps]
    finally:
        consumer.close()


def read(
    cluster: EmbeddedCluster, tps: list[TopicPartition], isolation: str, timeout: float = 90
) -> list[bytes]:
    """Every record of ``tps`` a consumer with ``isolation`` delivers from offset 0, read until
    it has reached each partition's high watermark (for read_committed: until the last stable
    offset is the high watermark, no transaction being open there any more)."""
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": new_name("reader"),
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(tp.topic, tp.partition, 0) for tp in tps])
    values: list[bytes] = []
    reached: dict[tuple[str, int], int] = {}
    deadline = time.monotonic() + timeout
    try:
        while True:
            msg = consumer.poll(0.2)
            if msg is not None:
                if msg.error() is None:
                    values.append(msg.value())
                elif msg.error().code() == KafkaError._PARTITION_EOF:
                    reached[(msg.topic(), msg.partition())] = msg.offset()
                continue
            if len(reached) == len(tps):
                ends = high_watermarks(cluster, tps)
                if all(reached[(tp.topic, tp.partition)] >= end for tp, end in zip(tps, ends)):
                    return values
            if time.monotonic() > deadline:
                raise AssertionError(f"{isolation} consumer stuck at {reached} of {tps}")
    finally:
        consumer.close()


def other_nodes(node: int) -> list[int]:
    return [n for n in NODES if n != node]


def restart_and_rejoin(cluster: EmbeddedCluster, admin: AdminClient, node: int) -> None:
    """Start a killed broker again and wait until it is back in every ISR of the cluster's
    replicated topics, so the next test starts with three brokers in step."""
    cluster.start_broker(node)
    cluster.wait_for_brokers()

    def rejoined() -> bool:
        topics = admin.list_topics(timeout=10).topics
        return all(
            node in p.isrs
            for t in topics.values()
            for p in t.partitions.values()
            if node in p.replicas
        )

    wait_until(rejoined, timeout=90, what=f"broker {node} back in its ISRs")


# ---- tests ----------------------------------------------------------------------------------


def test_created_topics_keep_their_manual_replica_assignment(admin):
    """CreateTopics with replica assignments: each partition gets exactly the replicas asked
    for, in order, the first one leading (the tests below place leaders this way)."""
    name = new_name("placed")
    assignment = [[2, 3, 1], [1, 3, 2], [3, 2, 1], [2, 1, 3]]
    create(admin, NewTopic(name, num_partitions=len(assignment), replica_assignment=assignment))
    placed = wait_until(
        lambda: (
            {p: (m.leader, m.replicas) for p, m in partition_metadata(admin, name).items()}
            if all(m.leader >= 0 for m in partition_metadata(admin, name).values())
            else None
        ),
        what="leaders",
    )
    assert placed == {p: (r[0], r) for p, r in enumerate(assignment)}


def test_commit_and_abort_across_partitions_led_by_every_broker(odradek_cluster, admin):
    tid = new_name("spread")
    p = transactional_producer(odradek_cluster, tid)
    coordinator = coordinator_of(odradek_cluster, admin, tid)
    # One partition per broker: two of the three markers go over the network.
    topic = create_placed(admin, NODES)
    tps = [TopicPartition(topic, i) for i in range(3)]
    p.begin_transaction()
    for i in range(30):
        p.produce(topic, b"c1-%d" % i, partition=i % 3)
    p.commit_transaction(60)
    p.begin_transaction()
    for i in range(30):
        p.produce(topic, b"aborted-%d" % i, partition=i % 3)
    p.flush(60)
    p.abort_transaction(60)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, b"c2-%d" % i, partition=i)
    p.commit_transaction(60)

    committed = {b"c1-%d" % i for i in range(30)} | {b"c2-%d" % i for i in range(3)}
    got = read(odradek_cluster, tps, "read_committed")
    assert sorted(got) == sorted(committed)
    everything = read(odradek_cluster, tps, "read_uncommitted")
    assert sorted(everything) == sorted(committed | {b"aborted-%d" % i for i in range(30)})
    # Per partition: its records and one marker per transaction, on every replica's leader.
    assert high_watermarks(odradek_cluster, tps) == [10 + 10 + 1 + 3, 24, 24]
    state = describe_transaction(odradek_cluster, coordinator, tid)
    assert (state.error_code, state.transaction_state) == (ErrorCode.none, "CompleteCommit")


def test_a_leader_verifies_with_a_coordinator_on_another_broker(odradek_cluster, admin):
    """KIP-890 verification over the network: the partition's leader asks the coordinator
    (AddPartitionsToTxn VerifyOnly) before a transactional write opens a transaction."""
    tid = new_name("verified")
    p = transactional_producer(odradek_cluster, tid)
    coordinator = coordinator_of(odradek_cluster, admin, tid)
    leader = other_nodes(coordinator)[0]
    topic = create_placed(admin, [leader, leader])
    # The client adds partition 0 (AddPartitionsToTxn) and writes: its leader verifies.
    p.begin_transaction()
    p.produce(topic, b"added", partition=0)
    p.flush(30)
    state = describe_transaction(odradek_cluster, coordinator, tid)
    assert state.transaction_state == "Ongoing"
    pid, epoch = state.producer_id, state.producer_epoch
    client = WireClient(odradek_cluster.broker(leader).bootstrap_servers)
    try:

        def write(epoch: int) -> int:
            return produce_response(
                client, topic, pid, epoch, 0, [b"v"], partition=1, transactional_id=tid
            ).error_code

        assert write(epoch) == ErrorCode.invalid_txn_state  # partition 1 was not added
        assert write(epoch + 1) == ErrorCode.invalid_producer_epoch  # fenced at the coordinator
    finally:
        client.close()
    p.commit_transaction(60)
    tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    assert read(odradek_cluster, tps, "read_uncommitted") == [b"added"]


def test_transactions_version_2_with_a_coordinator_on_another_broker(odradek_cluster, admin):
    """KIP-890 part 2 across brokers: Produce v12 has its leader add the partition at the
    coordinator (AddPartitionsToTxn v5, not VerifyOnly), EndTxn v5 bumps the epoch, and the
    markers (WriteTxnMarkers v2) carry it to the leader."""
    tid = new_name("tv2")
    coordinator = coordinator_of(odradek_cluster, admin, tid)
    leader = other_nodes(coordinator)[0]
    topic = create_placed(admin, [leader])
    to_coordinator = WireClient(odradek_cluster.broker(coordinator).bootstrap_servers)
    to_leader = WireClient(odradek_cluster.broker(leader).bootstrap_servers)
    try:
        got = to_coordinator.call(
            init_producer_id4.InitProducerIdRequest(
                transactional_id=tid,
                transaction_timeout=timedelta(seconds=60),
                producer_id=-1,
                producer_epoch=-1,
            )
        )
        pid, epoch = got.producer_id, got.producer_epoch

        def write(epoch: int, sequence: int, value: bytes) -> int:
            return produce_response(
                to_leader,
                topic,
                pid,
                epoch,
                sequence,
                [value],
                transactional_id=tid,
                module=produce12,
            ).error_code

        assert write(epoch, 0, b"first") == ErrorCode.none
        ended = to_coordinator.call(
            end_txn5.EndTxnRequest(
                transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=True
            )
        )
        assert (ended.error_code, ended.producer_epoch) == (ErrorCode.none, epoch + 1)
        wait_until(
            lambda: (
                describe_transaction(odradek_cluster, coordinator, tid).transaction_state
                == "CompleteCommit"
            ),
            what="the markers",
        )
        assert write(epoch, 1, b"late") == ErrorCode.invalid_producer_epoch
        assert write(epoch + 1, 0, b"second") == ErrorCode.none
        aborted = to_coordinator.call(
            end_txn5.EndTxnRequest(
                transactional_id=tid, producer_id=pid, producer_epoch=epoch + 1, committed=False
            )
        )
        assert (aborted.error_code, aborted.producer_epoch) == (ErrorCode.none, epoch + 2)
    finally:
        to_coordinator.close()
        to_leader.close()
    assert read(odradek_cluster, [TopicPartition(topic, 0)], "read_committed") == [b"first"]


def test_transaction_state_is_replicated_three_ways(odradek_cluster, admin):
    partitions = partition_metadata(admin, TXN_STATE)
    assert len(partitions) == TXN_PARTITIONS
    for p in partitions.values():
        assert sorted(p.replicas) == list(NODES)
        assert sorted(p.isrs) == list(NODES)
    resource = ConfigResource(ConfigResource.Type.TOPIC, TXN_STATE)
    configs = admin.describe_configs([resource])[resource].result(10)
    assert configs["min.insync.replicas"].value == "2"
    assert configs["cleanup.policy"].value == "compact"


def same_coordinator_partition(tid: str, prefix: str = "gone") -> str:
    """Another transactional id kept in ``tid``'s __transaction_state partition."""
    while True:
        other = new_name(prefix)
        if partition_for(other, TXN_PARTITIONS) == partition_for(tid, TXN_PARTITIONS):
            return other


def test_concurrent_commits_send_markers_to_the_same_remote_leader(odradek_cluster, admin):
    """Several transactional ids of one coordinator commit at the same moment to partitions
    led by one other broker: their WriteTxnMarkers requests to that broker overlap, and
    every transaction completes."""
    first = new_name("together")
    tids = [first] + [same_coordinator_partition(first, "together") for _ in range(4)]
    producers = [transactional_producer(odradek_cluster, tid) for tid in tids]
    coordinator = coordinator_of(odradek_cluster, admin, first)
    topic = create_placed(admin, other_nodes(coordinator))
    tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    committed = []
    for round_ in range(3):
        for n, p in enumerate(producers):
            p.begin_transaction()
            for part in (0, 1):
                value = b"%d-%d-%d" % (round_, n, part)
                p.produce(topic, value, partition=part)
                committed.append(value)
            assert p.flush(30) == 0
        with ThreadPoolExecutor(len(producers)) as pool:
            list(pool.map(lambda p: p.commit_transaction(60), producers))
    assert sorted(read(odradek_cluster, tps, "read_committed")) == sorted(committed)
    for tid in tids:
        wait_until(
            lambda tid=tid: (
                describe_transaction(odradek_cluster, coordinator, tid).transaction_state
                == "CompleteCommit"
            ),
            what=f"{tid} to complete",
        )


def test_consume_transform_produce_across_brokers(odradek_cluster, admin):
    """Source partitions led by brokers 1 and 2, the sink by 3, the group's offsets wherever
    its __consumer_offsets partition is led: every third transaction is aborted and its
    input read again from the group's committed offsets."""
    source = create_placed(admin, [1, 2])
    sink = create_placed(admin, [3])
    sources = [TopicPartition(source, 0), TopicPartition(source, 1)]
    seed = Producer({"bootstrap.servers": odradek_cluster.bootstrap_servers, "acks": "all"})
    inputs = [b"in-%d" % i for i in range(20)]
    for i, value in enumerate(inputs):
        seed.produce(source, value, partition=i % 2)
    assert seed.flush(30) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": odradek_cluster.bootstrap_servers,
            "group.id": new_name("ctp"),
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe([source])
    p = transactional_producer(odradek_cluster, new_name("ctp"))
    transactions = aborted = 0
    try:

        def done() -> bool:
            committed = consumer.committed(sources, timeout=30)
            return [tp.offset for tp in committed] == [10, 10]

        deadline = time.monotonic() + 90
        while not done():
            assert time.monotonic() < deadline, "the input was not all processed"
            batch = [m for m in consumer.consume(4, timeout=1) if m.error() is None]
            if not batch:
                continue
            p.begin_transaction()
            for m in batch:
                p.produce(sink, m.value().upper())
            ends = {m.partition(): m.offset() + 1 for m in batch}
            p.send_offsets_to_transaction(
                [TopicPartition(source, part, end) for part, end in ends.items()],
                consumer.consumer_group_metadata(),
                60,
            )
            transactions += 1
            if transactions % 3:
                p.commit_transaction(60)
                continue
            p.abort_transaction(60)
            aborted += 1
            for tp in consumer.committed([sources[part] for part in ends], timeout=30):
                consumer.seek(TopicPartition(source, tp.partition, max(tp.offset, 0)))
    finally:
        consumer.close()
    assert aborted > 0
    got = read(odradek_cluster, [TopicPartition(sink, 0)], "read_committed")
    assert sorted(got) == sorted(v.upper() for v in inputs)


def test_coordinator_killed_with_transactions_open(odradek_cluster, admin):
    """kill -9 of the coordinator while two transactions are open: the new coordinator loads
    them as Ongoing; the producer still there commits its transaction through it, and the
    one whose producer is gone is aborted once its timeout passes, fencing that producer."""
    live_id = new_name("live")
    live = transactional_producer(odradek_cluster, live_id)
    coordinator = coordinator_of(odradek_cluster, admin, live_id)
    gone_id = same_coordinator_partition(live_id)
    gone = transactional_producer(
        odradek_cluster, gone_id, **{"transaction.timeout.ms": ABANDONED_TIMEOUT_MS}
    )
    # One partition led by the coordinator's broker, one by another.
    topic = create_placed(admin, [coordinator, other_nodes(coordinator)[0]])
    tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    live.begin_transaction()
    gone.begin_transaction()
    for i in range(10):
        live.produce(topic, b"live-a%d" % i, partition=i % 2)
        gone.produce(topic, b"gone-%d" % i, partition=i % 2)
    live.flush(60)
    gone.flush(60)

    odradek_cluster.kill(coordinator)
    # The producer goes on: its records reach the partitions' new leaders, and its commit
    # finds the new coordinator, which loaded the transaction from its replica.
    for i in range(10):
        live.produce(topic, b"live-b%d" % i, partition=i % 2)
    assert live.flush(120) == 0
    live.commit_transaction(120)
    committed = [b"live-a%d" % i for i in range(10)] + [b"live-b%d" % i for i in range(10)]

    # read_committed waits for the abandoned transaction's abort (its timeout), no longer.
    assert sorted(read(odradek_cluster, tps, "read_committed")) == sorted(committed)
    new_coordinator = coordinator_of(odradek_cluster, admin, live_id)
    assert new_coordinator != coordinator
    for tid, state in ((live_id, "CompleteCommit"), (gone_id, "CompleteAbort")):
        described = describe_transaction(odradek_cluster, new_coordinator, tid)
        assert (described.error_code, described.transaction_state) == (ErrorCode.none, state)
    # The abort by timeout bumped the epoch: the abandoned producer is fenced.
    with pytest.raises(KafkaException) as info:
        gone.commit_transaction(60)
    assert info.value.args[0].code() in (
        KafkaError._FENCED,
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
    )
    everything = read(odradek_cluster, tps, "read_uncommitted")
    assert sorted(everything) == sorted(committed + [b"gone-%d" % i for i in range(10)])

    restart_and_rejoin(odradek_cluster, admin, coordinator)
    # The restarted broker leads its partition again (a preferred election): its replica,
    # which held the open transactions when it was killed and got their markers by
    # replication, serves the same committed records.
    assert admin.elect_leaders(ElectionType.PREFERRED, [tps[0]]).result(30) == {tps[0]: None}
    wait_until(
        lambda: partition_metadata(admin, topic)[0].leader == coordinator, what="the election"
    )
    assert sorted(read(odradek_cluster, tps, "read_committed")) == sorted(committed)


def test_coordinator_killed_between_commit_and_markers(odradek_cluster, admin):
    """EndTxn(commit) answered, a marker not written yet (its partition's only replica is
    down), then the coordinator is killed: the new coordinator loads PrepareCommit, writes
    the markers once the partition is back and completes the commit; nothing is lost or
    doubled and the producer goes on with its next transaction."""
    tid = new_name("prepared")
    p = transactional_producer(odradek_cluster, tid)
    coordinator = coordinator_of(odradek_cluster, admin, tid)
    offline, survivor = other_nodes(coordinator)
    # Partition ``alone`` lives on ``offline`` only; ``replicated`` is led by ``survivor``.
    alone = new_name("alone")
    create(admin, NewTopic(alone, num_partitions=1, replica_assignment=[[offline]]))
    replicated = create_placed(admin, [survivor])
    tps = [TopicPartition(alone, 0), TopicPartition(replicated, 0)]
    wait_until(lambda: partition_metadata(admin, alone)[0].leader == offline, what="a leader")
    p.begin_transaction()
    for i in range(10):
        p.produce(tps[i % 2].topic, b"prepared-%d" % i)
    assert p.flush(60) == 0

    odradek_cluster.kill(offline)
    wait_until(lambda: partition_metadata(admin, alone)[0].leader < 0, what=f"{alone} offline")
    p.commit_transaction(60)  # answered once PrepareCommit is replicated
    state = describe_transaction(odradek_cluster, coordinator, tid)
    assert state.transaction_state == "PrepareCommit"  # the marker of ``alone`` is pending

    odradek_cluster.kill(coordinator)
    # The survivor alone: it takes the transaction over, still prepared (its markers wait
    # for a leader of ``alone`` and for replicas enough for min.insync.replicas).
    assert coordinator_of(odradek_cluster, admin, tid) == survivor
    assert describe_transaction(odradek_cluster, survivor, tid).transaction_state == (
        "PrepareCommit"
    )
    restart_and_rejoin(odradek_cluster, admin, offline)
    wait_until(
        lambda: (
            describe_transaction(odradek_cluster, survivor, tid).transaction_state
            == "CompleteCommit"
        ),
        timeout=60,
        what="the commit to complete",
    )
    committed = [b"prepared-%d" % i for i in range(10)]
    assert sorted(read(odradek_cluster, tps, "read_committed")) == sorted(committed)
    # Five records and a COMMIT marker in each; the old coordinator may have written the
    # marker of ``replicated`` before it was killed, and the new one writes it again (as
    # Kafka's does: a repeated marker changes nothing for readers).
    alone_end, replicated_end = high_watermarks(odradek_cluster, tps)
    assert alone_end == 6 and replicated_end in (6, 7)

    restart_and_rejoin(odradek_cluster, admin, coordinator)
    p.begin_transaction()
    p.produce(alone, b"next")
    p.produce(replicated, b"next")
    p.commit_transaction(60)
    assert sorted(read(odradek_cluster, tps, "read_committed")) == sorted(
        [*committed, b"next", b"next"]
    )
