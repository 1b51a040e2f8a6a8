"""A real 3-broker cluster on a real ZooKeeper, driven by confluent-kafka, kazoo and raw requests.

One cluster for the module (the ``odradek_cluster`` fixture of the pytest plugin);
the tests run in order and the last ones kill and restart a broker. Replication of
data is test_replication.py's: topics here are RF=1 where data flows, and RF=2 where
only the assignment, ISR and reporting are checked.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, ElectionType, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from kafka import KafkaAdminClient
from kafka import TopicPartition as KafkaTopicPartition
from kazoo.client import KazooClient
from kio.schema.init_producer_id.v4 import request as init_producer_id4

from odradek.metadata import zk_layout as layout
from odradek.protocol.errors import ErrorCode
from odradek.server.embedded_cluster import EmbeddedCluster
from tests.integration.test_wire import _batch, fetch_request, metadata_request, produce_request
from tests.integration.wire_client import WireClient, metadata

SESSION_TIMEOUT_MS = 6000


@pytest.fixture(scope="module")
def odradek_cluster_config() -> dict[str, str]:
    # A killed broker is noticed after its session times out: keep the wait short.
    return {"zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS)}


@pytest.fixture(scope="module")
def admin(odradek_cluster: EmbeddedCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": odradek_cluster.bootstrap_servers})


def wait_until(check: Callable[[], Any], timeout: float = 30.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or check}")
        time.sleep(0.05)


def read_json(zk: KazooClient, path: str) -> Any:
    return json.loads(zk.get(path)[0])


def create(admin: AdminClient, topic: NewTopic) -> None:
    """Create ``topic`` and wait until every broker names a leader for each of its partitions.

    CreateTopics answers once the broker that took it knows the leaders; the others learn them
    from their own watches a moment later, and until then their Metadata answers
    LEADER_NOT_AVAILABLE with no partitions. A test asks any broker next, so it waits for all,
    as Kafka's TestUtils.createTopic does."""
    admin.create_topics([topic])[topic.topic].result(30)
    count = topic.num_partitions if topic.num_partitions > 0 else len(topic.replica_assignment)
    wait_until(
        lambda: all(
            led_on(f"{b.host}:{b.port}", topic.topic, count)
            for b in admin.list_topics(timeout=10).brokers.values()
        ),
        what=f"every broker to know the leaders of {topic.topic}",
    )


def led_on(address: str, topic: str, partitions: int) -> bool:
    """Whether the broker at ``address`` names a leader for each of ``topic``'s partitions; a
    killed broker still registered (its session not yet expired) has nothing to say."""
    try:
        (answer,) = metadata(address, topic, auto_create=False).topics
    except ConnectionRefusedError:
        return True
    return (
        answer.error_code == ErrorCode.none
        and len(answer.partitions) == partitions
        and all(p.leader_id >= 0 for p in answer.partitions)
    )


def partition_metadata(admin: AdminClient, topic: str) -> dict[int, Any]:
    return admin.list_topics(topic, timeout=10).topics[topic].partitions


