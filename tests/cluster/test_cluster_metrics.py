"""/metrics of a real 3-broker cluster: one active controller, a paused follower seen by its
leader as an ISR shrink, an under-replicated partition and, once it catches up, an expansion,
and the bytes followers fetch counted as replication bytes, never as consumers' bytes out."""

from __future__ import annotations

import time
import urllib.request

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from odradek.server.embedded_cluster import EmbeddedCluster
from tests.cluster.test_cluster import create, wait_until
from tests.cluster.test_replication import leader_and_isr, produce_numbered, producer

LAG_MS = 2000


@pytest.fixture(scope="module")
def odradek_cluster_config() -> dict[str, str]:
    return {
        "zookeeper.session.timeout.ms": "6000",
        "replica.lag.time.max.ms": str(LAG_MS),
        "metrics.http.listener": "127.0.0.1:0",
    }


def samples(cluster: EmbeddedCluster, node: int, name: str) -> dict[frozenset, float]:
    """The samples ``name`` on broker ``node``: their labels (as items) -> value."""
    url = cluster.broker(node).metrics_url
    assert url is not None
    with urllib.request.urlopen(url, timeout=30) as response:
        body = response.read().decode()
    return {
        frozenset(sample.labels.items()): sample.value
        for family in text_string_to_metric_families(body)
        for sample in family.samples
        if sample.name == name
    }


def gauge(cluster: EmbeddedCluster, node: int, name: str) -> float:
    """The value of the unlabelled sample ``name`` on broker ``node``."""
    found = samples(cluster, node, name)
    assert frozenset() in found, f"{name} not on broker {node}"
    return found[frozenset()]


def test_exactly_one_broker_is_the_active_controller(odradek_cluster):
    active = "kafka_controller_kafkacontroller_active_controller_count"
    wait_until(
        lambda: sum(gauge(odradek_cluster, n, active) for n in (1, 2, 3)) == 1,
        what="one active controller",
    )


def test_a_paused_follower_shows_in_its_leaders_isr_metrics(odradek_cluster):
    admin = AdminClient({"bootstrap.servers": odradek_cluster.bootstrap_servers})
    create(admin, NewTopic("metered", 1, 3, config={"min.insync.replicas": "2"}))
    assert produce_numbered(producer(odradek_cluster), "metered", 0, 100) == list(range(100))
    wait_until(lambda: leader_and_isr(admin, "metered")[1] == {1, 2, 3}, what="a full ISR")
    leader, _ = leader_and_isr(admin, "metered")
    prefix = "kafka_server_replicamanager_"
    shrinks = gauge(odradek_cluster, leader, prefix + "isr_shrinks_total")
    expands = gauge(odradek_cluster, leader, prefix + "isr_expands_total")
    assert gauge(odradek_cluster, leader, prefix + "under_replicated_partitions") == 0
    follower = next(n for n in (1, 2, 3) if n != leader)
    leader_only = {"bootstrap.servers": odradek_cluster.broker(leader).bootstrap_servers}
    odradek_cluster.pause(follower)
    try:
        # acks=all completes once the leader has dropped the paused follower from the ISR.
        p = producer(odradek_cluster, **leader_only)
        assert produce_numbered(p, "metered", 100, 10) == list(range(100, 110))
        assert gauge(odradek_cluster, leader, prefix + "isr_shrinks_total") >= shrinks + 1
        assert gauge(odradek_cluster, leader, prefix + "under_replicated_partitions") >= 1
    finally:
        odradek_cluster.resume(follower)
    wait_until(
        lambda: gauge(odradek_cluster, leader, prefix + "isr_expands_total") >= expands + 1,
        what="the follower to rejoin the ISR",
    )
    wait_until(
        lambda: gauge(odradek_cluster, leader, prefix + "under_replicated_partitions") == 0,
        what="no under-replicated partition",
    )


def test_follower_fetches_are_replication_bytes_not_bytes_out(odradek_cluster):
    admin = AdminClient({"bootstrap.servers": odradek_cluster.bootstrap_servers})
    prefix = "kafka_server_brokertopicmetrics_"
    out, r_out, r_in = (
        prefix + n for n in ("bytes_out", "replication_bytes_out", "replication_bytes_in")
    )
    before = {
        n: (gauge(odradek_cluster, n, r_out + "_total"), gauge(odradek_cluster, n, r_in + "_total"))
        for n in (1, 2, 3)
    }
    create(admin, NewTopic("replicated-bytes", 1, 3))
    assert produce_numbered(producer(odradek_cluster), "replicated-bytes", 0, 200) == list(
        range(200)
    )
    leader, _ = leader_and_isr(admin, "replicated-bytes")
    followers = [n for n in (1, 2, 3) if n != leader]
    end = "kafka_log_log_log_end_offset"
    key = frozenset({"topic": "replicated-bytes", "partition": "0"}.items())
    for node in followers:
        wait_until(
            lambda node=node: samples(odradek_cluster, node, end).get(key) == 200,
            what=f"broker {node} to have the 200 records",
        )
    topic = frozenset({"topic": "replicated-bytes"}.items())
    appended = samples(odradek_cluster, leader, prefix + "bytes_in_total")[topic]
    assert appended > 200
    # Both followers fetched every byte from the leader (maybe some twice, and other topics'
    # replication runs meanwhile: at least); no consumer read the topic, so no bytes out.
    assert gauge(odradek_cluster, leader, r_out + "_total") - before[leader][0] >= 2 * appended
    assert samples(odradek_cluster, leader, out + "_total")[topic] == 0
    for node in followers:
        assert gauge(odradek_cluster, node, r_in + "_total") - before[node][1] >= appended
    # The leader timed its followers' fetches as FetchFollower (as well as Fetch).
    requests = samples(odradek_cluster, leader, "kafka_network_requestmetrics_requests_total")
    assert sum(v for labels, v in requests.items() if ("request", "FetchFollower") in labels) > 0
    # As in Kafka, replication bytes have an all-topics series only.
    for node in (1, 2, 3):
        for name in (r_out, r_in):
            assert list(samples(odradek_cluster, node, name + "_total")) == [frozenset()]


def test_idle_followers_long_poll_in_their_fetch_sessions(odradek_cluster):
    # Each broker follows about 33 partitions of __consumer_offsets from the two others. In a
    # fetch session (KIP-227) a quiet round names none of them, and the leader holds the fetch
    # for replica.fetch.wait.max.ms (500): some 2 fetches per second per follower and leader.
    # A follower whose session on the leader lacks its partitions (refused while the leader
    # did not know their topic yet) would be answered at once, thousands of times a second.
    def follower_fetches() -> float:
        return sum(
            value
            for node in (1, 2, 3)
            for labels, value in samples(
                odradek_cluster, node, "kafka_network_requestmetrics_requests_total"
            ).items()
            if ("request", "FetchFollower") in labels
        )

    before = follower_fetches()
    time.sleep(3)
    # Six follower-leader pairs: about 36 fetches in 3 s; 200 allows for records arriving.
    assert follower_fetches() - before < 200
