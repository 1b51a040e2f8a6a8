"""The Fetch reader and the Arrow producer against a real broker, without Spark: broken
connections are reopened and nothing is lost or written twice."""

from __future__ import annotations

import pyarrow as pa

from odradek.spark import client, producer
from odradek.spark.client import consumer_config, fetch_range
from odradek.spark.offsets import OffsetRange
from odradek.spark.options import parse_sink_options, parse_source_options


def rows(start: int, stop: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [
            pa.array([f"k{i}".encode() for i in range(start, stop)], pa.binary()),
            pa.array([f"v{i}".encode() for i in range(start, stop)], pa.binary()),
        ],
        names=["key", "value"],
    )


def test_producer_and_fetcher_reopen_connections_closed_under_them(
    bootstrap, new_topic, consume_all
) -> None:
    topic = new_topic()
    sink = parse_sink_options({"kafka.bootstrap.servers": bootstrap, "topic": topic})
    assert producer.produce_arrow(iter([rows(0, 500)]), sink) == 500
    for connection in producer._state(sink).connections.values():
        connection.close()  # as a broker closes an idle connection
    assert producer.produce_arrow(iter([rows(500, 700), rows(700, 1000)]), sink) == 1000 - 500
    values = [m.value() for m in consume_all(topic, partitions=1, expected=1000)]
    assert values == [f"v{i}".encode() for i in range(1000)]  # in order, none twice

    source = parse_source_options(
        {"kafka.bootstrap.servers": bootstrap, "subscribe": topic}, "batch"
    )
    config = consumer_config(source)

    def read(start: int, stop: int) -> list[bytes]:
        batches = list(fetch_range(OffsetRange(topic, 0, start, stop), source, config))
        return [v for b in batches for v in b.column("value").to_pylist()]

    assert read(0, 400) == values[:400]
    for connection in list(client._connections.values()):
        connection.close()
    assert read(400, 1000) == values[400:]


def test_every_codec_is_written_and_read_back(bootstrap, new_topic) -> None:
    """compression.type makes compressed batches; the Fetch reader decompresses them."""
    for codec in ("gzip", "snappy", "lz4", "zstd"):
        topic = new_topic()
        sink = parse_sink_options(
            {"kafka.bootstrap.servers": bootstrap, "topic": topic, "kafka.compression.type": codec}
        )
        assert producer.produce_arrow(iter([rows(0, 300)]), sink) == 300
        source = parse_source_options(
            {"kafka.bootstrap.servers": bootstrap, "subscribe": topic}, "batch"
        )
        batches = list(fetch_range(OffsetRange(topic, 0, 0, 300), source, consumer_config(source)))
        assert [v for b in batches for v in b.column("value").to_pylist()] == [
            f"v{i}".encode() for i in range(300)
        ]
