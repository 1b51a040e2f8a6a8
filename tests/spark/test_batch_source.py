"""Batch reads against a real broker, with each way of choosing offsets."""

from __future__ import annotations

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

BASE_TS = 1_700_000_000_000


@pytest.fixture
def ten_per_partition(bootstrap, new_topic, produce):
    """Topic with 2 partitions x 10 records; record i has timestamp BASE_TS + i*1000."""
    topic = new_topic(partitions=2)
    produce(
        topic,
        [
            {
                "value": f"{p}-{i}".encode(),
                "key": f"k{i}".encode(),
                "partition": p,
                "timestamp": BASE_TS + i * 1000,
            }
            for p in range(2)
            for i in range(10)
        ],
    )
    return topic


def read(spark, bootstrap, **options):
    return (
        spark.read.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .options(**options)
        .load()
    )


def pairs(df):
    return sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())


def test_earliest_to_latest_reads_every_record_with_spark_schema(
    spark, bootstrap, ten_per_partition
):
    df = read(spark, bootstrap, subscribe=ten_per_partition)
    assert [f.name for f in df.schema.fields] == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
    ]
    rows = df.collect()
    assert len(rows) == 20
    first = min((r for r in rows if r.partition == 1), key=lambda r: r.offset)
    assert (bytes(first.key), bytes(first.value), first.topic, first.offset) == (
        b"k0",
        b"1-0",
        ten_per_partition,
        0,
    )
    assert int(first.timestamp.timestamp() * 1000) == BASE_TS and first.timestampType == 0


def test_json_offsets_with_earliest_and_latest_markers(spark, bootstrap, ten_per_partition):
    t = ten_per_partition
    df = read(
        spark,
        bootstrap,
        subscribe=t,
        startingOffsets=f'{{"{t}":{{"0":3,"1":-2}}}}',
        endingOffsets=f'{{"{t}":{{"0":8,"1":-1}}}}',
    )
    assert pairs(df) == [(0, o) for o in range(3, 8)] + [(1, o) for o in range(10)]


def test_timestamps_select_offsets(spark, bootstrap, ten_per_partition):
    t = ten_per_partition
    df = read(spark, bootstrap, subscribe=t, startingTimestamp=str(BASE_TS + 7000))
    assert pairs(df) == [(p, o) for p in range(2) for o in range(7, 10)]
    df = read(
        spark,
        bootstrap,
        subscribe=t,
        startingOffsetsByTimestamp=f'{{"{t}":{{"0":{BASE_TS + 2000},"1":{BASE_TS + 4000}}}}}',
        endingTimestamp=str(BASE_TS + 5000),
    )
    assert pairs(df) == [(0, o) for o in range(2, 5)] + [(1, 4)]
    with pytest.raises(Exception, match="No offset matched"):
        read(spark, bootstrap, subscribe=t, startingTimestamp=str(BASE_TS + 99_000)).collect()
    df = read(
        spark,
        bootstrap,
        subscribe=t,
        startingTimestamp=str(BASE_TS + 99_000),
        startingOffsetsByTimestampStrategy="latest",
    )
    assert df.count() == 0


def test_assign_pattern_and_min_partitions(spark, bootstrap, ten_per_partition):
    t = ten_per_partition
    assert pairs(read(spark, bootstrap, assign=f'{{"{t}":[1]}}')) == [(1, o) for o in range(10)]
    assert len(pairs(read(spark, bootstrap, subscribePattern=t.replace("-", "[-]")))) == 20
    split = read(spark, bootstrap, subscribe=t, minPartitions="6")
    assert split.rdd.getNumPartitions() >= 6
    assert pairs(split) == [(p, o) for p in range(2) for o in range(10)]


def test_bad_options_fail_at_query_start(spark, bootstrap, ten_per_partition):
    with pytest.raises(Exception, match="starting offset can't be latest"):
        read(spark, bootstrap, subscribe=ten_per_partition, startingOffsets="latest").collect()
    with pytest.raises(Exception, match="Unknown option"):
        read(spark, bootstrap, subscribe=ten_per_partition, startingOffset="earliest").collect()


def test_deleted_records_fail_or_are_skipped_per_fail_on_data_loss(
    spark, bootstrap, new_topic, produce
):
    topic = new_topic()
    produce(topic, [{"value": b"%d" % i} for i in range(20)])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_records([TopicPartition(topic, 0, 10)], request_timeout=30).values():
        future.result(timeout=30)
    start = f'{{"{topic}":{{"0":0}}}}'
    with pytest.raises(Exception, match="failOnDataLoss"):
        read(spark, bootstrap, subscribe=topic, startingOffsets=start).collect()
    df = read(spark, bootstrap, subscribe=topic, startingOffsets=start, failOnDataLoss="false")
    assert pairs(df) == [(0, o) for o in range(10, 20)]


@pytest.mark.parametrize(
    "extra", [{}, {"kafka.socket.keepalive.enable": "true"}], ids=["fetch", "librdkafka"]
)
def test_fetch_reader_and_librdkafka_reader_return_the_same_rows(
    spark, bootstrap, ten_per_partition, extra
):
    """Options the Fetch reader does not know send the read through librdkafka; both read alike."""
    rows = read(spark, bootstrap, subscribe=ten_per_partition, **extra).collect()
    assert sorted(
        (
            r.partition,
            r.offset,
            bytes(r.key),
            bytes(r.value),
            round(r.timestamp.timestamp() * 1000),
            r.timestampType,
        )
        for r in rows
    ) == [
        (p, i, f"k{i}".encode(), f"{p}-{i}".encode(), BASE_TS + i * 1000, 0)
        for p in range(2)
        for i in range(10)
    ]
