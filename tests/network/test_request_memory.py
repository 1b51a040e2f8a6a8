"""Request memory against a real broker process: queued.max.request.bytes and growing buffers.

Connections that declare huge requests and send a part of them cost the broker what
they sent, not what they declared; other clients are served meanwhile; and while the
pool is full a connection is muted, then resumes and is answered once memory frees.

Whether the broker has read what a raw socket sent is taken from /proc/net/tcp (the
sender's send queue and the broker's receive queue for that connection are both
empty), so nothing here waits on a clock to decide what happened.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from odradek import EmbeddedBroker
from odradek.protocol import schemas

MIB = 1024 * 1024


def vm_rss(pid: int) -> int:
    """A process's resident memory in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


def tcp_queues() -> dict[tuple[int, int], tuple[int, int]]:
    """(local port, remote port) -> (send queue, receive queue) of every IPv4 TCP socket."""
    queues = {}
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote, tx_rx = fields[1], fields[2], fields[4]
        tx, rx = (int(q, 16) for q in tx_rx.split(":"))
        queues[(int(local.split(":")[1], 16), int(remote.split(":")[1], 16))] = (tx, rx)
    return queues


def until(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)


class RawConnection:
    """A plain socket to the broker, which can tell whether the broker has read what it sent."""

    def __init__(self, broker: EmbeddedBroker) -> None:
        host, port = broker.bootstrap_servers.rsplit(":", 1)
        self.broker_port = int(port)
        self.sock = socket.create_connection((host, self.broker_port), timeout=60)
        self.port = self.sock.getsockname()[1]

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send_partial_request(self, declared: int, nbytes: int) -> None:
        """The size prefix of a ``declared``-byte request and only ``nbytes`` of its body."""
        self.sock.sendall(struct.pack(">i", declared) + b"\x01" * nbytes)

    def answer(self) -> int:
        """The correlation id of the next response."""
        data = b""
        while len(data) < 8:
            chunk = self.sock.recv(8 - len(data))
            assert chunk, "connection closed by the broker"
            data += chunk
        return struct.unpack(">i", data[4:8])[0]

    def all_read_by_broker(self) -> bool:
        queues = tcp_queues()
        return (
            queues[(self.port, self.broker_port)][0] == 0
            and queues[(self.broker_port, self.port)][1] == 0
        )

    def close(self) -> None:
        self.sock.close()


def api_versions(correlation_id: int, software_name: str) -> bytes:
    """A whole ApiVersions v3 request frame, as large as its client software name makes it."""
    header = struct.pack(">hhih", 18, 3, correlation_id, 1) + b"t" + b"\x00"
    body = schemas.encode(
        ApiVersionsRequest(client_software_name=software_name, client_software_version="1")
    )
    return struct.pack(">i", len(header) + len(body)) + header + body


def round_trip(bootstrap: str, value: bytes = b"v", count: int = 5) -> list[bytes]:
    """Produce ``count`` records to a new topic and consume them back, with librdkafka."""
    topic = f"t-{uuid.uuid4().hex[:8]}"
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "1",
            "linger.ms": 0,
            "message.max.bytes": 8 * MIB,
        }
    )
    for i in range(count):
        producer.produce(topic, value=value, key=str(i).encode())
    assert producer.flush(60) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": topic,
            "auto.offset.reset": "earliest",
            "fetch.max.bytes": 8 * MIB,
        }
    )
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < count and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            got.append(message.value())
    consumer.close()
    return got


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    """Default request limits: socket.request.max.bytes 100 MiB, queued.max.request.bytes 256 MiB."""
    with EmbeddedBroker(config={"message.max.bytes": str(8 * MIB)}) as b:
        yield b


@pytest.fixture(scope="module")
def small_pool_broker() -> Iterator[EmbeddedBroker]:
    """A pool of 4 MiB, as large as the largest request (Kafka's smallest valid setting)."""
    with EmbeddedBroker(
        config={"socket.request.max.bytes": str(4 * MIB), "queued.max.request.bytes": str(4 * MIB)}
    ) as b:
        yield b


