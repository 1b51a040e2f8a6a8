"""The group coordinator follows leadership of __consumer_offsets in a real 3-broker cluster.

A group's coordinator is the leader of its __consumer_offsets partition: every
broker's FindCoordinator names it, the other brokers answer NOT_COORDINATOR, and
when it dies the partition's other replica, which has copied the partition as a
follower, is elected and takes the group over with the offsets committed before.
A commit its follower has not copied yet is not read by anyone until it has.
The tests run in order; the last one kills the coordinator.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.describe_groups.v5 import request as describe_groups5
from kio.schema.find_coordinator.v3 import request as find_coordinator3
from kio.schema.find_coordinator.v4 import request as find_coordinator4
from kio.schema.heartbeat.v4 import request as heartbeat4
from kio.schema.offset_commit.v8 import request as offset_commit8
from kio.schema.offset_fetch.v1 import request as offset_fetch1
from kio.schema.offset_fetch.v8 import request as offset_fetch8
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32, i64

from odradek.coordinator.hashing import partition_for
from odradek.protocol.errors import ErrorCode
from odradek.server.embedded_cluster import EmbeddedCluster
from tests.cluster.test_cluster import create, partition_metadata, wait_until
from tests.cluster.test_cluster_metrics import samples
from tests.integration.wire_client import WireClient

OFFSETS_PARTITIONS = 3
GROUP = "coordinated-group"
TOPIC = "coordinated-data"


@pytest.fixture(scope="module")
def odradek_cluster_config() -> dict[str, str]:
    return {
        # A killed broker is noticed after its session times out: keep the wait short.
        "zookeeper.session.timeout.ms": "6000",
        "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
        # A second replica of each offsets partition, so one survives the coordinator's death.
        "offsets.topic.replication.factor": "2",
        # To see the coordinator's log end offset.
        "metrics.http.listener": "127.0.0.1:0",
    }


@pytest.fixture(scope="module")
def admin(odradek_cluster: EmbeddedCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": odradek_cluster.bootstrap_servers})


def wire(cluster: EmbeddedCluster, node: int) -> WireClient:
    return WireClient(cluster.broker(node).bootstrap_servers)


def find_coordinator(cluster: EmbeddedCluster, node: int) -> list[tuple[int, int, int]]:
    """(error, node id, port) of GROUP's coordinator as broker ``node`` answers, v3 and batched v4."""
    client = wire(cluster, node)
    try:
        v3 = client.call(find_coordinator3.FindCoordinatorRequest(key=GROUP, key_type=0))
        v4 = client.call(
            find_coordinator4.FindCoordinatorRequest(key_type=0, coordinator_keys=(GROUP,))
        )
    finally:
        client.close()
    (c,) = v4.coordinators
    return [(v3.error_code, v3.node_id, v3.port), (c.error_code, c.node_id, c.port)]


def offsets_partition(admin: AdminClient):
    """GROUP's __consumer_offsets partition as Metadata describes it."""
    return partition_metadata(admin, "__consumer_offsets")[partition_for(GROUP, OFFSETS_PARTITIONS)]


def agreed_coordinator(cluster: EmbeddedCluster, nodes: list[int]) -> int | None:
    """The coordinator every one of ``nodes`` names, if they all name the same one."""
    answers = {a for node in nodes for a in find_coordinator(cluster, node)}
    if len(answers) != 1:
        return None
    ((error, node_id, port),) = answers
    if error != ErrorCode.none:
        return None
    assert port == int(cluster.broker(node_id).bootstrap_servers.rsplit(":", 1)[1])
    return node_id


