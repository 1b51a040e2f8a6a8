"""Spark source and sink throughput against in-memory baselines, in the same run.

Read: rows/s of a count over a topic of 100-byte records through the "odradek"
source, against a Python data source yielding the same Arrow batches from memory.
Write: rows/s of the same rows through the "odradek" sink, against a Python Arrow
sink that drops them and against Spark's built-in "noop" sink (no Python at all).
Runs take turns; medians of rows per wall-clock second and per CPU-second of the
whole process tree (Spark, its Python workers, the broker) and their ratios are
printed (goal >= 0.5 against the memory source and the Python Arrow sink).

The write goal's reference is the Python Arrow sink: Spark's built-in "noop"
never starts a Python worker and runs four to six times faster than a Python
sink that only drops the rows it is handed, so no Python data source sink can
reach half of it; its ratio is printed too.

    .venv/bin/python bench/spark_bench.py [--records 1000000] [--repeat 5] [--bootstrap-servers HOST:PORT]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    InputPartition,
    WriterCommitMessage,
)

from odradek.spark import use_this_python
from odradek.spark.schema import arrow_schema, source_ddl

PARTITIONS = 2
VALUE = b"v" * 100
BATCH = 20_000


class MemoryReader(DataSourceReader):
    def __init__(self, rows: int) -> None:
        self.rows = rows

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(p) for p in range(PARTITIONS)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        n = BATCH
        batch = pa.RecordBatch.from_arrays(
            [
                pa.array([None] * n, pa.binary()),
                pa.array([VALUE] * n, pa.binary()),
                pa.repeat(pa.scalar("bench", pa.string()), n),
                pa.repeat(pa.scalar(partition.value, pa.int32()), n),
                pa.array(range(n), pa.int64()),
                pa.array([1_700_000_000_000_000] * n, pa.int64()).cast(
                    pa.timestamp("us", tz="UTC")
                ),
                pa.array([0] * n, pa.int32()),
            ],
            schema=arrow_schema(False),
        )
        remaining = self.rows // PARTITIONS
        while remaining > 0:
            yield batch if remaining >= n else batch.slice(0, remaining)
            remaining -= n


class MemorySource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "bench_memory"

    def schema(self) -> str:
        return source_ddl(False)

    def reader(self, schema) -> DataSourceReader:
        return MemoryReader(int(self.options["rows"]))

    def writer(self, schema, overwrite: bool) -> DataSourceArrowWriter:
        return DropWriter()


class DropWriter(DataSourceArrowWriter):
    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        for _ in iterator:
            pass
        return WriterCommitMessage()


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # must outlive the future
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(timeout=30)


def fill_topic(bootstrap: str, topic: str, records: int) -> None:
    create_topic(bootstrap, topic)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    for i in range(records):
        while True:
            try:
                producer.produce(topic, VALUE, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0


def tree_cpu_seconds() -> float:
    """CPU seconds of this process and its living descendants (Spark's JVM, its Python workers,
    the EmbeddedBroker), reaped children included; 0 where /proc is missing.

    Wall-clock rates swing with other processes' load on a shared machine; the CPU
    a run costs hardly does, so rows per CPU-second compare the sides fairly.
    """
    stats = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        stats[int(entry.name)] = (int(fields[1]), sum(int(f) for f in fields[11:15]))
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0, [os.getpid()]
    while todo:
        pid = todo.pop()
        total += stats.get(pid, (0, 0))[1]
        todo.extend(children.get(pid, ()))
    return total / os.sysconf("SC_CLK_TCK")


def interleaved(actions: dict[str, object], repeat: int) -> dict[str, list[tuple[float, float]]]:
    """(wall seconds, CPU seconds) per run of each action, taking turns so that load changes
    hit every side alike."""
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in actions}
    for _ in range(repeat):
        for name, action in actions.items():
            start, cpu = time.perf_counter(), tree_cpu_seconds()
            action()  # type: ignore[operator]
            runs[name].append((time.perf_counter() - start, tree_cpu_seconds() - cpu))
    return runs


def report(
    kind: str,
    records: int,
    runs: dict[str, list[tuple[float, float]]],
    ours: str,
    goal_reference: str,
) -> None:
    wall = {name: statistics.median(w for w, _ in r) for name, r in runs.items()}
    cpu = {name: statistics.median(c for _, c in r) for name, r in runs.items()}
    for name, r in runs.items():
        rates = ", ".join(f"{records / w / 1000:,.0f}k" for w, _ in r)
        print(
            f"{kind:5} {name:22} median {records / wall[name]:>10,.0f} rows/s "
            f"{records / cpu[name]:>10,.0f} rows/CPU-s   runs: {rates}"
        )
    for name in runs:
        if name != ours:
            goal = "goal >= 0.5" if name == goal_reference else "for reference, no goal"
            print(
                f"{kind:5} ratio {ours} / {name}: {wall[name] / wall[ours]:.2f} wall-clock, "
                f"{cpu[name] / cpu[ours]:.2f} CPU ({goal})"
            )


def run(bootstrap: str, records: int, repeat: int) -> None:
    use_this_python()
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = (
        SparkSession.builder.master(f"local[{PARTITIONS}]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(PARTITIONS))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(MemorySource)
    topic, sink_topic = f"bench-read-{time.time_ns()}", f"bench-write-{time.time_ns()}"
    fill_topic(bootstrap, topic, records)
    create_topic(bootstrap, sink_topic)
    print(
        f"records: {records} x {len(VALUE)} bytes, {PARTITIONS} partitions, local[{PARTITIONS}], "
        f"{repeat} runs each; load before: {os.getloadavg()[0]:.2f}"
    )

    source = (
        spark.read.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
    )
    memory = spark.read.format("bench_memory").option("rows", str(records))
    assert source.load().count() == records  # warm-up: workers, connections
    assert memory.load().count() == records
    report(
        "read",
        records,
        interleaved(
            {
                "odradek source": lambda: source.load().count(),
                "memory Arrow source": lambda: memory.load().count(),
            },
            repeat,
        ),
        "odradek source",
        "memory Arrow source",
    )

    rows = (
        spark.range(records, numPartitions=PARTITIONS)
        .select(F.col("id").cast("string").alias("key"), F.lit(VALUE).alias("value"))
        .cache()
    )
    rows.count()
    sink = (
        rows.write.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink_topic)
    )
    sink.mode("append").save()  # warm-up: workers, producers
    report(
        "write",
        records,
        interleaved(
            {
                "odradek sink": lambda: sink.mode("append").save(),
                "Python Arrow noop sink": lambda: (
                    rows.write.format("bench_memory").mode("append").save()
                ),
                "Spark noop sink": lambda: rows.write.format("noop").mode("overwrite").save(),
            },
            repeat,
        ),
        "odradek sink",
        "Python Arrow noop sink",
    )
    print(f"load after: {os.getloadavg()[0]:.2f}")
    spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument(
        "--repeat", type=int, default=5, help="runs of each measurement (median reported)"
    )
    parser.add_argument("--bootstrap-servers", help="use this broker instead of an EmbeddedBroker")
    args = parser.parse_args()
    if args.bootstrap_servers:
        run(args.bootstrap_servers, args.records, args.repeat)
        return
    from odradek import EmbeddedBroker

    with EmbeddedBroker() as broker:
        run(broker.bootstrap_servers, args.records, args.repeat)


if __name__ == "__main__":
    main()