def test_layout_is_written_as_kafka_writes_it(odradek_cluster, zk, admin):
    cluster_id = read_json(zk, layout.CLUSTER_ID)
    assert cluster_id["version"] == "1"
    assert admin.describe_cluster().result(10).cluster_id == cluster_id["id"]
    assert sorted(zk.get_children(layout.BROKER_IDS), key=int) == ["1", "2", "3"]
    for node, broker in odradek_cluster.brokers.items():
        info = read_json(zk, layout.broker_path(node))
        assert info["version"] == 5
        assert info["endpoints"] == [f"PLAINTEXT://{broker.bootstrap_servers}"]
        assert f"{info['host']}:{info['port']}" == broker.bootstrap_servers
        assert info["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}
        assert zk.exists(layout.broker_path(node)).ephemeralOwner != 0
    controller = read_json(zk, layout.CONTROLLER)
    assert controller["brokerid"] in (1, 2, 3) and controller["version"] == 2
    epoch = int(zk.get(layout.CONTROLLER_EPOCH)[0])
    assert epoch >= 1

    create(admin, NewTopic("layout", 3, 2, config={"retention.ms": "3600000"}))
    assignment = read_json(zk, layout.topic_path("layout"))
    assert assignment["version"] == 3
    assert sorted(assignment["partitions"]) == ["0", "1", "2"]
    description = admin.describe_topics(__import__("confluent_kafka").TopicCollection(["layout"]))[
        "layout"
    ].result(10)
    assert layout._parse_kafka_uuid(assignment["topic_id"]).bytes == bytes(
        description.topic_id.get_most_significant_bits().to_bytes(8, "big", signed=True)
        + description.topic_id.get_least_significant_bits().to_bytes(8, "big", signed=True)
    )
    metadata = partition_metadata(admin, "layout")
    for p, replicas in assignment["partitions"].items():
        assert len(set(replicas)) == 2
        state = read_json(zk, layout.state_path("layout", int(p)))
        assert state == {
            "controller_epoch": epoch,
            "leader": replicas[0],
            "version": 1,
            "leader_epoch": 0,
            "isr": replicas,
        }
        # Metadata reports what ZooKeeper holds: RF=2, ISR = both replicas (not yet replicated).
        assert metadata[int(p)].leader == replicas[0]
        assert metadata[int(p)].replicas == replicas and metadata[int(p)].isrs == replicas
    assert read_json(zk, layout.topic_config_path("layout")) == {
        "version": 1,
        "config": {"retention.ms": "3600000"},
    }

    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        "layout",
        incremental_configs=[
            ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(10)
    assert read_json(zk, layout.topic_config_path("layout"))["config"] == {
        "retention.ms": "7200000"
    }
    changes = [
        read_json(zk, f"{layout.CONFIG_CHANGES}/{c}")
        for c in zk.get_children(layout.CONFIG_CHANGES)
    ]
    assert {"version": 2, "entity_path": "topics/layout"} in changes


def test_delete_topic_through_the_controller(zk, admin):
    admin.delete_topics(["layout"])["layout"].result(10)
    wait_until(lambda: zk.exists(layout.topic_path("layout")) is None, what="topic znode gone")
    assert zk.get_children(layout.DELETE_TOPICS) == []
    assert zk.exists(layout.topic_config_path("layout")) is None
    wait_until(lambda: "layout" not in admin.list_topics(timeout=10).topics, what="metadata")


def test_produce_and_consume_across_brokers(odradek_cluster, admin):
    create(admin, NewTopic("spread", 6, 1))
    leaders = {p: m.leader for p, m in partition_metadata(admin, "spread").items()}
    assert set(leaders.values()) == {1, 2, 3}, "RF=1 partitions spread over every broker"
    producer = Producer({"bootstrap.servers": odradek_cluster.bootstrap_servers, "acks": "all"})
    for p in range(6):
        for i in range(50):
            producer.produce("spread", value=f"{p}-{i}".encode(), partition=p)
    assert producer.flush(30) == 0
    assert consume_all(odradek_cluster, "spread", 6, 300) == {
        p: [f"{p}-{i}" for i in range(50)] for p in range(6)
    }


def consume_all(
    cluster: EmbeddedCluster, topic: str, partitions: int, total: int
) -> dict[int, list[str]]:
    """Every value of ``topic`` by partition, read from the start until ``total`` arrived."""
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "unused",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    seen: dict[int, list[str]] = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + 30
    try:
        while sum(map(len, seen.values())) < total and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen[message.partition()].append(message.value().decode())
    finally:
        consumer.close()
    return seen


def test_a_broker_that_does_not_lead_answers_not_leader_or_follower(odradek_cluster, admin):
    leader = partition_metadata(admin, "spread")[0].leader
    other = next(n for n in odradek_cluster.brokers if n != leader)
    wrong = WireClient(odradek_cluster.broker(other).bootstrap_servers)
    right = WireClient(odradek_cluster.broker(leader).bootstrap_servers)
    try:
        response = wrong.call(produce_request("spread", _batch(b"x")))
        assert response.responses[0].partition_responses[0].error_code == (
            ErrorCode.not_leader_or_follower
        )
        fetched = wrong.call(fetch_request("spread", 0, 0))
        assert fetched.responses[0].partitions[0].error_code == ErrorCode.not_leader_or_follower
        response = right.call(produce_request("spread", _batch(b"x")))
        assert response.responses[0].partition_responses[0].error_code == ErrorCode.none
    finally:
        wrong.close()
        right.close()


def test_brokers_hand_out_producer_ids_from_distinct_blocks(odradek_cluster, zk):
    """Every broker answers InitProducerId; ids come from /latest_producer_id_block, so two
    brokers never hand out the same id (idempotence would mistake one producer's batches
    for the other's)."""
    ids = []
    for node, broker in odradek_cluster.brokers.items():
        client = WireClient(broker.bootstrap_servers)
        try:
            for _ in range(2):
                response = client.call(
                    init_producer_id4.InitProducerIdRequest(
                        transactional_id=None,
                        transaction_timeout=timedelta(seconds=60),
                        producer_id=-1,
                        producer_epoch=-1,
                    )
                )
                assert response.error_code == ErrorCode.none
                ids.append((node, int(response.producer_id)))
        finally:
            client.close()
    assert len({pid for _, pid in ids}) == len(ids)
    blocks = {pid // 1000 for _, pid in ids}
    assert len(blocks) == 3, "each broker takes a block of its own"
    block = read_json(zk, layout.PRODUCER_ID_BLOCK)
    assert block["version"] == 1 and block["broker"] in (1, 2, 3)
    assert int(block["block_end"]) - int(block["block_start"]) == 999
    assert int(block["block_end"]) == max(ids, key=lambda i: i[1])[1] // 1000 * 1000 + 999


def test_cluster_wide_broker_config_reaches_every_broker(odradek_cluster, zk, admin):
    """A dynamic cluster default written to ZooKeeper as Kafka's tools write it
    (/config/brokers/<default> plus a change notification) applies on every broker from its
    watch: message.max.bytes limits the partitions each leads."""
    create(admin, NewTopic("limits", 1, 1))
    leader = partition_metadata(admin, "limits")[0].leader

    def write_default(configs: dict[str, str]) -> None:
        zk.set(layout.broker_config_path(""), layout.encode_config(configs))
        zk.create(
            f"{layout.CONFIG_CHANGES}/{layout.CONFIG_CHANGE_PREFIX}",
            layout.encode_config_change("brokers", layout.DEFAULT_BROKER_ENTITY),
            sequence=True,
        )

    def produce_error() -> ErrorCode:
        client = WireClient(odradek_cluster.broker(leader).bootstrap_servers)
        try:
            response = client.call(produce_request("limits", _batch(b"y" * 300)))
        finally:
            client.close()
        return response.responses[0].partition_responses[0].error_code

    zk.ensure_path(layout.broker_config_path(""))
    write_default({"message.max.bytes": "100"})
    try:
        wait_until(lambda: produce_error() == ErrorCode.message_too_large, what="the limit")
    finally:
        write_default({})
    wait_until(lambda: produce_error() == ErrorCode.none, what="the limit to be lifted")


def created_led_by_second_replica(zk: KazooClient, admin: AdminClient, topic: str) -> list[int]:
    """A new topic of one partition and two replicas whose second replica leads, as if a
    failover had moved leadership there (the state znode written at leader epoch 1); its
    replicas."""
    create(admin, NewTopic(topic, 1, 2))
    replicas = read_json(zk, layout.topic_path(topic))["partitions"]["0"]
    path = layout.state_path(topic, 0)
    data, stat = zk.get(path)
    moved = {**json.loads(data), "leader": replicas[1], "leader_epoch": 1}
    zk.set(path, json.dumps(moved).encode(), version=stat.version)
    wait_until(lambda: partition_metadata(admin, topic)[0].leader == replicas[1])
    return replicas


def test_the_controller_serves_elections_and_reorders(odradek_cluster, zk, admin):
    """ElectLeaders and AlterPartitionReassignments reach the active controller: a preferred
    election is a fenced write of the partition state; a reassignment of the same replicas
    rewrites their order at once (moving data: test_controller_operations)."""
    replicas = created_led_by_second_replica(zk, admin, "electable")
    path = layout.state_path("electable", 0)

    tp = TopicPartition("electable", 0)
    assert admin.elect_leaders(ElectionType.PREFERRED, [tp]).result(10) == {tp: None}
    state = read_json(zk, path)
    assert (state["leader"], state["leader_epoch"]) == (replicas[0], 2)
    assert state["controller_epoch"] == int(zk.get(layout.CONTROLLER_EPOCH)[0])

    client = KafkaAdminClient(bootstrap_servers=odradek_cluster.bootstrap_servers)
    try:
        ktp = KafkaTopicPartition("electable", 0)
        assert client.alter_partition_reassignments({ktp: replicas[::-1]}) == {ktp: None}
        assert read_json(zk, layout.topic_path("electable"))["partitions"]["0"] == replicas[::-1]
        assert client.list_partition_reassignments() == {}
    finally:
        client.close()


def gone(zk: KazooClient, path: str) -> bool:
    return zk.exists(path) is None


def test_tool_written_preferred_replica_election(zk, admin):
    """/admin/preferred_replica_election as the ZooKeeper-era tool wrote it: the controller
    elects the first replica of each partition listed (an unknown one is skipped) and
    deletes the request."""
    replicas = created_led_by_second_replica(zk, admin, "tool-elected")
    path = layout.state_path("tool-elected", 0)
    request = [("tool-elected", 0), ("no-such-topic", 0)]
    zk.create(layout.PREFERRED_REPLICA_ELECTION, layout.encode_preferred_replica_election(request))
    wait_until(lambda: gone(zk, layout.PREFERRED_REPLICA_ELECTION), what="the request deleted")
    state = read_json(zk, path)
    assert (state["leader"], state["leader_epoch"]) == (replicas[0], 2)
    wait_until(lambda: partition_metadata(admin, "tool-elected")[0].leader == replicas[0])


def test_tool_written_partition_reassignment(odradek_cluster, zk, admin):
    """/admin/reassign_partitions as kafka-reassign-partitions.sh --zookeeper wrote it: the
    controller moves the partition and its data, drops what cannot be done, and deletes the
    request once nothing is left in it; a request that is not Kafka's JSON is deleted."""
    create(admin, NewTopic("tool-moved", 1, 1))
    (source,) = read_json(zk, layout.topic_path("tool-moved"))["partitions"]["0"]
    target = next(n for n in odradek_cluster.brokers if n != source)
    p = Producer({"bootstrap.servers": odradek_cluster.bootstrap_servers, "acks": "all"})
    for i in range(200):
        p.produce("tool-moved", str(i).encode(), partition=0)
    assert p.flush(30) == 0
    request = {("tool-moved", 0): [target], ("no-such-topic", 0): [1], ("electable", 0): [9]}
    zk.create(layout.REASSIGN_PARTITIONS, layout.encode_reassign_partitions(request))
    wait_until(lambda: gone(zk, layout.REASSIGN_PARTITIONS), what="the request deleted")
    # Deleted only once the move was complete.
    assignment = read_json(zk, layout.topic_path("tool-moved"))
    assert assignment["partitions"]["0"] == [target]
    assert (assignment["adding_replicas"], assignment["removing_replicas"]) == ({}, {})
    wait_until(lambda: partition_metadata(admin, "tool-moved")[0].leader == target)
    assert consume_all(odradek_cluster, "tool-moved", 1, 200) == {0: [str(i) for i in range(200)]}
    zk.create(layout.REASSIGN_PARTITIONS, b"not json")
    wait_until(lambda: gone(zk, layout.REASSIGN_PARTITIONS), what="the bad request deleted")


def metadata_v12(cluster: EmbeddedCluster, node: int, topic: str):
    client = WireClient(cluster.broker(node).bootstrap_servers)
    try:
        return client.call(metadata_request(topic))
    finally:
        client.close()


def test_killed_controller_fails_over(odradek_cluster, zk, admin):
    controller = read_json(zk, layout.CONTROLLER)["brokerid"]
    epoch = int(zk.get(layout.CONTROLLER_EPOCH)[0])
    led = {p for p, m in partition_metadata(admin, "spread").items() if m.leader == controller}
    survivor = next(n for n in odradek_cluster.brokers if n != controller)

    odradek_cluster.kill(controller)
    wait_until(
        lambda: str(controller) not in zk.get_children(layout.BROKER_IDS),
        timeout=SESSION_TIMEOUT_MS / 1000 + 30,
        what="the killed broker's session to end",
    )

    def new_controller() -> int | None:
        try:
            node = read_json(zk, layout.CONTROLLER)["brokerid"]
        except Exception:
            return None
        return node if node != controller else None

    successor = wait_until(new_controller, what="a new controller")
    assert int(zk.get(layout.CONTROLLER_EPOCH)[0]) > epoch

    def states_written() -> bool:
        return all(read_json(zk, layout.state_path("spread", p))["leader"] == -1 for p in led)

    wait_until(states_written, what="the new controller to take the partitions offline")

    def survivor_view():
        # The survivor's image follows ZooKeeper through its watches, a moment later.
        response = metadata_v12(odradek_cluster, survivor, "spread")
        partitions = {p.partition_index: p for p in response.topics[0].partitions}
        offline = {p for p, m in partitions.items() if m.leader_id == -1}
        return (response, partitions) if offline == led else None

    response, partitions = wait_until(survivor_view, what="the survivor's metadata")
    assert response.controller_id == successor
    assert sorted(b.node_id for b in response.brokers) == sorted(
        n for n in odradek_cluster.brokers if n != controller
    )
    for p in led:
        assert partitions[p].error_code == ErrorCode.leader_not_available
        assert list(partitions[p].offline_replicas) == [controller]
        # RF=1: the ISR keeps its last member, so the partition is electable on its return.
        state = read_json(zk, layout.state_path("spread", p))
        assert state["leader"] == -1 and state["isr"] == [controller]
        assert state["controller_epoch"] == int(zk.get(layout.CONTROLLER_EPOCH)[0])

    odradek_cluster.start_broker(controller)
    wait_until(
        lambda: all(
            m.leader == controller
            for p, m in partition_metadata(admin, "spread").items()
            if p in led
        ),
        what="the restarted broker to lead its partitions again",
    )
    # Acknowledged records of the killed broker's partitions are all there after its return
    # (partition 0 also holds the record of the NOT_LEADER_OR_FOLLOWER test).
    consumed = consume_all(odradek_cluster, "spread", 6, 301)
    assert {p: len(values) for p, values in consumed.items()} == {
        p: 51 if p == 0 else 50 for p in range(6)
    }
    assert consumed == {
        p: [f"{p}-{i}" for i in range(50)] + (["x"] if p == 0 else []) for p in range(6)
    }
