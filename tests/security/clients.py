"""Round trips through the three client libraries, shared by the TLS and SASL listener tests.

Each takes the library's own connection options (security settings included), writes
records to partition 0 of a new topic and reads them back from the beginning. Also the
checks of a refused login: the error a confluent-kafka client reports, and whether a raw
connection was closed.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from integration.wire_client import WireClient
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaPythonTopicPartition
from kio.schema.sasl_authenticate.v2 import request as authenticate_v2
from kio.schema.sasl_handshake.v1 import request as handshake_v1

from odradek import EmbeddedBroker


def new_topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def logged(broker: EmbeddedBroker, text: str, timeout: float = 30) -> bool:
    """Whether the broker's log has (or within ``timeout`` s gets) a line containing ``text``."""
    deadline = time.monotonic() + timeout
    while True:
        if any(text in line for line in list(broker.log_lines)):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def confluent_round_trip(config: dict[str, Any], topic: str, values: list[bytes]) -> list[bytes]:
    producer = Producer(config)
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(30) == 0
    return confluent_consume(config, topic, len(values))


def confluent_consume(config: dict[str, Any], topic: str, count: int) -> list[bytes]:
    """The first ``count`` records of partition 0, read from its beginning."""
    consumer = Consumer({**config, "group.id": f"g-{topic}", "enable.auto.commit": False})
    received: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        while len(received) < count:
            message = consumer.poll(30)
            assert message is not None and message.error() is None
            received.append(message.value())
    finally:
        consumer.close()
    return received


def kafka_python_round_trip(
    options: dict[str, Any], topic: str, values: list[bytes]
) -> list[bytes]:
    producer = KafkaProducer(**options)
    for value in values:
        producer.send(topic, value)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(**options, consumer_timeout_ms=30000)
    try:
        consumer.assign([KafkaPythonTopicPartition(topic, 0)])
        consumer.seek(KafkaPythonTopicPartition(topic, 0), 0)
        return [next(consumer).value for _ in values]
    finally:
        consumer.close()


def aiokafka_round_trip(options: dict[str, Any], topic: str, values: list[bytes]) -> list[bytes]:
    async def round_trip() -> list[bytes]:
        producer = AIOKafkaProducer(**options)
        await producer.start()
        try:
            for value in values:
                await producer.send_and_wait(topic, value)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, auto_offset_reset="earliest", **options)
        await consumer.start()
        try:
            return [(await consumer.getone()).value for _ in values]
        finally:
            await consumer.stop()

    return asyncio.run(asyncio.wait_for(round_trip(), 60))


def plain_login(address: str, user: str, password: str) -> WireClient:
    """A raw kio client logged in with SASL/PLAIN (handshake v1, authenticate v2)."""
    client = WireClient(address)
    assert client.call(handshake_v1.SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
    token = f"\0{user}\0{password}".encode()
    assert client.call(authenticate_v2.SaslAuthenticateRequest(auth_bytes=token)).error_code == 0
    return client


def confluent_login_error(config: dict[str, Any]) -> KafkaError:
    """The first error a confluent-kafka producer reports when it tries to connect."""
    errors: list[KafkaError] = []
    producer = Producer({**config, "error_cb": errors.append, "reconnect.backoff.ms": 1000})
    deadline = time.monotonic() + 30
    while not errors and time.monotonic() < deadline:
        producer.poll(0.1)
    assert errors, "no error reported"
    return errors[0]


def closed(client: WireClient) -> bool:
    """Whether the broker closed the connection (read to its end); the client is closed."""
    try:
        return client.sock.recv(1) == b""
    except ConnectionError:
        return True
    finally:
        client.close()


def produce_until_logged(
    config: dict[str, Any], broker: EmbeddedBroker, text: str, topic: str
) -> list[bytes]:
    """Produce one record at a time until the broker logs ``text`` (a re-authentication, say);
    the records sent, each acknowledged."""
    producer = Producer(config)
    values: list[bytes] = []
    while not logged(broker, text, timeout=0):
        values.append(f"r {len(values)}".encode())
        producer.produce(topic, values[-1])
        assert producer.flush(30) == 0
        time.sleep(0.05)  # a few records per session, not thousands
    return values
