"""`odradek serve` as a process: start-up errors, clean and crash restarts keep acknowledged records."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from odradek.server.embedded import EmbeddedBroker


def serve(*args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "odradek", "serve", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_bad_config_value_is_named(tmp_path: Path) -> None:
    result = serve("--data-dir", str(tmp_path), "--port", "0", "-o", "num.partitions=zero")
    assert result.returncode != 0
    assert "num.partitions" in result.stderr


def test_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = serve("--data-dir", str(tmp_path), "--port", str(port))
    assert result.returncode != 0
    assert "address already in use" in result.stderr


def test_locked_data_dir(tmp_path: Path) -> None:
    with EmbeddedBroker(data_dir=tmp_path):
        result = serve("--data-dir", str(tmp_path), "--port", "0")
    assert result.returncode != 0
    assert "locked" in result.stderr


def test_unwritable_data_dir(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    result = serve("--data-dir", str(blocker / "data"), "--port", "0")
    assert result.returncode != 0
    assert "data" in result.stderr


def produce(bootstrap: str, topic: str, n: int, start: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2})
    failures = []
    for i in range(start, start + n):
        producer.produce(
            topic,
            value=b"%d" % i,
            partition=0,
            on_delivery=lambda err, msg: failures.append(err) if err else None,
        )
    assert producer.flush(30) == 0
    assert failures == []


def consume_all(bootstrap: str, topic: str) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "r",
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        values = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == -191:  # _PARTITION_EOF
                    return values
                raise AssertionError(msg.error())
            values.append(msg.value())
        raise AssertionError("no end of partition")
    finally:
        consumer.close()


@pytest.mark.parametrize("hard", [False, True], ids=["sigterm", "sigkill"])
def test_restart_keeps_acknowledged_records(fresh_broker: EmbeddedBroker, hard: bool) -> None:
    topic = f"r-{uuid.uuid4().hex[:8]}"
    produce(fresh_broker.bootstrap_servers, topic, 500)
    fresh_broker.restart(hard=hard)
    produce(fresh_broker.bootstrap_servers, topic, 500, start=500)
    fresh_broker.restart(hard=hard)
    assert consume_all(fresh_broker.bootstrap_servers, topic) == [b"%d" % i for i in range(1000)]


def test_sigterm_exits_zero(tmp_path: Path) -> None:
    broker = EmbeddedBroker(data_dir=tmp_path).start()
    assert broker.stop() == 0


@pytest.mark.parametrize("hard", [False, True], ids=["sigterm", "sigkill"])
def test_idempotent_producer_across_broker_restarts(
    fresh_broker: EmbeddedBroker, hard: bool
) -> None:
    """Connections cut mid-stream (the broker restarts twice): no duplicates, no gaps."""
    import threading

    topic = f"idem-{uuid.uuid4().hex[:8]}"
    produce(fresh_broker.bootstrap_servers, topic, 1)  # creates the topic
    producer = Producer(
        {
            "bootstrap.servers": fresh_broker.bootstrap_servers,
            "enable.idempotence": True,
            "linger.ms": 1,
            "batch.num.messages": 50,
            "message.timeout.ms": 60000,
        }
    )
    failures: list = []
    restarts_done = threading.Event()
    produced: list[int] = []

    def run() -> None:
        # Keep producing until both restarts are over, so the stream spans them.
        i = 1
        while not restarts_done.is_set() or i < 500:
            producer.produce(
                topic,
                value=b"%d" % i,
                partition=0,
                on_delivery=lambda err, msg: failures.append(err) if err else None,
            )
            producer.poll(0.001)
            i += 1
        produced.append(i - 1)
        assert producer.flush(60) == 0

    thread = threading.Thread(target=run)
    thread.start()
    for _ in range(2):
        fresh_broker.restart(hard=hard)
    restarts_done.set()
    thread.join(90)
    assert produced and failures == []
    assert consume_all(fresh_broker.bootstrap_servers, topic) == [
        b"%d" % i for i in range(produced[0] + 1)
    ]