@pytest.fixture(scope="module")
def coordinator(odradek_cluster: EmbeddedCluster, admin: AdminClient) -> int:
    node = wait_until(
        lambda: agreed_coordinator(odradek_cluster, [1, 2, 3]),
        what="every broker to name the same coordinator",
    )
    partition = offsets_partition(admin)
    assert node == partition.leader
    assert len(partition.replicas) == 2
    # The data lives on a broker that survives the coordinator's death.
    data_node = next(n for n in (1, 2, 3) if n != node)
    create(admin, NewTopic(TOPIC, num_partitions=1, replica_assignment=[[data_node]]))
    producer = Producer({"bootstrap.servers": odradek_cluster.bootstrap_servers})
    for i in range(10):
        producer.produce(TOPIC, value=b"%d" % i)
    assert producer.flush(30) == 0
    return node


@contextmanager
def group_consumer(cluster: EmbeddedCluster) -> Iterator[Consumer]:
    c = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": GROUP,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        yield c
    finally:
        c.close()


def consume_and_commit(c: Consumer, count: int) -> int:
    """Read ``count`` records, commit after the last one synchronously; its next offset."""
    c.subscribe([TOPIC])
    seen = []
    wait_until(
        lambda: (
            seen.extend(m for m in c.consume(10, timeout=1) if m.error() is None)
            or len(seen) >= count
        ),
        what=f"{count} records",
    )
    last = seen[count - 1]
    c.commit(offsets=[TopicPartition(TOPIC, 0, last.offset() + 1)], asynchronous=False)
    return last.offset() + 1


def committed(c: Consumer) -> int:
    (tp,) = c.committed([TopicPartition(TOPIC, 0)], timeout=30)
    return tp.offset


def test_group_commits_and_reads_offsets_through_its_coordinator(odradek_cluster, coordinator):
    with group_consumer(odradek_cluster) as c:
        assert consume_and_commit(c, 5) == 5
        assert committed(c) == 5


#: OffsetFetch v8 for all of GROUP's offsets.
OFFSET_FETCH_ALL = offset_fetch8.OffsetFetchRequest(
    groups=(offset_fetch8.OffsetFetchRequestGroup(group_id=GroupId(GROUP), topics=None),),
    require_stable=False,
)


def test_other_brokers_answer_not_coordinator(odradek_cluster, coordinator):
    other = next(n for n in (1, 2, 3) if n != coordinator)
    client = wire(odradek_cluster, other)
    try:
        fetched = client.call(OFFSET_FETCH_ALL)
        assert [g.error_code for g in fetched.groups] == [ErrorCode.not_coordinator]
        # v0-v1 have no top-level error: every partition asked for carries it.
        old = client.call(
            offset_fetch1.OffsetFetchRequest(
                group_id=GroupId(GROUP),
                topics=(
                    offset_fetch1.OffsetFetchRequestTopic(
                        name=TopicName(TOPIC), partition_indexes=(i32(0),)
                    ),
                ),
            )
        )
        assert [p.error_code for t in old.topics for p in t.partitions] == [
            ErrorCode.not_coordinator
        ]
        described = client.call(
            describe_groups5.DescribeGroupsRequest(
                groups=(GroupId(GROUP),), include_authorized_operations=False
            )
        )
        assert [g.error_code for g in described.groups] == [ErrorCode.not_coordinator]
        beat = client.call(
            heartbeat4.HeartbeatRequest(
                group_id=GroupId(GROUP),
                generation_id=i32(1),
                member_id="m",
                group_instance_id=None,
            )
        )
        assert beat.error_code == ErrorCode.not_coordinator
    finally:
        client.close()
    # The coordinator itself answers the same OffsetFetch with the group's offset.
    client = wire(odradek_cluster, coordinator)
    try:
        fetched = client.call(OFFSET_FETCH_ALL)
        (group,) = fetched.groups
        assert group.error_code == ErrorCode.none
        assert [(t.name, p.committed_offset) for t in group.topics for p in t.partitions] == [
            (TOPIC, 5)
        ]
    finally:
        client.close()


