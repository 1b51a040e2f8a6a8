"""Replicas across a leader's death and return, and the brokers' stop, in a real 3-broker cluster.

Its own module, so its own cluster: the lag limit is the default here (the followers
must stay in the ISR while paused, so that one of them can be elected), unlike in
test_replication. The tests run in order.

Pausing a follower does not stop it copying at once: the fetch it sent before the pause
waits in its leader's purgatory (up to replica.fetch.wait.max.ms), and the first append
answers it with records that the kernel keeps in the paused follower's socket, to be
appended as soon as it resumes. So after pausing the followers the test waits until the
leader's Fetch purgatory is empty (its metrics): their last fetches are answered, with
nothing, and the tail it then appends reaches nobody.

A leader's tail that no follower copied is cut off when it comes back as a follower
(KIP-101): both followers paused, the leader appends records with acks=1 that nobody
copies, it is killed, a follower becomes leader and takes new records at the same
offsets; when the old leader restarts it asks its new leader where its last epoch
ended, truncates the divergent tail and copies the new records, so every replica
holds the same log and no reader ever sees the lost records.

Then all brokers stop at once, as ``EmbeddedCluster.stop`` and ``odradek cluster up``
stop them: each must shut down cleanly although its leaders and followers leave
under it.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.server.embedded_cluster import EmbeddedCluster
from tests.cluster.test_cluster import consume_all, create, wait_until
from tests.cluster.test_cluster_metrics import samples
from tests.cluster.test_replication import leader_and_isr, log_bytes, produce_numbered, producer

TOPIC = "diverging"


@pytest.fixture(scope="module")
def odradek_cluster_config() -> dict[str, str]:
    return {"zookeeper.session.timeout.ms": "6000", "metrics.http.listener": "127.0.0.1:0"}


def fetches_waiting(cluster: EmbeddedCluster, node: int) -> float:
    """Fetches held in broker ``node``'s purgatory: consumers' and followers' long polls."""
    purgatory = "kafka_server_delayedoperationpurgatory_num_delayed_operations"
    return samples(cluster, node, purgatory)[frozenset({("delayed_operation", "Fetch")})]


@pytest.fixture(scope="module")
def admin(odradek_cluster: EmbeddedCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": odradek_cluster.bootstrap_servers})


def test_a_returning_leader_truncates_the_tail_nobody_copied(odradek_cluster, admin):
    cluster = odradek_cluster
    create(admin, NewTopic(TOPIC, 1, 3))
    assert produce_numbered(producer(cluster), TOPIC, 0, 100) == list(range(100))
    old_leader, isr = leader_and_isr(admin, TOPIC)
    assert isr == {1, 2, 3}
    followers = [n for n in (1, 2, 3) if n != old_leader]
    committed = log_bytes(cluster, old_leader, TOPIC)
    for node in followers:
        wait_until(lambda node=node: log_bytes(cluster, node, TOPIC) == committed, what="copies")

    for node in followers:
        cluster.pause(node)
    try:
        # The followers' last fetches answered (empty): none is left to carry the tail.
        wait_until(lambda: fetches_waiting(cluster, old_leader) == 0, what="the followers' fetches")
        # acks=1: the leader alone acknowledges; nobody copies these. (Quickly: paused
        # longer than their ZooKeeper sessions, the followers would be taken out of the ISR
        # by the controller, and then no replica could be elected after the kill.)
        alone = Producer(
            {"bootstrap.servers": cluster.broker(old_leader).bootstrap_servers, "acks": 1}
        )
        for i in range(500, 550):
            alone.produce(TOPIC, str(i).encode(), partition=0)
        assert alone.flush(30) == 0
        cluster.kill(old_leader)
    finally:
        for node in followers:
            cluster.resume(node)
    diverged = log_bytes(cluster, old_leader, TOPIC)
    assert len(diverged) > len(committed), "the dead leader holds a tail nobody copied"

    # Asked of a survivor: an admin client that knew the dead broker may time out on it.
    survivor = AdminClient({"bootstrap.servers": cluster.broker(followers[0]).bootstrap_servers})
    new_leader = wait_until(
        lambda: (leader := leader_and_isr(survivor, TOPIC)[0]) in followers and leader,
        what="a follower to be elected",
    )
    # The new leader writes other records at the offsets the lost tail had.
    assert produce_numbered(producer(cluster), TOPIC, 1000, 20) == list(range(1000, 1020))

    cluster.start_broker(old_leader)
    wait_until(
        lambda: leader_and_isr(admin, TOPIC)[1] == {1, 2, 3}, what="the old leader to rejoin"
    )
    expected = log_bytes(cluster, new_leader, TOPIC)
    wait_until(
        lambda: all(log_bytes(cluster, n, TOPIC) == expected for n in (1, 2, 3)),
        what="every replica to hold the new leader's log",
    )
    values = consume_all(cluster, TOPIC, 1, 120)[0]
    assert values == [str(i) for i in range(100)] + [str(i) for i in range(1000, 1020)]


def test_the_brokers_stop_cleanly_together(odradek_cluster):
    # In parallel, as EmbeddedCluster.stop does; a broker whose shutdown hangs is killed
    # after the timeout, and its exit status is then -9 instead of 0.
    brokers = [odradek_cluster.broker(n) for n in (1, 2, 3)]
    with ThreadPoolExecutor(len(brokers)) as pool:
        statuses = list(pool.map(lambda b: b.stop(timeout=60), brokers))
    assert statuses == [0, 0, 0]
