"""Control records (transaction markers) are never returned as data, and never stall a read.

Odradek has no transactions yet, so no client can write a marker: the test writes v2 record
batches, markers included, straight into a partition's log with odradek's storage API (built
here from the record-batch spec), then starts a broker on that data dir and reads it through
the source, batch and streaming. Aborted transactions need the broker's transaction index and
cannot be tested until transactions exist.
"""

from __future__ import annotations

import json
import struct
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from crc32c import crc32c

from odradek.server.embedded import EmbeddedBroker
from odradek.storage.config import LogConfig
from odradek.storage.log import Log

TRANSACTIONAL = 0x10
CONTROL = 0x20
COMMIT = 1


def varint(n: int) -> bytes:
    """Zig-zag varint, as record fields are encoded."""
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def record(offset_delta: int, key: bytes | None, value: bytes | None) -> bytes:
    body = b"\x00" + varint(0) + varint(offset_delta)
    for field in (key, value):
        body += varint(-1) if field is None else varint(len(field)) + field
    body += varint(0)  # no headers
    return varint(len(body)) + body


def record_batch(
    records: list[tuple[bytes | None, bytes | None]],
    *,
    attributes: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytes:
    """A magic-2 batch: baseOffset and the epoch are stamped by the log, the CRC covers attributes onwards."""
    now = int(time.time() * 1000)
    tail = struct.pack(
        ">hiqqqhii",
        attributes,
        len(records) - 1,
        now,
        now,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    tail += b"".join(record(i, k, v) for i, (k, v) in enumerate(records))
    return struct.pack(">qiibI", 0, 4 + 1 + 4 + len(tail), 0, 2, crc32c(tail)) + tail


def commit_marker(producer_id: int) -> bytes:
    """A control batch holding one COMMIT record: key (version, type), value (version, coordinator epoch)."""
    return record_batch(
        [(struct.pack(">hh", 0, COMMIT), struct.pack(">hi", 0, 0))],
        attributes=TRANSACTIONAL | CONTROL,
        producer_id=producer_id,
        producer_epoch=0,
    )


def transaction(producer_id: int, values: list[bytes]) -> bytes:
    return record_batch(
        [(None, v) for v in values],
        attributes=TRANSACTIONAL,
        producer_id=producer_id,
        producer_epoch=0,
        base_sequence=0,
    )


# offset -> value; 3 and 8 are COMMIT markers, 8 the last record of the log.
LOG = [
    transaction(4242, [b"t1-0", b"t1-1", b"t1-2"]),  # 0-2
    commit_marker(4242),  # 3
    record_batch([(None, b"plain-0"), (None, b"plain-1")]),  # 4-5
    transaction(4243, [b"t2-0", b"t2-1"]),  # 6-7
    commit_marker(4243),  # 8
]
DATA = {0: b"t1-0", 1: b"t1-1", 2: b"t1-2", 4: b"plain-0", 5: b"plain-1", 6: b"t2-0", 7: b"t2-1"}
LOG_END = 9


@pytest.fixture(scope="module")
def markers_broker(tmp_path_factory):
    """A broker over a topic whose only partition holds LOG, written with Log.append while it was down."""
    data_dir = tmp_path_factory.mktemp("markers")
    topic = f"markers-{uuid.uuid4().hex[:8]}"
    broker = EmbeddedBroker(data_dir=data_dir)
    with broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)
        broker.stop()
        log = Log(Path(data_dir) / f"{topic}-0", LogConfig(), clean_shutdown=True)
        try:
            for blob in LOG:
                log.append(blob, leader_epoch=0, now_ms=int(time.time() * 1000), from_client=False)
            assert log.log_end_offset == LOG_END
        finally:
            log.close()
        broker.start()
        yield broker.bootstrap_servers, topic


def read(spark, bootstrap, topic, **options):
    df = (
        spark.read.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .options(**options)
        .load()
    )
    return sorted((r.offset, bytes(r.value)) for r in df.select("offset", "value").collect())


def test_batch_read_skips_markers_and_ends_after_the_last_one(spark, markers_broker):
    bootstrap, topic = markers_broker
    assert read(spark, bootstrap, topic) == sorted(DATA.items())


def test_ranges_starting_or_ending_at_a_marker(spark, markers_broker):
    """Under read_uncommitted too: markers are never data, whatever the isolation level."""
    bootstrap, topic = markers_broker
    uncommitted = {"kafka.isolation.level": "read_uncommitted"}
    assert read(
        spark, bootstrap, topic, endingOffsets=f'{{"{topic}":{{"0":4}}}}', **uncommitted
    ) == [(o, DATA[o]) for o in (0, 1, 2)]
    assert read(
        spark,
        bootstrap,
        topic,
        startingOffsets=f'{{"{topic}":{{"0":3}}}}',
        endingOffsets=f'{{"{topic}":{{"0":6}}}}',
        **uncommitted,
    ) == [(4, b"plain-0"), (5, b"plain-1")]
    assert (
        read(spark, bootstrap, topic, startingOffsets=f'{{"{topic}":{{"0":8}}}}', **uncommitted)
        == []
    )
    # minPartitions cuts the partition into ranges, some of which hold nothing but a marker.
    assert read(spark, bootstrap, topic, minPartitions="9", **uncommitted) == sorted(DATA.items())


def test_streaming_skips_markers_and_checkpoints_the_log_end(spark, markers_broker, tmp_path):
    """A range whose last offsets are markers ends at the partition's end, not after pollTimeoutMs."""
    bootstrap, topic = markers_broker
    query = (
        spark.readStream.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("kafkaConsumer.pollTimeoutMs", "600000")
        .load()
        .select("offset", "value")
        .writeStream.format("parquet")
        .option("path", str(tmp_path / "t"))
        .option("checkpointLocation", str(tmp_path / "c"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(120), "query stalled"
    finally:
        query.stop()
    assert query.exception() is None
    rows = sorted(
        (r.offset, bytes(r.value)) for r in spark.read.parquet(str(tmp_path / "t")).collect()
    )
    assert rows == sorted(DATA.items())
    assert json.loads(query.lastProgress["sources"][0]["endOffset"]) == {topic: {"0": LOG_END}}
