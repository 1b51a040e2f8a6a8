"""Replication's cost: RF=3 acks=all against RF=1 acks=1, measured side by side in one run.

  produce RF=3 acks=all vs RF=1 acks=1    librdkafka producer, 100 B and 1 KB records, one
                                           partition per topic, the same three brokers
                                           (issue target: >= 0.5)

Failover times are bench/failover.py's.

Everything runs on this one machine: three brokers, ZooKeeper and the producer share its
cores, so replication's extra work (followers' appends, their fetches) competes with the
producer as it would not on three machines. The rounds alternate which topic goes first and
the median of each side is printed.

Each measurement writes to a topic of its own, created before it and deleted after it,
and starts after ``os.sync()`` (bench/page_cache.py says why: without it, an RF=3 round
measured 85 MB/s after two at 159-173 MB/s, depending on where the round order put it).

Both rows use the same producer settings, without idempotence: librdkafka's idempotent
producer was seen (on the leader) to send a partition's next ProduceRequest only after the
previous one was answered, which makes an acks=all row one batch per replication round
trip. With five requests in flight the 1 KB row is bound by work per byte: the leader and
both followers each write every byte (and the followers decode it from a fetch response)
on the same two cores, where RF=1 writes it once; py-spy finds no broker's loop saturated,
the rest is waiting for a core.

Usage: python bench/cluster_bench.py [--records 200000] [--rounds 3] [-o broker.config=value ...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from page_cache import DELETE_AT_ONCE, drop_topic

from odradek.server.embedded_cluster import EmbeddedCluster


def produce(bootstrap: str, topic: str, records: int, size: int, acks: str) -> float:
    """Records per second for ``records`` values of ``size`` bytes to partition 0 of ``topic``."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    value = b"x" * size
    producer.produce(topic, value, partition=0)  # connection and metadata before the clock
    producer.flush(30)
    start = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value, partition=0)
                break
            except BufferError:
                producer.poll(0.001)
    remaining = producer.flush(120)
    elapsed = time.perf_counter() - start
    if remaining:
        raise RuntimeError(f"{remaining} records not delivered to {topic}")
    return records / elapsed


def measure(
    cluster: EmbeddedCluster,
    admin: AdminClient,
    topic: NewTopic,
    records: int,
    size: int,
    acks: str,
) -> float:
    """Records per second to ``topic``, created for this measurement and deleted after it."""
    for future in admin.create_topics([topic]).values():
        future.result(30)
    os.sync()
    try:
        return produce(cluster.bootstrap_servers, topic.topic, records, size, acks)
    finally:
        drop_topic(admin, topic.topic, cluster.data_dir)


MIN_ISR_2 = {"min.insync.replicas": "2"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000, help="records per measurement")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per size")
    parser.add_argument("-o", dest="config", action="append", default=[], help="broker config k=v")
    args = parser.parse_args()
    config = {**DELETE_AT_ONCE, **dict(c.split("=", 1) for c in args.config)}
    with EmbeddedCluster(brokers=3, config=config) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        print(f"{'benchmark':40} {'RF=1 acks=1':>14} {'RF=3 acks=all':>14} {'ratio':>7}")
        for size in (100, 1024):
            rf1, rf3 = [], []
            for round_ in range(args.rounds):
                order = [
                    (NewTopic(f"rf1-{size}-{round_}", 1, 1), "1", rf1),
                    (NewTopic(f"rf3-{size}-{round_}", 1, 3, config=MIN_ISR_2), "all", rf3),
                ]
                for topic, acks, out in order if round_ % 2 == 0 else order[::-1]:
                    out.append(measure(cluster, admin, topic, args.records, size, acks))
            one, three = statistics.median(rf1), statistics.median(rf3)
            rounds = ", ".join(f"{a:,.0f}/{b:,.0f}" for a, b in zip(rf1, rf3, strict=True))
            print(f"  {size} B rounds, RF=1/RF=3 rec/s: {rounds}")
            print(
                f"{f'produce {size} B records (rec/s, median)':40} "
                f"{one:14,.0f} {three:14,.0f} {three / one:7.2f}"
            )


if __name__ == "__main__":
    main()
