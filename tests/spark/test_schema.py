"""Consumed records become Arrow batches with exactly Spark's Kafka source schema."""

from __future__ import annotations

import datetime as dt

from confluent_kafka import Message

from odradek.spark.schema import arrow_schema, records_to_batch, source_ddl


def test_ddl_matches_spark_kafka_source():
    assert source_ddl(False) == (
        "key binary, value binary, topic string, partition int, offset long, "
        "timestamp timestamp, timestampType int"
    )
    assert source_ddl(True).endswith("headers array<struct<key:string,value:binary>>")


def test_records_to_batch_columns():
    messages = [
        Message(
            topic="t",
            partition=3,
            offset=10,
            key=b"k",
            value=b"v1",
            headers=[("h", b"1"), ("h", None)],
            timestamp=(1, 1_700_000_000_123),
        ),
        Message(
            topic="t",
            partition=3,
            offset=12,
            key=None,
            value=None,
            headers=None,
            timestamp=(2, 1_700_000_000_456),
        ),
    ]
    batch = records_to_batch("t", 3, messages, [10, 12], include_headers=True)
    assert batch.schema == arrow_schema(True)
    rows = batch.to_pylist()
    assert rows[0]["key"] == b"k" and rows[1]["key"] is None and rows[1]["value"] is None
    assert [r["offset"] for r in rows] == [10, 12]
    assert {r["topic"] for r in rows} == {"t"} and {r["partition"] for r in rows} == {3}
    assert rows[0]["timestamp"] == dt.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=dt.UTC)
    assert [r["timestampType"] for r in rows] == [0, 1]
    assert rows[0]["headers"] == [{"key": "h", "value": b"1"}, {"key": "h", "value": None}]
    assert rows[1]["headers"] == []


def test_without_headers_has_no_headers_column():
    message = Message(topic="t", partition=0, offset=0, value=b"x", timestamp=(1, 5))
    batch = records_to_batch("t", 0, [message], [0], False)
    assert batch.schema.names == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
    ]
