"""Client quotas on a real broker process, driven by confluent-kafka and raw kio requests.

The module's broker measures quotas over 3 windows of 1 s (``quota.window.num`` 3) instead
of Kafka's 11: a client may take ``num - 1`` windows' worth of its quota at once before
the windowed rate throttles it, and fewer windows let the tests see the steady rate after
that first burst within seconds. A client that sends as fast as it may takes its quota in
bursts, a cycle of ``num`` windows long (the first request after a sample expires catches
up), so rates are measured over whole cycles: 9 s from the 3rd second. The clients'
requests are kept small against the windows (a request counts for at most ``num``
windows, so one much larger than the quota allows in that time would not be held back in
full). Each test uses client ids of its own.
"""

from __future__ import annotations

import datetime
import json
import time
import urllib.request
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.create_topics.v5 import request as create_v5
from kio.schema.create_topics.v7 import request as create_v7
from kio.schema.metadata.v12.request import MetadataRequest
from prometheus_client.parser import text_string_to_metric_families

from odradek import EmbeddedBroker
from odradek.protocol.errors import ErrorCode
from tests.admin.kio_client import KioClient
from tests.quota.quota_requests import alter_quotas, describe_quotas, described

EXACT, DEFAULT, ANY = 0, 1, 2


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    config = {
        "metrics.http.listener": "127.0.0.1:0",
        "quota.window.num": "3",
        # A token bucket of two windows: a burst of two partitions at 1 a second.
        "controller.quota.window.num": "2",
    }
    with EmbeddedBroker(config=config) as b:
        yield b


def create_topic(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)


def quota_samples(broker: EmbeddedBroker) -> dict[str, dict[tuple[str, str], float]]:
    """Quota gauges by name -> (user, client id) -> value, from /metrics."""
    assert broker.metrics_url is not None
    with urllib.request.urlopen(broker.metrics_url, timeout=30) as response:
        body = response.read().decode()
    out: dict[str, dict[tuple[str, str], float]] = {}
    for family in text_string_to_metric_families(body):
        for s in family.samples:
            if "client_id" in s.labels:
                key = (s.labels["user"], s.labels["client_id"])
                out.setdefault(s.name, {})[key] = s.value
    return out


def rate_between(events: list[tuple[float, int]], start: float, end: float) -> float:
    """Bytes per second of the (time, bytes) events within [start, end)."""
    return sum(n for t, n in events if start <= t < end) / (end - start)


def test_alter_and_describe_with_kafkas_matching(broker):
    bootstrap = broker.bootstrap_servers
    entries = [
        ({"user": "alice"}, {"producer_byte_rate": 1024.0}),
        ({"user": "alice", "client-id": "app"}, {"consumer_byte_rate": 2048.0}),
        ({"user": None}, {"request_percentage": 50.0}),
        ({"client-id": None}, {"controller_mutation_rate": 2.5}),
        ({"client-id": "app"}, {"producer_byte_rate": 4096.0}),
    ]
    assert alter_quotas(bootstrap, entries) == [(0, None)] * 5

    everything = described(describe_quotas(bootstrap, []))
    assert everything[(("user", "alice"),)] == {"producer_byte_rate": 1024.0}
    assert everything[(("user", "alice"), ("client-id", "app"))] == {"consumer_byte_rate": 2048.0}
    assert everything[(("user", None),)] == {"request_percentage": 50.0}
    assert everything[(("client-id", None),)] == {"controller_mutation_rate": 2.5}

    exact = described(describe_quotas(bootstrap, [("user", EXACT, "alice")]))
    assert set(exact) == {(("user", "alice"),), (("user", "alice"), ("client-id", "app"))}
    strict = described(describe_quotas(bootstrap, [("user", EXACT, "alice")], strict=True))
    assert set(strict) == {(("user", "alice"),)}
    defaults = described(describe_quotas(bootstrap, [("user", DEFAULT, None)]))
    assert set(defaults) == {(("user", None),)}
    any_client = described(describe_quotas(bootstrap, [("client-id", ANY, None)], strict=True))
    assert set(any_client) == {(("client-id", None),), (("client-id", "app"),)}

    # Removing the last key removes the entity.
    assert alter_quotas(bootstrap, [({"client-id": "app"}, {"producer_byte_rate": None})]) == [
        (0, None)
    ]
    left = described(describe_quotas(bootstrap, [("client-id", EXACT, "app")], strict=True))
    assert left == {}
    # The defaults would apply to the other tests' clients (a default user's quota comes
    # before any client id's): gone again.
    removed = [(entity, dict.fromkeys(ops)) for entity, ops in entries[:4]]
    assert alter_quotas(bootstrap, removed) == [(0, None)] * 4
    assert described(describe_quotas(bootstrap, [])) == {}


