"""The sink, batch and streaming: records read back by a plain consumer; headers round-trip."""

from __future__ import annotations

import pytest



def test_batch_sink_records_read_by_plain_consumer(spark, bootstrap, new_topic, consume_all):
    topic = new_topic(partitions=2)
    df = spark.createDataFrame(
        [(f"k{i}", f"v{i}", i % 2) for i in range(50)], "key string, value string, partition int")
    df.write.format("odradek").option("kafka.bootstrap.servers", bootstrap).option("topic", topic).mode("append").save()
    records = consume_all(topic, partitions=2, expected=50)
    assert sorted((m.key(), m.value(), m.partition()) for m in records) == sorted(
        (f"k{i}".encode(), f"v{i}".encode(), i % 2) for i in range(50))


def test_headers_round_trip(spark, bootstrap, new_topic):
    topic = new_topic()
    df = spark.createDataFrame(
        [(b"v1", [("trace", b"abc"), ("empty", None)]), (b"v2", [])],
        "value binary, headers array<struct<key:string,value:binary>>",
    )
    df.write.format("odradek").option("kafka.bootstrap.servers", bootstrap).option("topic", topic).mode("append").save()
    rows = (spark.read.format("odradek").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic).option("includeHeaders", "true").load()
            .orderBy("value").collect())
    assert [bytes(r.value) for r in rows] == [b"v1", b"v2"]
    assert [(h.key, h.value and bytes(h.value)) for h in rows[0].headers] == [("trace", b"abc"), ("empty", None)]
    assert rows[1].headers == []


def test_sink_rejects_frames_without_value_or_topic(spark, bootstrap):
    df = spark.createDataFrame([("k",)], "key string")
    with pytest.raises(Exception, match="Required attribute 'value' not found"):
        df.write.format("odradek").option("kafka.bootstrap.servers", bootstrap).option("topic", "x").mode("append").save()
    df = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(Exception, match="topic option required"):
        df.write.format("odradek").option("kafka.bootstrap.servers", bootstrap).mode("append").save()


def test_streaming_sink_copies_a_topic(spark, bootstrap, new_topic, tmp_path, produce, consume_all):
    source, sink = new_topic(), new_topic()
    produce(source, [{"value": b"r%d" % i, "key": b"k"} for i in range(30)])
    query = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", source).option("startingOffsets", "earliest").load()
             .select("key", "value")
             .writeStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", sink).option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(120) and query.exception() is None
    records = consume_all(sink, partitions=1, expected=30)
    assert sorted(m.value() for m in records) == sorted(b"r%d" % i for i in range(30))
