"""A real broker stopped cleanly, then one segment per partition damaged on disk: it starts,
serves every acknowledged record, and the untouched partition is unaffected.

Regression for start-up spinning forever on a batch length of -12, a phantom offset from
a length of 0, and "[Errno 22] Invalid argument" on random bytes after the last batch.
"""

from __future__ import annotations

import random
import struct
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek import EmbeddedBroker

TIMEOUT = 30
#: What is written after each damaged partition's last batch (the last partition is left alone).
DAMAGE: list[bytes] = [
    *(
        struct.pack(">qi", 1_000, length) + b"\x00\x00\x00\x00\x02" + bytes(44)
        for length in (-12, 0, 2**31 - 1)
    ),
    *(random.Random(seed).randbytes(random.Random(seed).randrange(1, 200)) for seed in (1, 3, 7)),
]
PARTITIONS = len(DAMAGE) + 1
PER_PARTITION = 20


def produce(servers: str, topic: str, tag: str) -> dict[int, list[bytes]]:
    """Acknowledged values written to each partition (acks=all, every delivery checked)."""
    producer = Producer({"bootstrap.servers": servers, "linger.ms": 5, "acks": "all"})
    acked: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    errors = []

    def delivered(err, msg) -> None:
        if err is not None:
            errors.append(err)
        else:
            acked[msg.partition()].append(msg.value())

    for p in range(PARTITIONS):
        for i in range(PER_PARTITION):
            producer.produce(
                topic, b"%s-%d-%d" % (tag.encode(), p, i), partition=p, on_delivery=delivered
            )
        producer.flush(TIMEOUT)  # one request per partition: several batches per segment
    assert producer.flush(TIMEOUT) == 0 and not errors
    return acked


def consume_all(servers: str, topic: str) -> dict[int, list[bytes]]:
    """Every record of every partition, read from the start up to the high watermark."""
    consumer = Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": f"g-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
        }
    )
    out: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    try:
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=TIMEOUT)[1]
            for p in range(PARTITIONS)
        }
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        remaining = sum(ends.values())
        while remaining > 0:
            msg = consumer.poll(TIMEOUT)
            assert msg is not None, f"no record within {TIMEOUT} s, {remaining} still expected"
            assert msg.error() is None, msg.error()
            out[msg.partition()].append(msg.value())
            remaining -= 1
    finally:
        consumer.close()
    return out


def test_damaged_segments_after_a_clean_shutdown(tmp_path: Path) -> None:
    topic = f"damage-{uuid.uuid4().hex[:8]}"
    broker = EmbeddedBroker(data_dir=tmp_path / "data", start_timeout=TIMEOUT)
    with broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        (created,) = admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values()
        created.result(TIMEOUT)
        acked = produce(broker.bootstrap_servers, topic, "before")
        broker.stop()  # SIGTERM: a clean shutdown, the marker written
        for p, tail in enumerate(DAMAGE):
            with open(tmp_path / "data" / f"{topic}-{p}" / f"{0:020d}.log", "ab") as f:
                f.write(tail)
        broker.start()  # raises BrokerStartError unless it is ready within TIMEOUT
        assert consume_all(broker.bootstrap_servers, topic) == acked
        logged = "".join(broker.log_lines)
        for p in range(len(DAMAGE)):
            assert f"{topic}-{p}/{0:020d}.log" in logged
        assert "offline" not in logged

        # new writes land after the surviving records and survive the next restart
        more = produce(broker.bootstrap_servers, topic, "after")
        broker.restart()
        assert consume_all(broker.bootstrap_servers, topic) == {
            p: acked[p] + more[p] for p in range(PARTITIONS)
        }
