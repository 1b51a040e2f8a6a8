"""Topic config compression.type on append (Kafka's LogValidator recompression), in the log and
through a real broker and client."""

from __future__ import annotations

import uuid

import pytest
from codec_spec import CODECS, build, parse

from odradek.storage import Log, LogConfig, errors
from odradek.storage.errors import InvalidConfig

NOW = 1_000_000
RECORDS = [(b"k%d" % i, b"value %d " % i * 20, NOW + i) for i in range(50)] + [
    (None, None, NOW + 60)
]
HEADERS = [[(b"trace", b"%d" % i)] for i in range(len(RECORDS))]


def stored(log: Log):
    return parse(b"".join(r.read_bytes() for r in log.read(0, 1 << 30).regions))


def as_written(batches):
    return [(r.offset, r.key, r.value, r.timestamp, r.headers) for b in batches for r in b.records]


@pytest.mark.parametrize("source", ["none", "gzip", "snappy", "lz4", "zstd"])
@pytest.mark.parametrize("target", ["uncompressed", "gzip", "snappy", "lz4", "zstd"])
def test_batches_are_stored_in_the_topics_codec(tmp_path, source, target):
    log = Log(tmp_path / "t-0", LogConfig(compression_type=target), now_ms=NOW)
    log.append(build([(b"x", b"first", NOW)]), leader_epoch=0, now_ms=NOW)
    blob = build(
        RECORDS,
        codec=CODECS[source],
        producer_id=3,
        producer_epoch=1,
        base_sequence=0,
        headers=HEADERS,
    )
    info = log.append(blob, leader_epoch=0, now_ms=NOW)
    assert (info.first_offset, info.last_offset) == (1, len(RECORDS))
    first, batch = stored(log)
    want_codec = 0 if target == "uncompressed" else CODECS[target]
    assert first.codec == batch.codec == want_codec
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (3, 1, 0)
    expected = [(1 + i, k, v, ts, h) for i, ((k, v, ts), h) in enumerate(zip(RECORDS, HEADERS))]
    assert as_written([batch]) == expected
    log.close()


def test_producer_keeps_the_batch_byte_for_byte(tmp_path):
    log = Log(tmp_path / "t-0", LogConfig(), now_ms=NOW)
    blob = build(RECORDS, codec=CODECS["gzip"])
    log.append(blob, leader_epoch=0, now_ms=NOW)
    data = b"".join(r.read_bytes() for r in log.read(0, 1 << 30).regions)
    assert (
        data[17:] == blob[17:]
    )  # all but baseOffset, batchLength and leader epoch patched in place
    log.close()


def test_a_corrupt_batch_is_rejected_not_recompressed(tmp_path):
    log = Log(tmp_path / "t-0", LogConfig(compression_type="zstd"), now_ms=NOW)
    blob = bytearray(build(RECORDS, codec=CODECS["gzip"]))
    blob[-3] ^= 0xFF
    with pytest.raises(errors.CorruptRecord):
        log.append(bytes(blob), leader_epoch=0, now_ms=NOW)
    assert log.log_end_offset == 0
    log.close()


def test_control_batches_are_not_recompressed(tmp_path):
    log = Log(tmp_path / "t-0", LogConfig(compression_type="zstd"), now_ms=NOW)
    marker = build(
        [(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00", NOW)],
        producer_id=5,
        producer_epoch=0,
        extra_attributes=0x30,
    )
    log.append(marker, leader_epoch=0, now_ms=NOW, from_client=False)
    assert stored(log)[0].codec == 0
    log.close()


@pytest.mark.parametrize("level, xfl", [(1, 4), (9, 2)])
def test_gzip_level_is_applied(tmp_path, level, xfl):
    log = Log(
        tmp_path / "t-0",
        LogConfig(compression_type="gzip", compression_gzip_level=level),
        now_ms=NOW,
    )
    log.append(build(RECORDS), leader_epoch=0, now_ms=NOW)
    data = b"".join(r.read_bytes() for r in log.read(0, 1 << 30).regions)
    assert data[61:63] == b"\x1f\x8b" and data[61 + 8] == xfl  # gzip's XFL: 2 = best, 4 = fastest
    log.close()


@pytest.mark.parametrize(
    "props",
    [
        {"compression.gzip.level": "0"},
        {"compression.gzip.level": "10"},
        {"compression.lz4.level": "18"},
        {"compression.zstd.level": "23"},
        {"compression.type": "brotli"},
    ],
)
def test_bad_levels_are_rejected(props):
    with pytest.raises(InvalidConfig):
        LogConfig.from_properties(props)


def test_gzip_batch_on_a_zstd_topic_through_a_broker(odradek_broker):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"zstd-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": odradek_broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 1, config={"compression.type": "zstd"})])[topic].result(
        timeout=30
    )
    producer = Producer(
        {
            "bootstrap.servers": odradek_broker.bootstrap_servers,
            "compression.type": "gzip",
            "linger.ms": 50,
            "enable.idempotence": True,
        }
    )
    sent = [(b"key-%d" % i, b"value-%d" % i * 10, [("h", b"%d" % i)]) for i in range(200)]
    for key, value, headers in sent:
        producer.produce(topic, value, key, headers=headers)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": odradek_broker.bootstrap_servers,
            "group.id": topic,
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = []
    try:
        for _ in range(300):
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                got.append((msg.key(), msg.value(), msg.headers()))
            if len(got) == len(sent):
                break
    finally:
        consumer.close()
    assert got == sent
    segments = list(odradek_broker.data_dir.rglob(f"{topic}-0/*.log"))
    batches = [b for seg in segments for b in parse(seg.read_bytes())]
    assert batches and {b.codec for b in batches} == {CODECS["zstd"]}
    assert sum(len(b.records) for b in batches) == len(sent)