def test_partial_requests_cost_what_arrived_and_other_clients_are_served(
    broker: EmbeddedBroker,
) -> None:
    assert round_trip(broker.bootstrap_servers) == [b"v"] * 5  # warm: imports and first topic done
    assert broker.pid is not None
    before = vm_rss(broker.pid)
    hogs = [RawConnection(broker) for _ in range(20)]
    try:
        for hog in hogs:
            hog.send_partial_request(100 * 1000 * 1000, 5 * MIB)
        until(lambda: all(hog.all_read_by_broker() for hog in hogs))
        # 20 x 100 MB declared, 20 x 5 MiB received: the broker holds about what arrived.
        grown = vm_rss(broker.pid) - before
        assert grown < 400 * MIB, f"broker grew by {grown // MIB} MiB"
        # 100 MiB held is well under the 256 MiB pool: nobody is muted, others are served.
        assert round_trip(broker.bootstrap_servers, value=b"w" * 1000) == [b"w" * 1000] * 5
    finally:
        for hog in hogs:
            hog.close()


def test_a_request_received_into_a_growing_mapping_is_stored_and_served(
    broker: EmbeddedBroker,
) -> None:
    """A Produce request above 2 MiB is received into memory that grows as it arrives; its
    records go to the log from there and come back whole."""
    value = bytes(range(256)) * (3 * MIB // 256)
    assert round_trip(broker.bootstrap_servers, value=value, count=2) == [value] * 2


def test_a_connection_muted_by_a_full_pool_resumes_and_is_answered(
    small_pool_broker: EmbeddedBroker,
) -> None:
    broker = small_pool_broker
    # Two partial requests of 2.5 MiB each: the second passes the 4 MiB pool and holds its pass.
    first, second = RawConnection(broker), RawConnection(broker)
    first.send_partial_request(4 * 1000 * 1000, 5 * MIB // 2)
    until(first.all_read_by_broker)
    second.send_partial_request(4 * 1000 * 1000, 5 * MIB // 2)
    until(second.all_read_by_broker)
    try:
        topic = f"t-{uuid.uuid4().hex[:8]}"
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "1"})
        producer.produce(topic, value=b"m" * 600_000)
        # The pool is full: the producer's connection is muted, its request not answered.
        assert producer.flush(3) == 1
        first.close()  # 2.5 MiB released: the pool has room, muted connections read again
        assert producer.flush(60) == 0
        # Both closed: what they held is back (were it leaked, the pool would stay exhausted and
        # mute every client after its first request), and a client's requests pass in turn.
        second.close()
        assert (
            round_trip(broker.bootstrap_servers, value=b"n" * 900_000, count=3)
            == [b"n" * 900_000] * 3
        )
    finally:
        first.close()
        second.close()


def test_partial_requests_that_fill_the_pool_between_them_all_complete(
    small_pool_broker: EmbeddedBroker,
) -> None:
    """Two 3 MiB requests, each partly received, fill the 4 MiB pool between them: the one that
    holds the pool's pass is read to its end, answered and freed, then the other one is."""
    first, second = RawConnection(small_pool_broker), RawConnection(small_pool_broker)
    frames = [api_versions(i, "a" * 3 * MIB) for i in (1, 2)]
    half = 9 * MIB // 4
    try:
        first.send(frames[0][:half])
        until(first.all_read_by_broker)
        second.send(frames[1][:half])  # passes the pool's size: this connection takes the pass
        until(second.all_read_by_broker)
        # The first is muted when it reads again: the rest of its request waits to be read.
        sending = threading.Thread(target=first.send, args=(frames[0][half:],))
        sending.start()
        second.send(frames[1][half:])
        assert second.answer() == 2
        assert first.answer() == 1
        sending.join()
    finally:
        first.close()
        second.close()
