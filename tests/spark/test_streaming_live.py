"""Streaming queries that keep running while the topics change under them: processing-time
triggers, minOffsetsPerTrigger with maxTriggerDelay, new partitions and new matching topics."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from confluent_kafka.admin import AdminClient, NewPartitions

WAIT_S = 90.0


@contextmanager
def live_query(
    spark, bootstrap, tmp_path, trigger="200 milliseconds", **options
) -> Iterator[tuple[object, str]]:
    """A processing-time query into a memory table; yields (query, table) and stops it afterwards.

    Idle triggers report progress too (noDataProgressEventInterval 0), so a test can
    see the source being asked for offsets while it declines to start a batch.
    """
    table = f"live_{uuid.uuid4().hex[:10]}"
    previous = spark.conf.get("spark.sql.streaming.noDataProgressEventInterval")
    spark.conf.set("spark.sql.streaming.noDataProgressEventInterval", "0")
    try:
        query = (
            spark.readStream.format("odradek")
            .option("kafka.bootstrap.servers", bootstrap)
            .options(**options)
            .load()
            .select("topic", "partition", "offset", "value")
            .writeStream.format("memory")
            .queryName(table)
            .option("checkpointLocation", str(tmp_path / table))
            .trigger(processingTime=trigger)
            .start()
        )
    finally:
        spark.conf.set("spark.sql.streaming.noDataProgressEventInterval", previous)
    try:
        yield query, table
    finally:
        query.stop()


def wait_until(query, condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert query.exception() is None, query.exception()
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def wait_for_rows(query, count: int, what: str) -> None:
    """Until micro-batches with `count` rows in all have finished (their progress is reported)."""
    wait_until(query, lambda: sum(batch_sizes(query)) >= count, what)


def rows(spark, table: str) -> list[tuple[str, int, int, bytes]]:
    return sorted(
        (r.topic, r.partition, r.offset, bytes(r.value))
        for r in spark.sql(f"SELECT * FROM {table}").collect()
    )


def batch_sizes(query) -> list[int]:
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


def latest_seen(query, topic: str) -> int:
    """Records the source last reported as available on the topic (its latestOffset metric)."""
    progress = query.lastProgress
    if not progress or not progress["sources"][0].get("latestOffset"):
        return 0
    return sum(json.loads(progress["sources"][0]["latestOffset"]).get(topic, {}).values())


def test_processing_time_trigger_delivers_records_produced_while_running(
    spark, bootstrap, new_topic, produce, tmp_path
):
    topic = new_topic(partitions=2)
    produce(topic, [{"value": b"a%d" % i, "partition": i % 2} for i in range(6)])
    with live_query(spark, bootstrap, tmp_path, subscribe=topic, startingOffsets="earliest") as (
        query,
        table,
    ):
        wait_for_rows(query, 6, "the first records")
        produce(topic, [{"value": b"b%d" % i, "partition": i % 2} for i in range(4)])
        wait_for_rows(query, 10, "records produced while running")
        got = rows(spark, table)
        sizes = batch_sizes(query)
    assert sorted(v for *_, v in got) == sorted(
        [b"a%d" % i for i in range(6)] + [b"b%d" % i for i in range(4)]
    )
    assert len({(t, p, o) for t, p, o, _ in got}) == 10
    assert len(sizes) >= 2 and sum(sizes) == 10


def test_min_offsets_per_trigger_waits_for_enough_records(
    spark, bootstrap, new_topic, produce, tmp_path
):
    topic = new_topic()
    with live_query(
        spark,
        bootstrap,
        tmp_path,
        subscribe=topic,
        startingOffsets="earliest",
        minOffsetsPerTrigger="10",
        maxTriggerDelay="1h",
    ) as (query, table):
        wait_until(query, lambda: query.lastProgress is not None, "the first trigger")
        produce(topic, [{"value": b"early%d" % i} for i in range(4)])
        # The source reports the 4 records available, trigger after trigger, and admits none.
        wait_until(query, lambda: latest_seen(query, topic) == 4, "the source to see 4 records")
        seen_at = query.lastProgress["batchId"], query.lastProgress["timestamp"]
        wait_until(
            query,
            lambda: (query.lastProgress["batchId"], query.lastProgress["timestamp"]) != seen_at,
            "another trigger",
        )
        assert rows(spark, table) == [] and batch_sizes(query) == []
        produce(topic, [{"value": b"late%d" % i} for i in range(6)])
        wait_for_rows(query, 10, "a batch once 10 records are there")
        assert [o for _, _, o, _ in rows(spark, table)] == list(range(10))
        assert batch_sizes(query) == [10]


def test_max_trigger_delay_lets_a_small_batch_through(
    spark, bootstrap, new_topic, produce, tmp_path
):
    topic = new_topic()
    with live_query(
        spark,
        bootstrap,
        tmp_path,
        subscribe=topic,
        startingOffsets="earliest",
        minOffsetsPerTrigger="1000",
        maxTriggerDelay="2s",
    ) as (query, table):
        wait_until(query, lambda: query.lastProgress is not None, "the first trigger")
        produce(topic, [{"value": b"%d" % i} for i in range(4)])
        wait_for_rows(query, 4, "the delay to pass")
        assert [o for _, _, o, _ in rows(spark, table)] == [0, 1, 2, 3]
        assert batch_sizes(query) == [4]


def test_available_now_drains_below_min_offsets_per_trigger(
    spark, bootstrap, new_topic, produce, tmp_path
):
    topic = new_topic()
    produce(topic, [{"value": b"%d" % i} for i in range(7)])
    query = (
        spark.readStream.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("minOffsetsPerTrigger", "100")
        .option("maxTriggerDelay", "1h")
        .load()
        .select("offset")
        .writeStream.format("parquet")
        .option("path", str(tmp_path / "t"))
        .option("checkpointLocation", str(tmp_path / "c"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(WAIT_S), "query did not finish"
    assert query.exception() is None
    assert sorted(r.offset for r in spark.read.parquet(str(tmp_path / "t")).collect()) == list(
        range(7)
    )


def test_new_partitions_and_matching_topics_are_read_from_their_earliest_offset(
    spark, bootstrap, new_topic, produce, tmp_path
):
    """As Spark: a running query picks up partitions added to a subscribed topic and new topics
    matching its pattern, from their earliest offset, even when it started at "latest"."""
    prefix = f"grow-{uuid.uuid4().hex[:6]}"
    first = new_topic(partitions=1, prefix=prefix)
    produce(first, [{"value": b"before-start"}])
    with live_query(
        spark, bootstrap, tmp_path, subscribePattern=f"{prefix}-.*", startingOffsets="latest"
    ) as (query, table):
        wait_until(query, lambda: query.lastProgress is not None, "the starting offsets")
        produce(first, [{"value": b"p0-a"}])
        wait_for_rows(query, 1, "the first record")
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_partitions([NewPartitions(first, 3)])[first].result(timeout=30)
        produce(
            first, [{"value": b"p%d-%d" % (p, i), "partition": p} for p in (1, 2) for i in range(2)]
        )
        second = new_topic(partitions=2, prefix=prefix)
        produce(second, [{"value": b"new-%d" % p, "partition": p} for p in range(2)])
        produce(first, [{"value": b"p0-b", "partition": 0}])
        wait_for_rows(query, 8, "records of the new partitions and topic")
        got = rows(spark, table)
    assert got == sorted(
        [
            (first, 0, 1, b"p0-a"),
            (first, 0, 2, b"p0-b"),
            (first, 1, 0, b"p1-0"),
            (first, 1, 1, b"p1-1"),
            (first, 2, 0, b"p2-0"),
            (first, 2, 1, b"p2-1"),
            (second, 0, 0, b"new-0"),
            (second, 1, 0, b"new-1"),
        ]
    )
