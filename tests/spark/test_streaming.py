"""Streaming: checkpointed offsets, restarts without duplicates or gaps, new matching topics,
rate limits, and records deleted before they were read."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient


def stream(spark, bootstrap, **options):
    return (
        spark.readStream.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("startingOffsets", "earliest")
        .options(**options)
        .load()
    )


def run_to_parquet(spark, bootstrap, out, ckpt, **options):
    query = (
        stream(spark, bootstrap, **options)
        .select("topic", "partition", "offset", "value")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120), "query did not finish"
    assert query.exception() is None
    return query


def test_restart_around_new_data_delivers_every_record_once(
    spark, bootstrap, new_topic, tmp_path, produce
):
    """Stop, add records and a new topic matching the pattern, restart: each record lands once."""
    prefix = f"restart-{uuid.uuid4().hex[:6]}"
    first = new_topic(partitions=2, prefix=prefix)
    out, ckpt = tmp_path / "table", tmp_path / "ckpt"
    produce(first, [{"value": b"a%d" % i, "partition": i % 2} for i in range(30)])
    run_to_parquet(spark, bootstrap, out, ckpt, subscribePattern=f"{prefix}-.*")
    produce(first, [{"value": b"b%d" % i, "partition": i % 2} for i in range(20)])
    second = new_topic(partitions=1, prefix=prefix)
    produce(second, [{"value": b"c%d" % i} for i in range(5)])
    run_to_parquet(spark, bootstrap, out, ckpt, subscribePattern=f"{prefix}-.*")
    rows = spark.read.parquet(str(out)).collect()
    keys = [(r.topic, r.partition, r.offset) for r in rows]
    assert len(keys) == len(set(keys)) == 55
    assert sorted(bytes(r.value) for r in rows) == sorted(
        [b"a%d" % i for i in range(30)]
        + [b"b%d" % i for i in range(20)]
        + [b"c%d" % i for i in range(5)]
    )


def test_rate_limit_splits_backlog_into_micro_batches(
    spark, bootstrap, new_topic, tmp_path, produce
):
    topic = new_topic()
    produce(topic, [{"value": b"%d" % i} for i in range(35)])
    query = run_to_parquet(
        spark, bootstrap, tmp_path / "t", tmp_path / "c", subscribe=topic, maxOffsetsPerTrigger="10"
    )
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sizes == [10, 10, 10, 5]
    assert spark.read.parquet(str(tmp_path / "t")).count() == 35


def test_checkpoint_holds_offsets_as_json(spark, bootstrap, new_topic, tmp_path, produce):
    topic = new_topic()
    produce(topic, [{"value": b"x"} for _ in range(4)])
    run_to_parquet(spark, bootstrap, tmp_path / "t", tmp_path / "c", subscribe=topic)
    offset_files = sorted(
        (tmp_path / "c" / "offsets").iterdir(),
        key=lambda p: int(p.name) if p.name.isdigit() else -1,
    )
    last = offset_files[-1].read_text().splitlines()[-1]
    assert f'"{topic}":{{"0":4}}' in last.replace(" ", "")


def test_records_deleted_before_a_restart_fail_or_are_skipped(
    spark, bootstrap, new_topic, tmp_path, produce
):
    topic = new_topic()
    out, ckpt = tmp_path / "t", tmp_path / "c"
    produce(topic, [{"value": b"early%d" % i} for i in range(5)])
    run_to_parquet(spark, bootstrap, out, ckpt, subscribe=topic)
    produce(topic, [{"value": b"late%d" % i} for i in range(10)])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_records([TopicPartition(topic, 0, 10)], request_timeout=30).values():
        future.result(timeout=30)
    with pytest.raises(Exception, match="failOnDataLoss"):
        run_to_parquet(spark, bootstrap, out, ckpt, subscribe=topic)
    run_to_parquet(spark, bootstrap, out, ckpt, subscribe=topic, failOnDataLoss="false")
    offsets = sorted(r.offset for r in spark.read.parquet(str(out)).collect())
    assert offsets == [0, 1, 2, 3, 4, 10, 11, 12, 13, 14]
