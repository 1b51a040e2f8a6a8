"""The sink, batch and streaming: records read back by a plain consumer; headers round-trip."""

from __future__ import annotations

import pytest


def murmur2(data: bytes) -> int:
    """Kafka's Utils.murmur2, the Java producer's key hash, written from its definition."""
    m, length = 0x5BD1E995, len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        k = (k * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    tail = data[length - length % 4 :]
    if len(tail) == 3:
        h ^= tail[2] << 16
    if len(tail) >= 2:
        h ^= tail[1] << 8
    if tail:
        h = ((h ^ tail[0]) * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h >= 1 << 31 else h


def test_reference_murmur2_matches_kafka_test_vectors():
    vectors = {
        "21": -973932308,
        "foobar": -790332482,
        "a-little-bit-long-string": -985981536,
        "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
        "abc": 479470107,
    }
    assert {s: murmur2(s.encode()) for s in vectors} == vectors


@pytest.mark.parametrize(
    "extra",
    [{}, {"kafka.queue.buffering.max.messages": "50000"}],
    ids=["arrow-producer", "librdkafka"],
)
def test_batch_sink_records_read_by_plain_consumer(spark, bootstrap, new_topic, consume_all, extra):
    """Rows with a partition go there; keyed rows without one go where Spark's Java producer
    (murmur2 of the key) would put them. Options the Arrow producer does not know send the
    rows through librdkafka, with the same result."""
    topic = new_topic(partitions=3)
    rows = [(f"k{i}", f"v{i}", i % 3 if i < 20 else None) for i in range(60)]
    df = spark.createDataFrame(rows, "key string, value string, partition int")
    (
        df.write.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .options(**extra)
        .mode("append")
        .save()
    )
    records = consume_all(topic, partitions=3, expected=60)
    assert sorted((m.key(), m.value(), m.partition()) for m in records) == sorted(
        (k.encode(), v.encode(), (murmur2(k.encode()) & 0x7FFFFFFF) % 3 if p is None else p)
        for k, v, p in rows
    )


def test_headers_round_trip(spark, bootstrap, new_topic):
    topic = new_topic()
    df = spark.createDataFrame(
        [(b"v1", [("trace", b"abc"), ("empty", None)]), (b"v2", [])],
        "value binary, headers array<struct<key:string,value:binary>>",
    )
    df.write.format("odradek").option("kafka.bootstrap.servers", bootstrap).option(
        "topic", topic
    ).mode("append").save()
    rows = (
        spark.read.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("includeHeaders", "true")
        .load()
        .orderBy("value")
        .collect()
    )
    assert [bytes(r.value) for r in rows] == [b"v1", b"v2"]
    assert [(h.key, h.value and bytes(h.value)) for h in rows[0].headers] == [
        ("trace", b"abc"),
        ("empty", None),
    ]
    assert rows[1].headers == []


def test_sink_rejects_frames_without_value_or_topic(spark, bootstrap):
    df = spark.createDataFrame([("k",)], "key string")
    with pytest.raises(Exception, match="Required attribute 'value' not found"):
        df.write.format("odradek").option("kafka.bootstrap.servers", bootstrap).option(
            "topic", "x"
        ).mode("append").save()
    df = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(Exception, match="topic option required"):
        df.write.format("odradek").option("kafka.bootstrap.servers", bootstrap).mode(
            "append"
        ).save()
    df = spark.createDataFrame([("v", None)], "value string, topic string")
    with pytest.raises(Exception, match="Null topic present in the data"):
        df.write.format("odradek").option("kafka.bootstrap.servers", bootstrap).mode(
            "append"
        ).save()


def test_streaming_sink_copies_a_topic(spark, bootstrap, new_topic, tmp_path, produce, consume_all):
    source, sink = new_topic(), new_topic()
    produce(source, [{"value": b"r%d" % i, "key": b"k"} for i in range(30)])
    query = (
        spark.readStream.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .select("key", "value")
        .writeStream.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120) and query.exception() is None
    records = consume_all(sink, partitions=1, expected=30)
    assert sorted(m.value() for m in records) == sorted(b"r%d" % i for i in range(30))


def test_rows_go_to_the_topic_in_their_topic_column(spark, bootstrap, new_topic, consume_all):
    first, second = new_topic(), new_topic(partitions=2)
    rows = [(first if i % 3 else second, None, f"v{i}") for i in range(30)]
    df = spark.createDataFrame(rows, "topic string, key string, value string")
    df.write.format("odradek").option("kafka.bootstrap.servers", bootstrap).mode("append").save()
    assert sorted(m.value() for m in consume_all(first, partitions=1, expected=20)) == sorted(
        v.encode() for t, _, v in rows if t == first
    )
    got = consume_all(second, partitions=2, expected=10)
    assert sorted(m.value() for m in got) == sorted(v.encode() for t, _, v in rows if t == second)


def test_a_partition_the_topic_lacks_fails_the_write(spark, bootstrap, new_topic):
    topic = new_topic(partitions=2)
    df = spark.createDataFrame([("v", 5)], "value string, partition int")
    with pytest.raises(Exception, match="(?i)unknown.topic.or.partition"):
        df.write.format("odradek").option("kafka.bootstrap.servers", bootstrap).option(
            "topic", topic
        ).mode("append").save()
