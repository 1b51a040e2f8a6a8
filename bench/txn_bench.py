"""Transactions' cost, measured side by side in one run against one broker (issue 14's goals):

  produce transactional vs idempotent    librdkafka producer, 100 B records, a commit every
                                         1,000 records per partition (goal: >= 0.7)
  consume read_committed vs uncommitted  librdkafka consumer over the same data: the
                                         transactional producer's records with their markers
                                         (goal: >= 0.9)

Both producers have the same settings (linger, batch size, queue); a transactional producer
is idempotent by definition, so the only difference is the transaction: AddPartitionsToTxn
when a transaction first writes to a partition, EndTxn and the markers at each commit, and
the wait for the commit before the next transaction begins. Rounds alternate which side goes
first; the median of each side is printed, with the load average before and after (the
machine may be shared), the rates of every round, and the CPU time (user + system) per
100,000 records of the broker (from /proc) and of the client (this process), which the load
of other processes disturbs far less than the rates.

Usage: python bench/txn_bench.py [--records 1000000] [--partitions 4] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek import EmbeddedBroker

RECORD = b"x" * 100
#: Records per partition between two commits.
PER_COMMIT = 1_000
PRODUCER = {
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "queue.buffering.max.messages": 1_000_000,
}


def broker_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) the broker process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Side:
    """One side of a comparison: its rates, and the CPU milliseconds per 100,000 records of
    each run spent by the broker and by the client (this process: librdkafka's threads)."""

    rates: list[float] = field(default_factory=list)
    cpu_ms: list[float] = field(default_factory=list)
    client_cpu_ms: list[float] = field(default_factory=list)

    def measure(self, pid: int, records: int, run: Callable[[], float]) -> None:
        broker, client = broker_cpu_s(pid), time.process_time()
        self.rates.append(run())
        scale = 1000 * 100_000 / records
        self.cpu_ms.append((broker_cpu_s(pid) - broker) * scale)
        self.client_cpu_ms.append((time.process_time() - client) * scale)


def produce_all(producer: Producer, topic: str, partition: int) -> None:
    while True:
        try:
            producer.produce(topic, RECORD, partition=partition)
            return
        except BufferError:
            producer.poll(0.001)


def produce(
    bootstrap: str, topic: str, records: int, partitions: int, transactional: bool
) -> float:
    """Records per second: ``records`` 100 B values spread evenly over ``partitions``, in
    transactions of PER_COMMIT records per partition when ``transactional``."""
    config = {"bootstrap.servers": bootstrap, **PRODUCER}
    if transactional:
        config["transactional.id"] = f"bench-{uuid.uuid4().hex[:8]}"
    else:
        config["enable.idempotence"] = True
    producer = Producer(config)
    if transactional:
        producer.init_transactions(30)
    producer.list_topics(topic, timeout=30)  # connections and metadata before the clock
    chunk = PER_COMMIT * partitions
    start = time.perf_counter()
    for first in range(0, records, chunk):
        if transactional:
            producer.begin_transaction()
        for i in range(first, min(first + chunk, records)):
            produce_all(producer, topic, i % partitions)
        if transactional:
            producer.commit_transaction(120)  # flushes, then EndTxn
    remaining = producer.flush(120)
    elapsed = time.perf_counter() - start
    if remaining:
        raise RuntimeError(f"{remaining} records not delivered to {topic}")
    return records / elapsed


def consume(bootstrap: str, topic: str, partitions: int, records: int, isolation: str) -> float:
    """Records per second a consumer with ``isolation`` reads ``records`` from offset 0."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "fetch.max.bytes": 52_428_800,
            # As bench/run.py: librdkafka's local-queue backoff must not set the pace.
            "fetch.queue.backoff.ms": 1,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen = 0
    start = None
    deadline = time.monotonic() + 300
    while seen < records:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{isolation}: {seen} of {records} records read")
        for message in consumer.consume(10_000, timeout=1):
            if message.error() is None:
                if start is None:
                    start = time.perf_counter()  # from the first record: no connection setup
                seen += 1
    elapsed = time.perf_counter() - (start or time.perf_counter())
    consumer.close()
    return records / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="records per measurement")
    parser.add_argument("--partitions", type=int, default=4, help="partitions per topic")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds")
    args = parser.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    txn, idem, committed, uncommitted = Side(), Side(), Side(), Side()
    with EmbeddedBroker() as broker:
        bootstrap, pid = broker.bootstrap_servers, broker.pid
        assert pid is not None
        admin = AdminClient({"bootstrap.servers": bootstrap})
        last_txn_topic = ""
        for round_ in range(args.rounds):
            names = {kind: f"{kind}-{round_}" for kind in ("txn", "idem")}
            futures = admin.create_topics(
                [NewTopic(name, args.partitions, 1) for name in names.values()]
            )
            for future in futures.values():
                future.result(30)
            order = [("txn", True, txn), ("idem", False, idem)]
            for kind, transactional, side in order if round_ % 2 == 0 else order[::-1]:
                run = partial(
                    produce, bootstrap, names[kind], args.records, args.partitions, transactional
                )
                side.measure(pid, args.records, run)
            last_txn_topic = names["txn"]
        for round_ in range(args.rounds):
            reads = [("read_committed", committed), ("read_uncommitted", uncommitted)]
            for isolation, side in reads if round_ % 2 == 0 else reads[::-1]:
                run = partial(
                    consume, bootstrap, last_txn_topic, args.partitions, args.records, isolation
                )
                side.measure(pid, args.records, run)
    print(
        f"{'benchmark (median of ' + str(args.rounds) + ')':44} {'rec/s':>12} {'baseline':>12}"
        f" {'ratio':>6} {'broker CPU ms/100k':>19} {'client CPU ms/100k':>19}"
    )
    for name, side, base in (
        ("produce transactional vs idempotent", txn, idem),
        ("consume read_committed vs read_uncommitted", committed, uncommitted),
    ):
        rate, base_rate = statistics.median(side.rates), statistics.median(base.rates)
        cpu = f"{statistics.median(side.cpu_ms):.0f} vs {statistics.median(base.cpu_ms):.0f}"
        client = (
            f"{statistics.median(side.client_cpu_ms):.0f} vs "
            f"{statistics.median(base.client_cpu_ms):.0f}"
        )
        print(
            f"{name:44} {rate:12,.0f} {base_rate:12,.0f} {rate / base_rate:6.2f} "
            f"{cpu:>19} {client:>19}"
        )
    for name, side in (
        ("transactional", txn),
        ("idempotent", idem),
        ("read_committed", committed),
        ("read_uncommitted", uncommitted),
    ):
        print(f"  {name} rec/s by round: {', '.join(f'{r:,.0f}' for r in side.rates)}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
