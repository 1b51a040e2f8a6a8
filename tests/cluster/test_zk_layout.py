"""The znode JSON shapes, as Kafka 3.x writes them (kafka.zk.ZkData)."""

from __future__ import annotations

import json
import uuid

import pytest

from odradek.metadata import zk_layout as layout
from odradek.metadata.image import BrokerImage


def test_broker_registration_is_kafkas_version_5():
    broker = BrokerImage(3, (("PLAINTEXT", "h1", 9092), ("INTERNAL", "h1", 9093)), "dc1")
    info = json.loads(
        layout.encode_broker(broker, {"PLAINTEXT": "PLAINTEXT", "INTERNAL": "SASL_SSL"})
    )
    assert info["version"] == 5
    assert (info["host"], info["port"], info["jmx_port"]) == ("h1", 9092, -1)
    assert info["endpoints"] == ["PLAINTEXT://h1:9092", "INTERNAL://h1:9093"]
    assert info["listener_security_protocol_map"] == {
        "PLAINTEXT": "PLAINTEXT",
        "INTERNAL": "SASL_SSL",
    }
    assert info["rack"] == "dc1" and isinstance(info["timestamp"], str)
    assert (
        layout.decode_broker(
            3, layout.encode_broker(broker, {"PLAINTEXT": "PLAINTEXT", "INTERNAL": "SSL"})
        )
        == broker
    )
    no_rack = BrokerImage(1, (("PLAINTEXT", "h", 1),))
    assert "rack" not in json.loads(layout.encode_broker(no_rack, {"PLAINTEXT": "PLAINTEXT"}))


def test_topic_assignment_and_partition_state():
    topic_id = uuid.UUID("a2c4b1f2-7b8e-4d65-9f10-3c2b1a0e9d8c")
    data = json.loads(layout.encode_assignment(topic_id, {1: (2, 3), 0: (1, 2)}))
    assert data["version"] == 3
    assert data["partitions"] == {"0": [1, 2], "1": [2, 3]}
    assert data["adding_replicas"] == {} and data["removing_replicas"] == {}
    # Kafka's Uuid.toString: URL-safe base64 without padding.
    assert data["topic_id"] == "osSx8nuOTWWfEDwrGg6djA"
    decoded = layout.decode_assignment(json.dumps(data).encode())
    assert decoded.topic_id == topic_id and decoded.replicas == {0: (1, 2), 1: (2, 3)}

    state = layout.PartitionState(2, 7, (2, 1), 4)
    assert json.loads(layout.encode_partition_state(state)) == {
        "controller_epoch": 4,
        "leader": 2,
        "version": 1,
        "leader_epoch": 7,
        "isr": [2, 1],
    }
    assert layout.decode_partition_state(layout.encode_partition_state(state)) == state


def test_controller_config_and_notifications():
    controller = json.loads(layout.encode_controller(2))
    assert controller["version"] == 2 and controller["brokerid"] == 2
    assert controller["kraftControllerEpoch"] == -1 and isinstance(controller["timestamp"], str)
    assert layout.encode_controller_epoch(12) == b"12"
    assert json.loads(layout.encode_config({"retention.ms": "1"})) == {
        "version": 1,
        "config": {"retention.ms": "1"},
    }
    assert json.loads(layout.encode_config_change("topics", "t")) == {
        "version": 2,
        "entity_path": "topics/t",
    }
    assert json.loads(layout.encode_cluster_id("abc")) == {"version": "1", "id": "abc"}
    assert layout.broker_config_path("") == "/config/brokers/<default>"
    assert json.loads(layout.encode_isr_change([("t", 0)])) == {
        "version": 1,
        "partitions": [{"topic": "t", "partition": 0}],
    }


def test_tool_written_admin_requests_are_kafkas_json():
    # As kafka-reassign-partitions.sh --zookeeper wrote it (log_dirs beside the replicas).
    written = (
        b'{"version":1,"partitions":[{"topic":"foo","partition":1,"replicas":[1,2],'
        b'"log_dirs":["any","any"]},{"topic":"bar","partition":0,"replicas":[3]}]}'
    )
    targets = layout.decode_reassign_partitions(written)
    assert targets == {("foo", 1): (1, 2), ("bar", 0): (3,)}
    assert layout.decode_reassign_partitions(layout.encode_reassign_partitions(targets)) == targets
    assert json.loads(layout.encode_reassign_partitions({("foo", 1): (1, 2)})) == {
        "version": 1,
        "partitions": [{"topic": "foo", "partition": 1, "replicas": [1, 2]}],
    }
    election = (
        b'{"version":1,"partitions":[{"topic":"foo","partition":1},{"topic":"a","partition":0}]}'
    )
    assert layout.decode_preferred_replica_election(election) == {("foo", 1), ("a", 0)}
    encoded = layout.encode_preferred_replica_election([("foo", 1)])
    assert json.loads(encoded) == {"version": 1, "partitions": [{"topic": "foo", "partition": 1}]}


@pytest.mark.parametrize(
    "data",
    [
        b"not json",
        b"\xff",
        b"[]",
        b'{"version":1}',
        b'{"version":1,"partitions":[{"topic":"t","partition":"0","replicas":[1]}]}',
        b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":1}]}',
        b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[true]}]}',
        b'{"version":1,"partitions":[{"partition":0,"replicas":[1]}]}',
    ],
)
def test_malformed_admin_requests_are_refused(data: bytes):
    with pytest.raises(ValueError):
        layout.decode_reassign_partitions(data)
    if b"replicas" not in data:
        with pytest.raises(ValueError):
            layout.decode_preferred_replica_election(data)


def test_client_quota_entity_paths_are_kafkas():
    """/config/users/<user>, /config/users/<user>/clients/<client-id>, /config/clients/<client-id>
    with ``<default>`` for a default entity and other names sanitized (Kafka's Sanitizer)."""
    from odradek.quota.entity import DEFAULT, QuotaEntity

    cases = {
        QuotaEntity("alice"): "users/alice",
        QuotaEntity(DEFAULT): "users/<default>",
        QuotaEntity("CN=a b", "app"): "users/CN%3Da%20b/clients/app",
        QuotaEntity(DEFAULT, DEFAULT): "users/<default>/clients/<default>",
        QuotaEntity(client_id="app"): "clients/app",
        QuotaEntity(client_id=DEFAULT): "clients/<default>",
        QuotaEntity("<default>"): "users/%3Cdefault%3E",
    }
    for entity, path in cases.items():
        assert layout.quota_entity_path(entity) == path
        assert layout.parse_quota_entity_path(path) == entity
    assert layout.parse_quota_entity_path("topics/t") is None
    assert layout.encode_quota_configs(
        {"producer_byte_rate": 1024.0, "request_percentage": 12.5}
    ) == {
        "producer_byte_rate": "1024",
        "request_percentage": "12.5",
    }
    assert layout.decode_quota_configs(
        {"producer_byte_rate": "1024", "SCRAM-SHA-256": "salt=...", "request_percentage": "x"}
    ) == {"producer_byte_rate": 1024.0}