def test_validate_only_and_invalid_requests(broker):
    bootstrap = broker.bootstrap_servers
    ok = alter_quotas(bootstrap, [({"user": "v"}, {"producer_byte_rate": 10.0})], True)
    assert ok == [(0, None)]
    assert described(describe_quotas(bootstrap, [("user", EXACT, "v")])) == {}

    bad = alter_quotas(
        bootstrap,
        [
            ({"user": "v"}, {"no_such_quota": 1.0}),
            ({"user": "v"}, {"producer_byte_rate": 10.5}),
            ({"user": "v"}, {"request_percentage": -1.0}),
            ({"group": "g"}, {"producer_byte_rate": 10.0}),
            ({"user": "v"}, {"consumer_byte_rate": 100.0}),
        ],
    )
    assert [code for code, _ in bad] == [ErrorCode.invalid_request] * 4 + [0]
    assert "no_such_quota" in (bad[0][1] or "")

    for components in (
        [("user", EXACT, "a"), ("user", EXACT, "b")],
        [("", ANY, None)],
        [("user", EXACT, None)],
        [("user", 7, None)],
        [("ip", ANY, None), ("user", ANY, None)],
    ):
        response = describe_quotas(bootstrap, components)
        assert response.error_code == ErrorCode.invalid_request, components
        assert response.entries is None
    assert describe_quotas(bootstrap, [("ip", ANY, None)]).entries == ()


def test_quotas_survive_a_restart(tmp_path):
    """A single node keeps client quotas in its metadata file, beside SCRAM credentials."""
    with EmbeddedBroker(data_dir=tmp_path / "data") as broker:
        entity = {"user": "kept", "client-id": None}
        ops = [(entity, {"request_percentage": 5.0})]
        assert alter_quotas(broker.bootstrap_servers, ops) == [(0, None)]
        broker.restart()
        found = described(describe_quotas(broker.bootstrap_servers, []))
    assert found == {(("user", "kept"), ("client-id", None)): {"request_percentage": 5.0}}


def test_producer_is_held_to_its_byte_rate(broker):
    """A confluent-kafka producer sending as fast as it can is throttled to its
    producer_byte_rate (within 20% over several seconds), sees throttle_time_ms in its
    statistics, and every record it was told was written is there."""
    bootstrap, topic, quota = broker.bootstrap_servers, "quota-produce", 200_000
    create_topic(bootstrap, topic)
    entity = {"client-id": "throttled-producer"}
    assert alter_quotas(bootstrap, [(entity, {"producer_byte_rate": float(quota)})]) == [(0, None)]
    acked: list[tuple[float, int]] = []
    throttles: list[int] = []

    def stats(text: str) -> None:
        for b in json.loads(text)["brokers"].values():
            throttles.append(b["throttle"]["max"])

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": "throttled-producer",
            "linger.ms": 5,
            # Requests well under the quota's windows: a 1 MB request counts for 5 s of a
            # 200 kB/s quota, longer than 3 windows keep it.
            "batch.size": 16384,
            "statistics.interval.ms": 500,
            "stats_cb": stats,
        }
    )

    def delivered(err, msg) -> None:
        if err is None:
            acked.append((time.monotonic(), len(msg.value())))

    payload = b"x" * 1000
    start = time.monotonic()
    while time.monotonic() - start < 12:
        try:
            producer.produce(topic, payload, on_delivery=delivered)
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
    producer.purge()
    producer.flush(30)
    rate = rate_between(acked, start + 3, start + 12)
    assert 0.8 * quota <= rate <= 1.2 * quota, rate
    assert max(throttles) > 0

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "check", "auto.offset.reset": "earliest"}
    )
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
    finally:
        consumer.close()
    assert high - low >= len(acked)

    found = quota_samples(broker)
    key = ("", "throttled-producer")
    assert found["kafka_server_produce_throttle_time"][key] > 0
    assert found["kafka_server_produce_byte_rate"][key] > 0


def test_acks_0_producer_is_held_to_its_byte_rate(broker):
    """acks=0 gets no answer to carry a throttle time: the broker only mutes the connection,
    and the records it appends come at the quota's rate (the high watermark's progress)."""
    bootstrap, topic, quota = broker.bootstrap_servers, "quota-acks0", 200_000
    create_topic(bootstrap, topic)
    entity = {"client-id": "acks0-producer"}
    assert alter_quotas(bootstrap, [(entity, {"producer_byte_rate": float(quota)})]) == [(0, None)]
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": "acks0-producer",
            "acks": 0,
            "linger.ms": 5,
            "batch.size": 16384,
        }
    )
    watcher = Consumer({"bootstrap.servers": bootstrap, "group.id": "acks0-watch"})
    partition = TopicPartition(topic, 0)
    marks: list[tuple[float, int]] = []  # (when, high watermark) at 3 s and at 12 s
    payload = b"z" * 1000
    start = time.monotonic()
    try:
        while (elapsed := time.monotonic() - start) < 12:
            if elapsed >= 3 and not marks:
                high = watcher.get_watermark_offsets(partition, timeout=10)[1]
                marks.append((time.monotonic(), high))
            try:
                producer.produce(topic, payload)
            except BufferError:
                producer.poll(0.01)
            producer.poll(0)
        marks.append((time.monotonic(), watcher.get_watermark_offsets(partition, timeout=10)[1]))
    finally:
        watcher.close()
        producer.purge()
        producer.flush(30)
    (t1, first), (t2, last) = marks
    rate = (last - first) * len(payload) / (t2 - t1)
    assert 0.8 * quota <= rate <= 1.2 * quota, rate


