"""/metrics of a real broker process, driven by confluent-kafka and read by prometheus_client's parsers.

Each test uses topics of its own on the module's broker, so counters of one test do
not leak into another's expectations; the all-topics series are checked against the
sum of the per-topic ones.
"""

from __future__ import annotations

import http.client
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families

from odradek import EmbeddedBroker

OPENMETRICS = "application/openmetrics-text; version=1.0.0"


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(config={"metrics.http.listener": "127.0.0.1:0"}) as b:
        yield b


def scrape(broker: EmbeddedBroker, accept: str | None = None) -> tuple[str, str]:
    """(content type, body) of one GET /metrics."""
    assert broker.metrics_url is not None
    request = urllib.request.Request(broker.metrics_url, headers={"Accept": accept or "*/*"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.headers["Content-Type"], response.read().decode()


def samples(broker: EmbeddedBroker) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Sample name -> (labels, value) of every sample, parsed by prometheus_client's parser."""
    _, body = scrape(broker)
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((sample.labels, sample.value))
    return out


def value(found, name: str, **labels: str) -> float:
    """The value of the one sample of ``name`` with exactly ``labels``."""
    matching = [v for got, v in found[name] if got == labels]
    assert len(matching) == 1, (name, labels, found.get(name))
    return matching[0]


def total(found, name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` whose labels include ``labels``."""
    return sum(v for got, v in found.get(name, []) if labels.items() <= got.items())


def create_topic(broker: EmbeddedBroker, name: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    future = admin.create_topics([NewTopic(name, 1, 1, config=configs)])[name]
    future.result(30)


def produce_one_by_one(broker: EmbeddedBroker, topic: str, values: list[bytes]) -> None:
    """One Produce request per value: each is flushed before the next is queued."""
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    for v in values:
        producer.produce(topic, v)
        assert producer.flush(30) == 0


def consume(broker: EmbeddedBroker, topic: str, count: int, group: str | None = None) -> int:
    """Read ``count`` records of ``topic`` from the start; with ``group``, commit after them."""
    config = {
        "bootstrap.servers": broker.bootstrap_servers,
        "group.id": group or "unused",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    consumer = Consumer(config)
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        read = 0
        while read < count:
            message = consumer.poll(10)
            assert message is not None, f"read {read} of {count}"
            assert message.error() is None, message.error()
            read += 1
        if group is not None:
            consumer.commit(offsets=[TopicPartition(topic, 0, count)], asynchronous=False)
        return read
    finally:
        consumer.close()


def test_produce_and_fetch_counters_match_what_was_sent(broker):
    create_topic(broker, "m-counts")
    values = [bytes([i]) * 100 for i in range(12)]
    produce_one_by_one(broker, "m-counts", values)
    assert consume(broker, "m-counts", 12) == 12
    found = samples(broker)

    def topic(name: str) -> float:
        return value(found, f"kafka_server_brokertopicmetrics_{name}_total", topic="m-counts")

    assert topic("messages_in") == 12
    assert topic("total_produce_requests") == 12
    assert topic("failed_produce_requests") == 0
    assert topic("bytes_rejected") == 0
    # Twelve batches of one record each: the record, its framing and a batch header.
    assert topic("bytes_in") > 12 * (61 + 100)
    # Everything was read once, whole batches; the log holds what came in.
    assert topic("bytes_out") == topic("bytes_in")
    assert value(found, "kafka_log_log_log_end_offset", topic="m-counts", partition="0") == 12
    assert value(found, "kafka_log_log_size_bytes", topic="m-counts", partition="0") == topic(
        "bytes_in"
    )
    assert value(found, "kafka_log_log_num_log_segments", topic="m-counts", partition="0") == 1
    assert topic("total_fetch_requests") >= 1  # the consumer may take all in one fetch
    assert topic("failed_fetch_requests") == 0
    # A Fetch's sending (its records by sendfile) is timed as its response send time.
    send = "kafka_network_requestmetrics_response_send_time_seconds"
    assert total(found, send + "_count", request="Fetch") >= 1
    assert total(found, send + "_sum", request="Fetch") > 0
    # As in Kafka, a consumer's Fetch counts as Fetch and as FetchConsumer (no follower here),
    # its errors under Fetch only.
    requests = "kafka_network_requestmetrics_requests_total"
    fetches = total(found, requests, request="Fetch")
    assert total(found, requests, request="FetchConsumer") == fetches >= 1
    assert total(found, requests, request="FetchFollower") == 0
    time_count = "kafka_network_requestmetrics_total_time_seconds_count"
    assert total(found, time_count, request="FetchConsumer") == fetches
    errors = "kafka_network_requestmetrics_errors_total"
    assert total(found, errors, request="Fetch") >= fetches
    assert total(found, errors, request="FetchConsumer") == 0


def test_all_topics_series_are_the_sum_of_the_topics(broker):
    create_topic(broker, "m-sum-a")
    create_topic(broker, "m-sum-b")
    produce_one_by_one(broker, "m-sum-a", [b"a"] * 3)
    produce_one_by_one(broker, "m-sum-b", [b"b"] * 4)
    found = samples(broker)
    for name in ("messages_in", "bytes_in", "bytes_out", "total_produce_requests"):
        series = found[f"kafka_server_brokertopicmetrics_{name}_total"]
        per_topic = sum(v for labels, v in series if "topic" in labels)
        assert value(found, f"kafka_server_brokertopicmetrics_{name}_total") == per_topic
    assert value(found, "kafka_server_brokertopicmetrics_messages_in_total", topic="m-sum-b") == 4


def test_produce_latency_histograms_count_every_produce_request(broker):
    create_topic(broker, "m-latency")
    before = samples(broker)
    produce_one_by_one(broker, "m-latency", [b"x"] * 7)
    after = samples(broker)

    def grown(name: str) -> float:
        return total(after, name, request="Produce") - total(before, name, request="Produce")

    assert grown("kafka_network_requestmetrics_requests_total") == 7
    parts = ("local", "remote", "response_queue", "response_send")
    for part in ("total", *parts, "request_queue", "throttle"):
        assert grown(f"kafka_network_requestmetrics_{part}_time_seconds_count") == 7
        # The +Inf bucket holds every observation.
        assert grown(f"kafka_network_requestmetrics_{part}_time_seconds_bucket") > 0
    assert grown("kafka_network_requestmetrics_request_bytes_count") == 7
    assert grown("kafka_network_requestmetrics_response_bytes_count") == 7
    for name in ("request_queue", "throttle"):  # zero by construction
        assert total(after, f"kafka_network_requestmetrics_{name}_time_seconds_sum") == 0
    # Writing a response is measured (a system call at least), and the total is its parts.
    assert grown("kafka_network_requestmetrics_response_send_time_seconds_sum") > 0
    assert grown("kafka_network_requestmetrics_total_time_seconds_sum") == pytest.approx(
        sum(grown(f"kafka_network_requestmetrics_{part}_time_seconds_sum") for part in parts)
    )
    errors = "kafka_network_requestmetrics_errors_total"
    assert (
        total(after, errors, request="Produce", error="NONE")
        - total(before, errors, request="Produce", error="NONE")
        == 7
    )


def test_produce_requests_with_acks_0_are_counted_without_a_response(broker):
    create_topic(broker, "m-acks0")
    requests = "kafka_network_requestmetrics_requests_total"
    before = total(samples(broker), requests, request="Produce")
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": 0})
    for v in [b"a", b"b", b"c"]:
        producer.produce("m-acks0", v)
        assert producer.flush(30) == 0
    # No answer says when the broker handled them: wait for the records, then the counts.
    messages = "kafka_server_brokertopicmetrics_messages_in_total"
    deadline = time.monotonic() + 30
    while (found := samples(broker)) and total(found, messages, topic="m-acks0") < 3:
        assert time.monotonic() < deadline, "the three records never arrived"
        time.sleep(0.05)
    assert total(found, requests, request="Produce") - before == 3


def test_a_rejected_batch_counts_as_failed_and_rejected(broker):
    create_topic(broker, "m-rejected", **{"max.message.bytes": "1000"})
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "retries": 0})
    failures = []
    producer.produce("m-rejected", b"z" * 2000, on_delivery=lambda err, _m: failures.append(err))
    producer.flush(30)
    assert failures and failures[0] is not None
    found = samples(broker)
    rejected = value(
        found, "kafka_server_brokertopicmetrics_bytes_rejected_total", topic="m-rejected"
    )
    assert rejected > 2000
    assert value(found, "kafka_server_brokertopicmetrics_bytes_rejected_total") >= rejected
    assert (
        value(
            found,
            "kafka_server_brokertopicmetrics_failed_produce_requests_total",
            topic="m-rejected",
        )
        == 1
    )
    assert (
        value(found, "kafka_server_brokertopicmetrics_messages_in_total", topic="m-rejected") == 0
    )
    assert total(found, "kafka_network_requestmetrics_errors_total", error="MESSAGE_TOO_LARGE") >= 1


def test_consumer_lag_is_what_the_group_left_unread(broker):
    create_topic(broker, "m-lag")
    produce_one_by_one(broker, "m-lag", [b"l"] * 10)
    consume(broker, "m-lag", 4, group="m-lag-group")
    found = samples(broker)
    labels = {"group": "m-lag-group", "topic": "m-lag", "partition": "0"}
    assert value(found, "kafka_consumergroup_current_offset", **labels) == 4
    assert value(found, "kafka_consumergroup_lag", **labels) == 6
    assert (
        total(found, "kafka_server_group_coordinator_metrics_group_count", protocol="classic") >= 1
    )


def test_broker_wide_gauges_of_a_single_node(broker):
    found = samples(broker)
    assert value(found, "kafka_controller_kafkacontroller_active_controller_count") == 1
    assert value(found, "kafka_controller_kafkacontroller_offline_partitions_count") == 0
    assert value(found, "kafka_server_replicamanager_under_replicated_partitions") == 0
    assert value(found, "kafka_server_replicamanager_under_min_isr_partition_count") == 0
    partitions = value(found, "kafka_server_replicamanager_partition_count")
    assert value(found, "kafka_server_replicamanager_leader_count") == partitions
    assert partitions == len(found["kafka_log_log_log_end_offset"])
    prefix = "kafka_server_socket_server_metrics_"
    open_now = value(found, prefix + "connection_count", listener="PLAINTEXT")
    created = value(found, prefix + "connection_creation_total", listener="PLAINTEXT")
    closed = value(found, prefix + "connection_close_total", listener="PLAINTEXT")
    assert created == open_now + closed and created > 0
    purgatory = "kafka_server_delayedoperationpurgatory_num_delayed_operations"
    assert value(found, purgatory, delayed_operation="Produce") == 0  # none in flight now
    assert value(found, purgatory, delayed_operation="Fetch") >= 0
    assert "kafka_log_logflushstats_log_flush_time_seconds_count" in found
    assert "kafka_log_logcleanermanager_max_dirty_percent" in found


def test_openmetrics_when_asked_for_and_prometheus_text_otherwise(broker):
    content_type, body = scrape(broker, OPENMETRICS)
    assert content_type.startswith("application/openmetrics-text")
    assert body.endswith("# EOF\n")
    names = {family.name for family in openmetrics_families(body)}
    assert "kafka_server_brokertopicmetrics_messages_in" in names
    assert "kafka_network_requestmetrics_total_time_seconds" in names
    content_type, body = scrape(broker)
    assert content_type.startswith("text/plain; version=0.0.4")
    assert "# EOF" not in body


def test_http_answers_other_paths_and_methods_with_errors(broker):
    url = urlsplit(broker.metrics_url)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    try:
        connection.request("GET", "/nothing-here")
        response = connection.getresponse()
        assert response.status == 404
        response.read()
        connection.request("DELETE", "/metrics")
        response = connection.getresponse()
        assert response.status == 405
        response.read()
        # The same connection still serves a scrape (keep-alive).
        connection.request("GET", "/metrics")
        response = connection.getresponse()
        assert response.status == 200
        assert b"kafka_server_replicamanager_leader_count" in response.read()
        connection.request("POST", "/metrics", body=b"x=1")
        response = connection.getresponse()
        assert response.status == 400
        assert response.getheader("Connection") == "close"
    finally:
        connection.close()


def test_garbage_on_the_metrics_port_closes_that_connection_only(broker):
    url = urlsplit(broker.metrics_url)
    with socket.create_connection((url.hostname, url.port), timeout=30) as sock:
        sock.sendall(b"\x00\x01 not http at all\r\n\r\n")
        assert sock.recv(100) == b""  # closed without an answer
    with pytest.raises(urllib.error.HTTPError):
        urllib.request.urlopen(broker.metrics_url.replace("/metrics", "/x"), timeout=30)
    assert "leader_count" in scrape(broker)[1]


def test_metrics_are_off_by_default():
    with EmbeddedBroker() as plain:
        assert plain.metrics_url is None
        admin = AdminClient({"bootstrap.servers": plain.bootstrap_servers})
        assert admin.list_topics(timeout=30).brokers


def serve_with_metrics_listener(data_dir, value: str) -> subprocess.CompletedProcess[str]:
    """`odradek serve` with ``metrics.http.listener=value``, expected to stop at start-up."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "odradek",
            "serve",
            "--data-dir",
            str(data_dir),
            "--port",
            "0",
            "-o",
            f"metrics.http.listener={value}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("bad", ["nonsense", "127.0.0.1:", "127.0.0.1:99999", ":9644"])
def test_a_bad_metrics_listener_stops_start_up_with_one_line(tmp_path, bad):
    result = serve_with_metrics_listener(tmp_path, bad)
    assert result.returncode == 2
    assert "invalid configuration" in result.stderr
    assert "metrics.http.listener" in result.stderr


def test_a_metrics_port_in_use_stops_start_up(tmp_path, broker):
    taken = urlsplit(broker.metrics_url)
    result = serve_with_metrics_listener(tmp_path, f"{taken.hostname}:{taken.port}")
    assert result.returncode == 1
    assert f"cannot listen on {taken.hostname}:{taken.port}" in result.stderr


def test_a_deleted_topic_leaves_its_series(broker):
    create_topic(broker, "m-deleted")
    produce_one_by_one(broker, "m-deleted", [b"d"])
    assert (
        value(
            samples(broker), "kafka_server_brokertopicmetrics_messages_in_total", topic="m-deleted"
        )
        == 1
    )
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.delete_topics(["m-deleted"])["m-deleted"].result(30)
    found = samples(broker)
    series = found["kafka_server_brokertopicmetrics_messages_in_total"]
    assert all(labels.get("topic") != "m-deleted" for labels, _ in series)
    assert all(
        labels.get("topic") != "m-deleted" for labels, _ in found["kafka_log_log_size_bytes"]
    )


def test_a_subscribing_consumer_shows_as_a_rebalance_and_a_stable_group(broker):
    create_topic(broker, "m-group")
    rebalances = "kafka_server_group_coordinator_metrics_group_rebalance_total"
    before = value(samples(broker), rebalances, protocol="classic")
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "m-group-members",
            "session.timeout.ms": 6000,
        }
    )
    try:
        consumer.subscribe(["m-group"])
        while not consumer.assignment():
            consumer.poll(0.2)
        found = samples(broker)
        assert value(found, rebalances, protocol="classic") >= before + 1
        states = "kafka_server_group_coordinator_metrics_group_count"
        assert total(found, states, protocol="classic", state="Stable") >= 1
    finally:
        consumer.close()


def test_each_scrape_reports_what_the_previous_one_cost(broker):
    scrape(broker)
    found = samples(broker)
    assert value(found, "odradek_metrics_last_scrape_collect_seconds") > 0
    assert value(found, "odradek_metrics_last_scrape_format_seconds") > 0
    assert "process_cpu_seconds_total" in found