def commit_request(offset: int) -> offset_commit8.OffsetCommitRequest:
    """A simple consumer's OffsetCommit (no generation) of TOPIC-0 for GROUP."""
    partition = offset_commit8.OffsetCommitRequestPartition(
        partition_index=i32(0),
        committed_offset=i64(offset),
        committed_leader_epoch=i32(-1),
        committed_metadata="",
    )
    return offset_commit8.OffsetCommitRequest(
        group_id=GroupId(GROUP),
        generation_id_or_member_epoch=i32(-1),
        member_id="",
        group_instance_id=None,
        topics=(
            offset_commit8.OffsetCommitRequestTopic(name=TopicName(TOPIC), partitions=(partition,)),
        ),
    )


def offsets_log_end(cluster: EmbeddedCluster, node: int, partition: int) -> float | None:
    """The log end offset of __consumer_offsets-``partition`` on broker ``node``."""
    key = frozenset({"topic": "__consumer_offsets", "partition": str(partition)}.items())
    return samples(cluster, node, "kafka_log_log_log_end_offset").get(key)


def test_a_commit_is_read_once_its_follower_has_it(odradek_cluster, admin, coordinator):
    """With the follower of GROUP's partition stopped, a commit is appended to the
    coordinator's log but cannot be replicated: another client's OffsetFetch still reads the
    offset before it, until the follower resumes and the high watermark passes the commit."""
    partition = partition_for(GROUP, OFFSETS_PARTITIONS)
    (follower,) = (n for n in offsets_partition(admin).replicas if n != coordinator)
    # Both clients talk to the coordinator only: the stopped broker answers nobody.
    only = odradek_cluster.broker(coordinator).bootstrap_servers
    reader = Consumer({"bootstrap.servers": only, "group.id": GROUP})
    committer = WireClient(only)
    try:
        assert committed(reader) == 5
        end = offsets_log_end(odradek_cluster, coordinator, partition)
        odradek_cluster.pause(follower)
        try:
            committer.send(commit_request(8))
            wait_until(
                lambda: offsets_log_end(odradek_cluster, coordinator, partition) != end,
                what="the commit appended to the coordinator's log",
            )
            # Kept from readers while the follower cannot fetch it (the ISR keeps the stopped
            # follower for replica.lag.time.max.ms, 30 s, and the commit waits 5 s at most).
            for _ in range(5):
                assert committed(reader) == 5
        finally:
            odradek_cluster.resume(follower)
        response = committer.receive(commit_request(8))
        assert [p.error_code for t in response.topics for p in t.partitions] == [ErrorCode.none]
        assert committed(reader) == 8
        # Back to 5, the offset the next test expects the coordinator's successor to have.
        response = committer.call(commit_request(5))
        assert [p.error_code for t in response.topics for p in t.partitions] == [ErrorCode.none]
    finally:
        committer.close()
        reader.close()


def test_killed_coordinator_moves_to_the_other_replica(odradek_cluster, admin, coordinator):
    odradek_cluster.kill(coordinator)
    survivors = [n for n in (1, 2, 3) if n != coordinator]
    # Until its ZooKeeper session ends the dead broker is still named, as Kafka would.
    moved = wait_until(
        lambda: (
            agreed_coordinator(odradek_cluster, survivors) in survivors
            and agreed_coordinator(odradek_cluster, survivors)
        ),
        what="the survivors to name a new coordinator",
    )
    assert moved == offsets_partition(admin).leader
    with group_consumer(odradek_cluster) as c:
        # The new leader's replica followed the old one: the commit acknowledged there
        # (acks=all into __consumer_offsets) is still the group's offset.
        assert committed(c) == 5
        # The group forms there (JoinGroup, SyncGroup) and commits again. The records are not
        # read: after a controller failover the data partition's leadership can take a while
        # to come back, which is not what this test is about.
        c.subscribe([TOPIC])
        wait_until(lambda: c.poll(0.2) is None and c.assignment(), what="an assignment")
        c.commit(offsets=[TopicPartition(TOPIC, 0, 7)], asynchronous=False)
        assert committed(c) == 7
