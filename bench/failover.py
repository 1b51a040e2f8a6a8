"""Failover time in a 3-broker cluster: how long acks=all producing waits when a leader goes.

Two events, each measured over several rounds (median, min and max printed):

- SIGKILL of the leader: the controller learns of it only when its ZooKeeper session
  expires (``zookeeper.session.timeout.ms``, Kafka's default 18000 unless
  ``--session-timeout-ms``), then elects from the ISR;
- SIGTERM of the leader: controlled shutdown moves the leadership before the broker
  exits, so producing should hardly pause.

The figure is the time from the signal to the first acks=all acknowledgement that came
from the new leader: records are produced one at a time (each waited for) by
confluent-kafka, and the first to count is one produced after the partition's state
znode named another leader (seen through a ZooKeeper watch), so acknowledgements the
old leader still gave during a controlled shutdown are not mistaken for the failover
(librdkafka's delivery reports carry no leader epoch to tell them apart). The time
from the signal to that znode change is printed too: the rest is the client finding
the new leader. After SIGKILL most of it is ZooKeeper's: it expires sessions in
buckets of its ``tickTime`` (2000 ms in the embedded server's config), so a session
ends between the timeout and one tick later. The killed or stopped broker is
started again, and the partition's replicas all back in sync, before the next round.

    .venv/bin/python bench/failover.py [--rounds 3] [--session-timeout-ms 18000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from odradek.metadata import zk_layout as layout
from odradek.server.embedded_cluster import EmbeddedCluster

TOPIC = "failover"


def leader_of(admin: AdminClient) -> tuple[int, set[int]]:
    partition = admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions[0]
    return partition.leader, set(partition.isrs)


def wait_in_sync(admin: AdminClient, timeout: float = 60.0) -> int:
    """The leader once every replica is in the ISR."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        leader, isr = leader_of(admin)
        if leader != -1 and isr == {1, 2, 3}:
            return leader
        time.sleep(0.1)
    raise TimeoutError("the replicas did not get back in sync")


def produce_one(producer: Producer) -> bool:
    """Produce one record and wait for it; True if it was acknowledged."""
    outcome: list[bool] = []
    producer.produce(TOPIC, b"x", partition=0, on_delivery=lambda err, _m: outcome.append(not err))
    while not outcome:
        producer.poll(0.01)
    return outcome[0]


def measure(
    cluster: EmbeddedCluster, admin: AdminClient, producer: Producer, zk: KazooClient, kill: bool
) -> tuple[float, float]:
    """(signal to the new leader in ZooKeeper, signal to its first acknowledgement), seconds."""
    leader = wait_in_sync(admin)
    assert produce_one(producer)
    moved = threading.Event()
    moved_at = [0.0]

    def watch(data, _stat, _event=None) -> bool | None:
        if data and layout.decode_partition_state(data).leader != leader:
            moved_at[0] = time.monotonic()
            moved.set()
            return False  # stop watching
        return None

    zk.DataWatch(layout.state_path(TOPIC, 0), watch)
    signalled = threading.Event()
    started = [0.0]

    def signal() -> None:
        started[0] = time.monotonic()
        signalled.set()
        if kill:
            cluster.kill(leader)
        else:
            cluster.stop_broker(leader)

    stopper = threading.Thread(target=signal)
    stopper.start()
    signalled.wait()
    while True:
        sent = time.monotonic()
        if produce_one(producer) and moved.is_set() and sent >= moved_at[0]:
            elapsed = time.monotonic() - started[0]
            break
    stopper.join()
    cluster.start_broker(leader)
    return moved_at[0] - started[0], elapsed


def summary(name: str, rounds: list[tuple[float, float]]) -> str:
    lines = []
    for label, times in (
        ("new leader in ZooKeeper", [r[0] for r in rounds]),
        ("first acks=all ack", [r[1] for r in rounds]),
    ):
        lines.append(
            f"{name} -> {label:<24} median {statistics.median(times) * 1000:7.0f} ms"
            f"   min {min(times) * 1000:7.0f}   max {max(times) * 1000:7.0f}"
            f"   ({len(times)} rounds)"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--session-timeout-ms", type=int, default=18000)
    args = parser.parse_args()
    config = {"zookeeper.session.timeout.ms": str(args.session_timeout_ms)}
    with EmbeddedCluster(brokers=3, config=config) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        topic = NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})
        admin.create_topics([topic])[TOPIC].result(30)
        zk = KazooClient(cluster.zookeeper)
        zk.start()
        producer = Producer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 0,
                "message.timeout.ms": 120000,
            }
        )
        killed = [measure(cluster, admin, producer, zk, kill=True) for _ in range(args.rounds)]
        stopped = [measure(cluster, admin, producer, zk, kill=False) for _ in range(args.rounds)]
        producer.flush(30)
        zk.stop()
        zk.close()
    print(f"zookeeper.session.timeout.ms={args.session_timeout_ms}, RF=3, min.insync.replicas=2")
    print(summary("SIGKILL of the leader", killed))
    print(summary("SIGTERM (controlled shutdown)", stopped))
    return 0


if __name__ == "__main__":
    sys.exit(main())
