"""Replication's cost: RF=3 acks=all against RF=1 acks=1, measured side by side in one run.

  produce RF=3 acks=all vs RF=1 acks=1    librdkafka producer, 100 B and 1 KB records, one
                                           partition per topic, the same three brokers
                                           (issue target: >= 0.5)

Failover times are bench/failover.py's.

Everything runs on this one machine: three brokers, ZooKeeper and the producer share its
cores, so replication's extra work (followers' appends, their fetches) competes with the
producer as it would not on three machines. The rounds alternate which topic goes first and
the median of each side is printed.

What bounds the RF=3 row: librdkafka's idempotent producer keeps one ProduceRequest in
flight per partition whatever max.in.flight says (confluentinc/librdkafka#4989; traced
on the leader, each request arrives only after the previous one was answered). So the
row is one batch (at most message.max.bytes, ~1 MB here) per replication round trip:
the leader's append, both followers' fetches of it, their next fetches that move the
high watermark, the answer. The acks=1 side has five requests in flight and no round
trip. On a loaded two-core machine that round trip is tens of milliseconds of waiting
for a core, not of work: py-spy finds every broker's event loop mostly idle.

Usage: python bench/cluster_bench.py [--records 200000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

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
            "enable.idempotence": acks == "all",
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000, help="records per measurement")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per size")
    args = parser.parse_args()
    with EmbeddedCluster(brokers=3) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        topics = [
            NewTopic("rf1", 1, 1),
            NewTopic("rf3", 1, 3, config={"min.insync.replicas": "2"}),
        ]
        for future in admin.create_topics(topics).values():
            future.result(30)
        bootstrap = cluster.bootstrap_servers
        print(f"{'benchmark':40} {'RF=1 acks=1':>14} {'RF=3 acks=all':>14} {'ratio':>7}")
        for size in (100, 1024):
            rf1, rf3 = [], []
            for round_ in range(args.rounds):
                order = [("rf1", "1", rf1), ("rf3", "all", rf3)]
                for topic, acks, out in order if round_ % 2 == 0 else order[::-1]:
                    out.append(produce(bootstrap, topic, args.records, size, acks))
            one, three = statistics.median(rf1), statistics.median(rf3)
            print(
                f"{f'produce {size} B records (rec/s, median)':40} "
                f"{one:14,.0f} {three:14,.0f} {three / one:7.2f}"
            )


if __name__ == "__main__":
    main()
