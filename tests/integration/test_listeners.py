"""Every entry of `listeners` is served, and Metadata advertises the endpoint of the listener a client came in on.

As in Kafka: advertised.listeners is matched to listeners by name, a listener
left out of advertised.listeners is served but its clients do not learn of the
broker (LISTENER_NOT_FOUND), and SASL listeners stop start-up with a message (SSL
listeners are served: tests/security).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.describe_cluster.v1 import request as describe_cluster_v1

from odradek import EmbeddedBroker
from odradek.protocol.errors import ErrorCode

from .wire_client import WireClient, metadata

PROTOCOLS = "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,HIDDEN:PLAINTEXT"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def hidden_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def broker(hidden_port: int) -> Iterator[EmbeddedBroker]:
    config = {
        "listeners": f"PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0,HIDDEN://127.0.0.1:{hidden_port}",
        # INTERNAL is advertised under another host name than it binds, HIDDEN not at all.
        "advertised.listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://localhost:0",
        "listener.security.protocol.map": PROTOCOLS,
    }
    with EmbeddedBroker(config=config) as b:
        yield b


def test_each_listener_advertises_its_own_endpoint(broker: EmbeddedBroker) -> None:
    assert set(broker.listeners) == {"PLAINTEXT", "INTERNAL"}
    plaintext, internal = broker.listeners["PLAINTEXT"], broker.listeners["INTERNAL"]
    assert internal.startswith("localhost:") and plaintext != internal
    topic = f"listeners-{uuid.uuid4().hex[:8]}"
    for advertised in (plaintext, internal):
        port = int(advertised.rsplit(":", 1)[1])
        response = metadata(f"127.0.0.1:{port}", topic)
        (node,) = response.brokers
        assert f"{node.host}:{node.port}" == advertised
        assert response.topics[0].partitions[0].leader_id == node.node_id

    client = WireClient(f"127.0.0.1:{int(internal.rsplit(':', 1)[1])}")
    try:
        cluster = client.call(
            describe_cluster_v1.DescribeClusterRequest(
                include_cluster_authorized_operations=False, endpoint_type=1
            )
        )
    finally:
        client.close()
    assert [f"{b.host}:{b.port}" for b in cluster.brokers] == [internal]


def test_a_client_works_through_the_second_listener(broker: EmbeddedBroker) -> None:
    bootstrap = broker.listeners["INTERNAL"]
    topic = f"second-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, b"through INTERNAL")
    assert producer.flush(30) == 0
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        message = consumer.poll(30)
        assert message is not None and message.error() is None
        assert message.value() == b"through INTERNAL"
    finally:
        consumer.close()


def test_a_listener_that_is_not_advertised(broker: EmbeddedBroker, hidden_port: int) -> None:
    topic = f"hidden-{uuid.uuid4().hex[:8]}"
    response = metadata(f"127.0.0.1:{hidden_port}", topic)
    assert response.brokers == ()
    (partition,) = response.topics[0].partitions
    assert (partition.error_code, partition.leader_id) == (ErrorCode.listener_not_found, -1)


def serve(tmp_path: Path, *overrides: str) -> subprocess.CompletedProcess:
    args = [sys.executable, "-m", "odradek", "serve", "--data-dir", str(tmp_path)]
    for override in overrides:
        args += ["-o", override]
    return subprocess.run(args, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    "overrides",
    [
        ("listeners=SASL_PLAINTEXT://127.0.0.1:0", "security.inter.broker.protocol=SASL_PLAINTEXT"),
        (
            "listeners=PLAINTEXT://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,EXTERNAL:SASL_SSL",
        ),
    ],
)
def test_sasl_listeners_without_a_served_mechanism_stop_start_up(
    tmp_path: Path, overrides: tuple[str, ...]
) -> None:
    """Kafka's default sasl.enabled.mechanisms is GSSAPI, which is not implemented."""
    result = serve(tmp_path, *overrides)
    assert result.returncode == 2
    assert "sasl.enabled.mechanisms GSSAPI cannot be served" in result.stderr
    assert "odradek ready" not in result.stdout


def test_advertising_an_unknown_listener_stops_start_up(tmp_path: Path) -> None:
    result = serve(
        tmp_path,
        "listeners=PLAINTEXT://127.0.0.1:0",
        "advertised.listeners=SSL://kafka.example:9093",
    )
    assert result.returncode == 2
    assert "advertised.listeners listener names must be equal to or a subset" in result.stderr
