"""A real broker whose log dir is a tiny tmpfs fills it up: the produce requests that do not
fit answer KAFKA_STORAGE_ERROR, nothing goes offline, every acknowledged record is served,
and producing goes on once space is freed, also after a restart.

Mounting needs root (these tests run as root); where it is not permitted the test skips
and says so.
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek import EmbeddedBroker

TIMEOUT = 30
VALUE = 20_000


@pytest.fixture
def small_disk(tmp_path) -> Iterator[Path]:
    path = tmp_path / "disk"
    path.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs for a real full disk: {done.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True)


def produce_one(producer: Producer, topic: str, value: bytes) -> KafkaError | None:
    """Send one record and wait for its answer (retries 0: the broker's own error)."""
    outcome: list[KafkaError | None] = []
    producer.produce(topic, value, partition=0, on_delivery=lambda err, msg: outcome.append(err))
    producer.flush(TIMEOUT)
    assert len(outcome) == 1
    return outcome[0]


def served(servers: str, topic: str, partition: int) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": f"g-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
        }
    )
    try:
        tp = TopicPartition(topic, partition)
        _, end = consumer.get_watermark_offsets(tp, timeout=TIMEOUT)
        consumer.assign([TopicPartition(topic, partition, 0)])
        values = []
        while len(values) < end:
            msg = consumer.poll(TIMEOUT)
            assert msg is not None and msg.error() is None
            values.append(msg.value())
        return values
    finally:
        consumer.close()


def test_a_full_disk_refuses_produce_requests_and_recovers_when_space_returns(small_disk):
    topic = f"full-{uuid.uuid4().hex[:8]}"
    ballast = small_disk / "ballast"
    with EmbeddedBroker(data_dir=small_disk / "data") as broker:
        servers = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": servers})
        (created,) = admin.create_topics([NewTopic(topic, 1, 1)]).values()
        created.result(TIMEOUT)
        ballast.write_bytes(bytes(512 * 1024))
        producer = Producer({"bootstrap.servers": servers, "retries": 0, "linger.ms": 0})
        acked: list[bytes] = []
        error = None
        for i in range(1000):
            value = b"%04d" % i + bytes(VALUE)
            error = produce_one(producer, topic, value)
            if error is not None:
                break
            acked.append(value)
        assert error is not None and error.code() == KafkaError.KAFKA_STORAGE_ERROR, error
        assert len(acked) > 10
        retried = produce_one(producer, topic, b"again" + bytes(VALUE))  # as a producer retries
        assert retried is not None and retried.code() == KafkaError.KAFKA_STORAGE_ERROR
        assert served(servers, topic, 0) == acked
        assert "offline" not in "".join(broker.log_lines)

        ballast.unlink()
        assert produce_one(producer, topic, b"space again") is None
        broker.restart()
        assert served(broker.bootstrap_servers, topic, 0) == acked + [b"space again"]
