"""SCRAM credentials in a cluster: stored in ZooKeeper as Kafka's ZooKeeper mode stored them.

Each broker has a PLAINTEXT listener (inter-broker, admin) and a SASL_PLAINTEXT one with
both SCRAM mechanisms. A credential altered through one broker is written to
``/config/users/<user>`` (Kafka's entity config JSON, the mechanism name as key, the
``salt=...,stored_key=...,server_key=...,iterations=...`` text as value) with a change
notification, and every broker authenticates the user from its watch. A credential
written straight into ZooKeeper, as Kafka's own tools of that era wrote it, works too.
"""

from __future__ import annotations

import json

import pytest
from confluent_kafka import KafkaError, Producer
from kafka import KafkaAdminClient
from kafka.admin import ScramMechanism, UserScramCredentialUpsertion
from kazoo.client import KazooClient

from odradek.metadata import zk_layout as layout
from odradek.network.scram import SCRAM_SHA_512
from odradek.server.embedded_cluster import EmbeddedCluster
from tests.cluster.test_cluster import wait_until


@pytest.fixture(scope="module")
def odradek_cluster_config() -> dict[str, str]:
    return {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "zookeeper.session.timeout.ms": "6000",
    }


def logs_in(address: str, mechanism: str, user: str, password: str) -> bool:
    """Whether a confluent-kafka producer authenticates (and gets metadata) on ``address``."""
    errors: list[KafkaError] = []
    producer = Producer(
        {
            "bootstrap.servers": address,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": password,
            "error_cb": errors.append,
        }
    )
    try:
        producer.list_topics(timeout=10)
        return not errors
    except Exception:  # KafkaException: the metadata request never got through
        return False


def sasl_listeners(cluster: EmbeddedCluster) -> list[str]:
    return [b.listeners["SASL_PLAINTEXT"] for b in cluster.brokers.values()]


def test_altered_on_one_broker_stored_as_kafka_and_served_by_all(
    odradek_cluster: EmbeddedCluster, zk: KazooClient
) -> None:
    admin = KafkaAdminClient(bootstrap_servers=odradek_cluster.broker(1).bootstrap_servers)
    try:
        result = admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion("erin", ScramMechanism.SCRAM_SHA_256, "erin-pw", 4096)]
        )
    finally:
        admin.close()
    assert result == {"erin": None}
    data = json.loads(zk.get(f"{layout.USER_CONFIGS}/erin")[0])
    assert data["version"] == 1
    (key,) = data["config"]
    assert key == "SCRAM-SHA-256"
    fields = [item.split("=", 1)[0] for item in data["config"][key].split(",")]
    assert fields == ["salt", "stored_key", "server_key", "iterations"]
    assert "erin-pw" not in zk.get(f"{layout.USER_CONFIGS}/erin")[0].decode()
    changes = [
        json.loads(zk.get(f"{layout.CONFIG_CHANGES}/{child}")[0])
        for child in zk.get_children(layout.CONFIG_CHANGES)
    ]
    assert {"version": 2, "entity_path": "users/erin"} in changes
    for address in sasl_listeners(odradek_cluster):
        wait_until(lambda a=address: logs_in(a, "SCRAM-SHA-256", "erin", "erin-pw"), what=address)
    assert not logs_in(sasl_listeners(odradek_cluster)[1], "SCRAM-SHA-256", "erin", "wrong")


def test_a_credential_written_into_zookeeper_by_kafkas_tools(
    odradek_cluster: EmbeddedCluster, zk: KazooClient
) -> None:
    user = "frank@example.com"  # sanitized in the znode name, as Kafka's Sanitizer does
    salt = b"0123456789abcdef"
    credential = SCRAM_SHA_512.credential(
        SCRAM_SHA_512.salted_password("frank-pw", salt, 4096), salt, 4096
    )
    entity = layout.sanitize(user)
    assert entity == "frank%40example.com"
    zk.create(
        f"{layout.USER_CONFIGS}/{entity}",
        json.dumps({"version": 1, "config": {"SCRAM-SHA-512": credential.to_text()}}).encode(),
    )
    zk.create(
        f"{layout.CONFIG_CHANGES}/{layout.CONFIG_CHANGE_PREFIX}",
        layout.encode_config_change("users", entity),
        sequence=True,
    )
    for address in sasl_listeners(odradek_cluster):
        wait_until(lambda a=address: logs_in(a, "SCRAM-SHA-512", user, "frank-pw"), what=address)
