"""The controller's planned moves in a real 3-broker cluster: controlled shutdown (a rolling
restart under acks=all load), auto leader rebalance, partition reassignment (data moved,
progress listed, cancellation), and the cluster riding out a ZooKeeper restart.

One cluster for the module; the tests run in order and leave every broker running. The
rebalance check runs every second so that a preferred leader gets its partitions back
within the test, and at any imbalance: with Kafka's 10 %, a returning broker whose
leaderships come back over several checks (each moves the partitions whose ISR it has
rejoined by then) keeps the last tenth of them elsewhere, whichever those are.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient
from kafka import TopicPartition as KafkaTopicPartition
from kafka.errors import NotControllerError
from kazoo.client import KazooClient
from kazoo.protocol.states import ZnodeStat
from kazoo.recipe.watchers import DataWatch

from odradek.metadata import zk_layout as layout
from odradek.server.embedded_cluster import EmbeddedCluster
from tests.cluster.test_cluster import (
    consume_all,
    create,
    partition_metadata,
    read_json,
    wait_until,
)

PARTITIONS = 3
SESSION_TIMEOUT_S = 6


@pytest.fixture(scope="module")
def odradek_cluster_config() -> dict[str, str]:
    return {
        "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_S * 1000),
        "replica.lag.time.max.ms": "3000",
        "leader.imbalance.check.interval.seconds": "1",
        "leader.imbalance.per.broker.percentage": "0",
    }


@pytest.fixture(scope="module")
def admin(odradek_cluster: EmbeddedCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": odradek_cluster.bootstrap_servers})


def all_in_sync(admin: AdminClient, topic: str) -> bool:
    return all(
        set(p.isrs) == {1, 2, 3} and p.leader != -1
        for p in partition_metadata(admin, topic).values()
    )


def stop_cleanly(cluster: EmbeddedCluster, node: int) -> bool:
    """SIGTERM ``node``; True when it exited by itself with status 0 (its log tail if not)."""
    status = cluster.stop_broker(node)
    assert status == 0, "".join(cluster.broker(node).log_lines[-40:])
    return True


def watch_handovers(zk: KazooClient, topic: str, node: int) -> dict[int, int | None]:
    """For each partition of ``topic`` that ``node`` leads now, the zxid of the first write
    of its state naming another leader (None until then), filled in by ZooKeeper watches.

    The state read after the broker exits may be newer than the handover: a new leader
    shrinking its ISR under load, a preferred leader taking its partition back. A watch
    reads each version as it is notified, so the handover's own write is the one recorded.
    """
    handovers: dict[int, int | None] = {}

    def recorder(partition: int) -> Callable[[bytes | None, ZnodeStat | None, object], bool]:
        def seen(data: bytes | None, stat: ZnodeStat | None, _event: object) -> bool:
            if data is None or stat is None:
                return False
            if layout.decode_partition_state(data).leader in (node, -1):
                return True
            handovers[partition] = stat.mzxid
            return False  # the watch ends with the handover

        return seen

    for child in zk.get_children(layout.partitions_path(topic)):
        path = layout.state_path(topic, int(child))
        if layout.decode_partition_state(zk.get(path)[0]).leader == node:
            handovers[int(child)] = None
            DataWatch(zk, path, recorder(int(child)))
    return handovers


class NumberedWriter:
    """An idempotent acks=all producer writing numbered records round-robin over the
    partitions from a thread, recording what was acknowledged and every error it saw."""

    def __init__(self, cluster: EmbeddedCluster, topic: str) -> None:
        self.topic = topic
        self.acked: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
        self.failed: list[KafkaError] = []
        self.reported: list[KafkaError] = []
        self._producer = Producer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "delivery.timeout.ms": 120000,
                "error_cb": self.reported.append,
            }
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def _delivered(self, err: KafkaError | None, msg) -> None:
        if err is None:
            self.acked[msg.partition()].append(int(msg.value()))
        else:
            self.failed.append(err)

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            try:
                self._producer.produce(
                    self.topic,
                    str(i).encode(),
                    partition=i % PARTITIONS,
                    on_delivery=self._delivered,
                )
                i += 1
            except (BufferError, KafkaException):
                pass
            self._producer.poll(0.001)
        self._producer.flush(120)

    def count(self) -> int:
        return sum(map(len, self.acked.values()))

    def __enter__(self) -> NumberedWriter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(150)


def test_rolling_restart_moves_leaderships_before_each_broker_exits(odradek_cluster, admin, zk):
    create(admin, NewTopic("rolling", PARTITIONS, 3, config={"min.insync.replicas": "2"}))
    wait_until(lambda: all_in_sync(admin, "rolling"), what="every replica in sync")
    with NumberedWriter(odradek_cluster, "rolling") as writer:
        wait_until(lambda: writer.count() > 1000, what="records acknowledged before the restarts")
        for node in odradek_cluster.brokers:
            handovers = watch_handovers(zk, "rolling", node)
            before = writer.count()
            assert stop_cleanly(odradek_cluster, node)
            # The broker left /brokers/ids when its session closed: the last child change of
            # /brokers/ids. Every partition it led was handed over before that.
            deregistered = zk.exists(layout.BROKER_IDS).pzxid
            wait_until(
                lambda handovers=handovers: None not in handovers.values(),
                what=f"broker {node}'s partitions moved",
            )
            assert all(zxid < deregistered for zxid in handovers.values()), handovers
            wait_until(
                lambda before=before: writer.count() > before + 500,
                what=f"producing to continue while broker {node} is down",
            )
            odradek_cluster.start_broker(node)
            wait_until(
                lambda: all_in_sync(admin, "rolling"), what=f"broker {node} back in every ISR"
            )
        total = writer.count()
        wait_until(lambda: writer.count() > total + 500, what="producing after the restarts")
    # No delivery failed and no error was fatal: the producer only saw retriable ones.
    assert writer.failed == []
    assert not any(e.fatal() for e in writer.reported)
    seen = consume_all(odradek_cluster, "rolling", PARTITIONS, writer.count())
    for p in range(PARTITIONS):
        # In order, without duplicates or gaps, exactly what was acknowledged.
        assert [int(v) for v in seen[p]] == writer.acked[p]
        assert writer.acked[p] == list(range(p, p + PARTITIONS * len(writer.acked[p]), PARTITIONS))


def test_auto_rebalance_gives_the_preferred_leader_its_partitions_back(odradek_cluster, admin):
    create(admin, NewTopic("preferred", 6, 3))
    wait_until(lambda: all_in_sync(admin, "preferred"), what="every replica in sync")
    preferred = {p: m.replicas[0] for p, m in partition_metadata(admin, "preferred").items()}
    assert stop_cleanly(odradek_cluster, 1)
    wait_until(
        lambda: all(
            m.leader not in (1, -1) for m in partition_metadata(admin, "preferred").values()
        ),
        what="broker 1's leaderships on the others",
    )
    odradek_cluster.start_broker(1)
    wait_until(
        lambda: (
            {p: m.leader for p, m in partition_metadata(admin, "preferred").items()} == preferred
        ),
        what="leadership back on the preferred replicas",
    )


def reassign(client: KafkaAdminClient, tp: KafkaTopicPartition, target: list[int] | None) -> dict:
    """AlterPartitionReassignments, sent again on NOT_CONTROLLER as Kafka's AdminClient does
    (the error is retriable: a partition whose state changed while the controller wrote
    answers it, and so does a controller that just lost its role)."""
    deadline = time.monotonic() + 30
    while True:
        result = client.alter_partition_reassignments({tp: target})
        if result.get(tp) is not NotControllerError or time.monotonic() > deadline:
            return result
        time.sleep(0.2)


def test_reassignment_moves_the_partition_and_its_data(odradek_cluster, admin, zk):
    create(admin, NewTopic("moving", 1, 1))
    (source,) = read_json(zk, layout.topic_path("moving"))["partitions"]["0"]
    controller = read_json(zk, layout.CONTROLLER)["brokerid"]
    # The new replica is paused below, so it must not be the controller that serves the request.
    target = next(n for n in odradek_cluster.brokers if n not in (source, controller))
    p = Producer({"bootstrap.servers": odradek_cluster.bootstrap_servers, "acks": "all"})
    for i in range(500):
        p.produce("moving", str(i).encode(), partition=0)
    assert p.flush(30) == 0
    # Bootstrapped at the controller and connected before the pause: the admin client must
    # not pick the paused broker for its first requests (it would wait for its timeout,
    # long enough for the paused broker's session to expire).
    client = KafkaAdminClient(
        bootstrap_servers=odradek_cluster.broker(controller).bootstrap_servers
    )
    tp = KafkaTopicPartition("moving", 0)
    try:
        assert client.list_partition_reassignments() == {}
        # A paused target cannot catch up: the reassignment stays in progress until cancelled.
        odradek_cluster.pause(target)
        try:
            assert reassign(client, tp, [target]) == {tp: None}
            assert client.list_partition_reassignments() == {
                tp: {
                    "replicas": [target, source],
                    "adding_replicas": [target],
                    "removing_replicas": [source],
                }
            }
            assert read_json(zk, layout.topic_path("moving"))["adding_replicas"] == {"0": [target]}
            assert reassign(client, tp, None) == {tp: None}
            assert client.list_partition_reassignments() == {}
            assert read_json(zk, layout.topic_path("moving"))["partitions"]["0"] == [source]
        finally:
            odradek_cluster.resume(target)
        assert reassign(client, tp, [target]) == {tp: None}
        wait_until(
            lambda: (
                client.list_partition_reassignments() == {}
                and partition_metadata(admin, "moving")[0].replicas == [target]
            ),
            what="the reassignment to complete",
        )
    finally:
        client.close()
    meta = partition_metadata(admin, "moving")[0]
    assert (meta.leader, meta.isrs) == (target, [target])
    assert consume_all(odradek_cluster, "moving", 1, 500) == {0: [str(i) for i in range(500)]}
    # The broker the partition left deletes its log (renamed at once, removed later).
    assert not (odradek_cluster.broker(source).data_dir / "moving-0").exists()
    assert (odradek_cluster.broker(target).data_dir / "moving-0").exists()


def test_the_api_takes_a_partition_out_of_a_tool_written_reassignment(odradek_cluster, admin, zk):
    """A reassignment a ZooKeeper-era tool asked for in /admin/reassign_partitions is started
    by the controller and stays listed there while it moves; one through the API for the same
    partition wins (here a cancellation), and the request, then empty, is deleted."""
    create(admin, NewTopic("tool-overridden", 1, 1))
    (source,) = read_json(zk, layout.topic_path("tool-overridden"))["partitions"]["0"]
    controller = read_json(zk, layout.CONTROLLER)["brokerid"]
    target = next(n for n in odradek_cluster.brokers if n not in (source, controller))
    client = KafkaAdminClient(
        bootstrap_servers=odradek_cluster.broker(controller).bootstrap_servers
    )
    tp = KafkaTopicPartition("tool-overridden", 0)
    # Connected to the controller before the pause (see the test above).
    assert client.list_partition_reassignments() == {}
    odradek_cluster.pause(target)  # it cannot catch up: the move stays under way
    try:
        request = {("tool-overridden", 0): [target]}
        zk.create(layout.REASSIGN_PARTITIONS, layout.encode_reassign_partitions(request))
        wait_until(
            lambda: (
                client.list_partition_reassignments()
                == {
                    tp: {
                        "replicas": [target, source],
                        "adding_replicas": [target],
                        "removing_replicas": [source],
                    }
                }
            ),
            what="the controller to start the requested reassignment",
        )
        assert zk.exists(layout.REASSIGN_PARTITIONS) is not None
        assert reassign(client, tp, None) == {tp: None}
        wait_until(lambda: zk.exists(layout.REASSIGN_PARTITIONS) is None, what="request deleted")
        assert client.list_partition_reassignments() == {}
        assert read_json(zk, layout.topic_path("tool-overridden"))["partitions"]["0"] == [source]
    finally:
        odradek_cluster.resume(target)
        client.close()


def test_cluster_rides_out_a_zookeeper_restart(odradek_cluster, admin, zk):
    create(admin, NewTopic("through-outage", 1, 3, config={"min.insync.replicas": "2"}))
    wait_until(lambda: all_in_sync(admin, "through-outage"), what="every replica in sync")
    # A new partition's ISR is all its replicas from the start, so the metadata cannot say
    # whether each follower has learned of it yet; one acknowledged record says they fetch it.
    # (A follower still catching up with ZooKeeper when it stops never would, and without
    # ZooKeeper no one can take it out of the ISR: acks=all would wait out the outage.)
    p = Producer({"bootstrap.servers": odradek_cluster.bootstrap_servers, "acks": "all"})
    p.produce("through-outage", b"before", partition=0)
    assert p.flush(30) == 0
    epoch_before = int(zk.get(layout.CONTROLLER_EPOCH)[0])
    registrations = {n: zk.exists(layout.broker_path(n)).czxid for n in odradek_cluster.brokers}
    server = odradek_cluster.zookeeper_server
    assert server is not None
    server.stop()
    try:
        # Brokers keep serving what they lead: replication and acks=all need no ZooKeeper.
        # (Not idempotent: a broker may need a new producer id block, which ZooKeeper hands out.)
        for i in range(100):
            p.produce("through-outage", str(i).encode(), partition=0)
        assert p.flush(30) == 0
        assert consume_all(odradek_cluster, "through-outage", 1, 101) == {
            0: ["before"] + [str(i) for i in range(100)]
        }
    finally:
        server.start()
    # ZooKeeper restores its sessions from its data dir and the brokers reconnect to them
    # (an outage of any length: the restarted server times sessions from its start), so
    # the registrations and the controller are the ones from before; the cluster takes
    # new work.
    wait_until(lambda: zk.connected, what="the test's own session back")
    odradek_cluster.wait_for_brokers()
    now = {n: zk.exists(layout.broker_path(n)).czxid for n in odradek_cluster.brokers}
    assert now == registrations
    assert int(zk.get(layout.CONTROLLER_EPOCH)[0]) == epoch_before
    create(admin, NewTopic("after-outage", 1, 3))
    wait_until(lambda: all_in_sync(admin, "after-outage"), what="a new topic fully in sync")
    p = Producer({"bootstrap.servers": odradek_cluster.bootstrap_servers, "acks": "all"})
    p.produce("after-outage", b"x", partition=0)
    assert p.flush(30) == 0
    assert consume_all(odradek_cluster, "after-outage", 1, 1) == {0: ["x"]}


def test_a_broker_whose_session_expired_registers_again(odradek_cluster, admin, zk):
    """What a ZooKeeper outage that outlasts a session comes to for the broker: paused past
    its session timeout, the controller loses its registration and its controllership;
    resumed, it registers again under a new session and the cluster converges."""
    controller = read_json(zk, layout.CONTROLLER)["brokerid"]
    epoch_before = int(zk.get(layout.CONTROLLER_EPOCH)[0])
    registered = zk.exists(layout.broker_path(controller)).czxid
    odradek_cluster.pause(controller)
    try:
        wait_until(
            lambda: zk.exists(layout.broker_path(controller)) is None,
            timeout=SESSION_TIMEOUT_S * 3,
            what="the paused broker's session to expire",
        )
        wait_until(
            lambda: (
                int(zk.get(layout.CONTROLLER_EPOCH)[0]) > epoch_before
                and read_json(zk, layout.CONTROLLER)["brokerid"] != controller
            ),
            what="another controller elected",
        )
    finally:
        odradek_cluster.resume(controller)
    wait_until(
        lambda: (
            (stat := zk.exists(layout.broker_path(controller))) is not None
            and stat.czxid != registered
        ),
        what="the broker registered again",
    )
    odradek_cluster.wait_for_brokers()
    create(admin, NewTopic("after-expiry", 1, 3))
    wait_until(lambda: all_in_sync(admin, "after-expiry"), what="a new topic fully in sync")