def test_consumer_is_held_to_its_byte_rate(broker):
    """A consumer reading a backlog as fast as it can gets consumer_byte_rate (within 20%),
    and reads every record once, in order: throttled fetches lose nothing."""
    bootstrap, topic, quota = broker.bootstrap_servers, "quota-fetch", 300_000
    create_topic(bootstrap, topic)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 16384})
    for i in range(8000):
        producer.produce(topic, b"%08d" % i + b"y" * 992)
        if i % 500 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0
    entity = {"client-id": "throttled-consumer"}
    assert alter_quotas(bootstrap, [(entity, {"consumer_byte_rate": float(quota)})]) == [(0, None)]

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": "throttled-consumer",
            "group.id": "quota-fetch",
            # Fetches small against the windows, as the producer's requests above.
            "max.partition.fetch.bytes": 65536,
            "fetch.max.bytes": 65536,
            "message.max.bytes": 65536,
            "auto.offset.reset": "earliest",
        }
    )
    received: list[tuple[float, int]] = []
    offsets: list[int] = []
    start = time.monotonic()
    try:
        consumer.subscribe([topic])
        while time.monotonic() - start < 12:
            message = consumer.poll(0.2)
            if message is None or message.error():
                continue
            received.append((time.monotonic(), len(message.value())))
            offsets.append(message.offset())
    finally:
        consumer.close()
    rate = rate_between(received, start + 3, start + 12)
    assert 0.8 * quota <= rate <= 1.2 * quota, rate
    assert offsets == list(range(len(offsets)))
    found = quota_samples(broker)
    assert found["kafka_server_fetch_throttle_time"][("", "throttled-consumer")] > 0


def test_request_percentage_throttles_a_busy_client(broker):
    """request_percentage: a client whose requests take more of a handler's time than its
    quota gets throttle_time_ms in its responses; another client id does not."""
    bootstrap = broker.bootstrap_servers
    entity = {"client-id": "busy"}
    assert alter_quotas(bootstrap, [(entity, {"request_percentage": 0.01})]) == [(0, None)]
    request = MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    with KioClient(bootstrap, client_id="busy") as busy:
        throttled = [busy.send(request).throttle_time for _ in range(50)]
    assert max(throttled).total_seconds() > 0
    with KioClient(bootstrap, client_id="idle") as idle:
        assert idle.send(request).throttle_time.total_seconds() == 0
    found = quota_samples(broker)
    assert found["kafka_server_request_throttle_time"][("", "busy")] > 0


def _create_topics(bootstrap: str, module, partitions: dict[str, int]):
    request = module.CreateTopicsRequest(
        topics=tuple(
            module.CreatableTopic(
                name=name, num_partitions=n, replication_factor=1, assignments=(), configs=()
            )
            for name, n in partitions.items()
        ),
        timeout=datetime.timedelta(seconds=30),
    )
    with KioClient(bootstrap, client_id="mutator") as client:
        return client.send(request)


def test_controller_mutation_rate_strict_and_permissive(broker):
    """KIP-599: CreateTopics v6+ refuses the topics after the token bucket ran dry with
    THROTTLING_QUOTA_EXCEEDED; v5 creates them all and answers the throttle time only."""
    bootstrap = broker.bootstrap_servers
    entity = {"client-id": "mutator"}
    assert alter_quotas(bootstrap, [(entity, {"controller_mutation_rate": 1.0})]) == [(0, None)]

    strict = _create_topics(bootstrap, create_v7, {"m-a": 2, "m-b": 1, "m-c": 1})
    codes = {t.name: t.error_code for t in strict.topics}
    # The burst of two goes to m-a; m-b may still overdraw; m-c is refused.
    assert codes == {"m-a": 0, "m-b": 0, "m-c": ErrorCode.throttling_quota_exceeded}
    assert strict.throttle_time.total_seconds() > 0

    permissive = _create_topics(bootstrap, create_v5, {"m-d": 1, "m-e": 1})
    assert [t.error_code for t in permissive.topics] == [0, 0]
    assert permissive.throttle_time.total_seconds() > 0
    found = quota_samples(broker)
    assert found["kafka_server_controllermutation_throttle_time"][("", "mutator")] > 0
    assert alter_quotas(bootstrap, [(entity, {"controller_mutation_rate": None})]) == [(0, None)]
