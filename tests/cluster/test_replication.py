"""Replication in a real 3-broker cluster: followers copy their leaders, the ISR follows who keeps
up, acks=all waits for it, and a killed leader loses nothing that was acknowledged.

One cluster for the module (the tests run in order and leave every broker running); the
followers' lag limit is short so that a paused broker leaves the ISR within seconds.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafkajs.runner import Producing, needs_kafkajs, run_kafkajs

from odradek.server.embedded_cluster import EmbeddedCluster
from tests.cluster.test_cluster import consume_all, create, partition_metadata, wait_until

LAG_MS = 2000


@pytest.fixture(scope="module")
def odradek_cluster_config() -> dict[str, str]:
    return {
        "zookeeper.session.timeout.ms": "6000",
        "replica.lag.time.max.ms": str(LAG_MS),
        # KafkaJS reads back through a group: its first join without Kafka's 3 s delay.
        "group.initial.rebalance.delay.ms": "0",
    }


@pytest.fixture(scope="module")
def admin(odradek_cluster: EmbeddedCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": odradek_cluster.bootstrap_servers})


def leader_and_isr(admin: AdminClient, topic: str) -> tuple[int, set[int]]:
    (meta,) = partition_metadata(admin, topic).values()
    return meta.leader, set(meta.isrs)


def log_bytes(cluster: EmbeddedCluster, node: int, topic: str) -> bytes:
    """Every segment of ``topic``-0 on broker ``node``, in offset order."""
    directory = Path(cluster.broker(node).data_dir) / f"{topic}-0"
    return b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))


def producer(cluster: EmbeddedCluster, **extra: object) -> Producer:
    return Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            **extra,
        }
    )


def produce_numbered(p: Producer, topic: str, first: int, count: int) -> list[int]:
    """Produce ``first`` .. ``first + count - 1``; the values acknowledged without error."""
    acked: list[int] = []

    def delivered(err, msg) -> None:
        if err is None:
            acked.append(int(msg.value()))

    for i in range(first, first + count):
        p.produce(topic, str(i).encode(), partition=0, on_delivery=delivered)
        p.poll(0)
    assert p.flush(60) == 0
    return acked


def test_followers_hold_the_leaders_log_byte_for_byte(odradek_cluster, admin):
    create(admin, NewTopic("replicated", 1, 3, config={"min.insync.replicas": "2"}))
    acked = produce_numbered(producer(odradek_cluster), "replicated", 0, 3000)
    assert acked == list(range(3000))
    assert consume_all(odradek_cluster, "replicated", 1, 3000) == {0: [str(i) for i in range(3000)]}
    leader, isr = leader_and_isr(admin, "replicated")
    assert isr == {1, 2, 3}
    expected = log_bytes(odradek_cluster, leader, "replicated")
    assert expected
    for node in (1, 2, 3):
        # Same batches at the same positions: offsets, leader epochs and CRCs as the leader wrote.
        wait_until(
            lambda node=node: log_bytes(odradek_cluster, node, "replicated") == expected,
            what=f"broker {node}'s copy",
        )


def at(cluster: EmbeddedCluster, node: int) -> AdminClient:
    """An admin client that asks only ``node`` (a paused broker would stall the others)."""
    return AdminClient({"bootstrap.servers": cluster.broker(node).bootstrap_servers})


@needs_kafkajs
def test_kafkajs_produces_to_each_leader_and_reads_back(odradek_cluster):
    seen = run_kafkajs("replicated", odradek_cluster.bootstrap_servers, "kafkajs-rf3", "kafkajs-g")
    assert seen["values"] == sorted(f"replicated-{i}" for i in range(30))
    brokers = seen["brokers"]
    assert len(brokers) == 3
    assert all(p["replicas"] == brokers and p["isr"] == brokers for p in seen["partitions"])
    # Kafka's assignment leads three partitions from three brokers: KafkaJS wrote to all three.
    assert sorted(p["leader"] for p in seen["partitions"]) == brokers


def test_a_paused_follower_leaves_the_isr_and_rejoins(odradek_cluster, admin):
    leader, _ = leader_and_isr(admin, "replicated")
    follower = next(n for n in (1, 2, 3) if n != leader)
    leader_admin = at(odradek_cluster, leader)
    odradek_cluster.pause(follower)
    try:
        # acks=all waits for the ISR; the leader drops the paused follower once it has not
        # caught up for replica.lag.time.max.ms, then two in-sync replicas satisfy
        # min.insync.replicas=2 and the records are acknowledged.
        p = producer(
            odradek_cluster, **{"bootstrap.servers": leader_admin_servers(odradek_cluster, leader)}
        )
        assert produce_numbered(p, "replicated", 3000, 100) == list(range(3000, 3100))
        # The ISR change reaches the metadata through the state znode's watch, a moment
        # after the leader saw it committed.
        wait_until(
            lambda: leader_and_isr(leader_admin, "replicated")[1] == {1, 2, 3} - {follower},
            timeout=10,
            what="the metadata to show the shrunk ISR",
        )
        # The leader took it out, not the controller: the paused broker's ZooKeeper session
        # (6 s) has not ended, it is still registered.
        assert follower in leader_admin.list_topics(timeout=10).brokers
    finally:
        odradek_cluster.resume(follower)
    wait_until(
        lambda: leader_and_isr(leader_admin, "replicated")[1] == {1, 2, 3},
        what="the follower to catch up and rejoin the ISR",
    )


def leader_admin_servers(cluster: EmbeddedCluster, node: int) -> str:
    return cluster.broker(node).bootstrap_servers


def test_too_few_in_sync_replicas_refuse_acks_all(odradek_cluster, admin):
    leader, _ = leader_and_isr(admin, "replicated")
    followers = [n for n in (1, 2, 3) if n != leader]
    leader_admin = at(odradek_cluster, leader)
    for node in followers:
        odradek_cluster.pause(node)
    try:
        # A record with acks=1 is acknowledged by the leader alone; the followers, paused,
        # fall behind it and leave the ISR after replica.lag.time.max.ms.
        one = Producer(
            {"bootstrap.servers": leader_admin_servers(odradek_cluster, leader), "acks": 1}
        )
        one.produce("replicated", b"acks-1", partition=0)
        assert one.flush(30) == 0
        wait_until(
            lambda: leader_and_isr(leader_admin, "replicated")[1] == {leader},
            what="both followers to leave the ISR",
        )
        # No retries, so the broker's answer reaches the delivery report as it is: refused
        # before it is appended, with one in-sync replica under min.insync.replicas=2.
        p = Producer(
            {
                "bootstrap.servers": leader_admin_servers(odradek_cluster, leader),
                "acks": "all",
                "retries": 0,
            }
        )
        errors: list[KafkaError] = []
        p.produce("replicated", b"refused", partition=0, on_delivery=lambda e, m: errors.append(e))
        assert p.flush(30) == 0
        assert [e.code() for e in errors] == [KafkaError.NOT_ENOUGH_REPLICAS]
    finally:
        for node in followers:
            odradek_cluster.resume(node)
    wait_until(
        lambda: leader_and_isr(leader_admin, "replicated")[1] == {1, 2, 3},
        what="the followers to rejoin",
    )
    values = consume_all(odradek_cluster, "replicated", 1, 3101)[0]
    # Nothing acknowledged is lost (the acks=1 record too: the leader never changed), the
    # refused one was never written.
    assert values == [str(i) for i in range(3100)] + ["acks-1"]


def test_killing_the_leader_loses_no_acknowledged_record(odradek_cluster, admin):
    create(admin, NewTopic("failover", 1, 3, config={"min.insync.replicas": "2"}))
    leader, _ = leader_and_isr(admin, "failover")
    p = producer(odradek_cluster, **{"delivery.timeout.ms": 60000})
    acked: list[int] = []
    errors: list[KafkaError] = []
    stop = threading.Event()

    def delivered(err, msg) -> None:
        (errors if err is not None else acked).append(err or int(msg.value()))

    def produce_until_stopped() -> None:
        i = 0
        while not stop.is_set():
            try:
                p.produce("failover", str(i).encode(), partition=0, on_delivery=delivered)
                i += 1
            except (BufferError, KafkaException):
                pass
            p.poll(0.001)
        p.flush(60)

    writer = threading.Thread(target=produce_until_stopped)
    writer.start()
    try:
        wait_until(lambda: len(acked) > 2000, what="records acknowledged before the kill")
        odradek_cluster.kill(leader)
        killed_at = len(acked)
        wait_until(
            lambda: len(acked) > killed_at + 2000,
            timeout=60,
            what="producing to resume on the new leader",
        )
    finally:
        stop.set()
        writer.join(90)
    new_leader, _ = leader_and_isr(admin, "failover")
    assert new_leader not in (leader, -1)
    assert errors == []
    odradek_cluster.restart(leader)
    values = [int(v) for v in consume_all(odradek_cluster, "failover", 1, len(acked))[0]]
    # Every record was acknowledged (flush waited for all), and the idempotent producer keeps
    # order and never duplicates, even across the failover.
    assert values == sorted(acked) == list(range(len(acked)))
    wait_until(
        lambda: leader_and_isr(admin, "failover")[1] == {1, 2, 3},
        what="the restarted broker to catch up",
    )
    expected = log_bytes(odradek_cluster, new_leader, "failover")
    wait_until(
        lambda: log_bytes(odradek_cluster, leader, "failover") == expected,
        what="the old leader's copy to equal the new leader's",
    )


@needs_kafkajs
def test_kafkajs_produces_through_a_leader_failover(odradek_cluster, admin):
    create(admin, NewTopic("kafkajs-failover", 1, 3, config={"min.insync.replicas": "2"}))
    leader, _ = leader_and_isr(admin, "kafkajs-failover")
    with Producing(odradek_cluster.bootstrap_servers, "kafkajs-failover") as kafkajs:
        wait_until(lambda: kafkajs.acked >= 200, what="KafkaJS acknowledgements before the kill")
        odradek_cluster.kill(leader)
        killed_at = kafkajs.acked
        wait_until(
            lambda: kafkajs.acked >= killed_at + 200,
            timeout=60,
            what="KafkaJS producing to the new leader",
        )
        result = kafkajs.stop()
    assert result["errors"] == []
    assert leader_and_isr(admin, "kafkajs-failover")[0] not in (leader, -1)
    odradek_cluster.restart(leader)
    values = consume_all(odradek_cluster, "kafkajs-failover", 1, result["acked"])[0]
    # Each record acknowledged once, in order: KafkaJS's idempotent retries across the leader
    # change were neither lost nor written twice.
    assert [int(v) for v in values] == list(range(result["acked"]))
    wait_until(
        lambda: leader_and_isr(admin, "kafkajs-failover")[1] == {1, 2, 3},
        what="the restarted broker to catch up",
    )
