"""SCRAM credentials and client quotas in a cluster: stored in ZooKeeper as Kafka's
ZooKeeper mode stored them.

Each broker has a PLAINTEXT listener (inter-broker, admin) and a SASL_PLAINTEXT one with
both SCRAM mechanisms. A credential altered through one broker is written to
``/config/users/<user>`` (Kafka's entity config JSON, the mechanism name as key, the
``salt=...,stored_key=...,server_key=...,iterations=...`` text as value) with a change
notification, and every broker authenticates the user from its watch. A credential
written straight into ZooKeeper, as Kafka's own tools of that era wrote it, works too.

Client quotas share ``/config/users/<user>`` with the credentials (each kept when the
other changes) and add ``/config/users/<user>/clients/<client-id>`` and
``/config/clients/<client-id>``; every broker describes and enforces what any broker (or a
tool writing ZooKeeper) set.
"""

from __future__ import annotations

import json

import pytest
from confluent_kafka import KafkaError, Producer
from kafka import KafkaAdminClient
from kafka.admin import ScramMechanism, UserScramCredentialUpsertion
from kazoo.client import KazooClient
from kio.schema.metadata.v12.request import MetadataRequest

from odradek.metadata import zk_layout as layout
from odradek.network.scram import SCRAM_SHA_512
from odradek.server.embedded_cluster import EmbeddedCluster
from tests.admin.kio_client import KioClient
from tests.cluster.test_cluster import wait_until
from tests.quota.quota_requests import alter_quotas, describe_quotas, described


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


def _config(zk: KazooClient, path: str) -> dict[str, str]:
    return json.loads(zk.get(f"{layout.CONFIG}/{path}")[0])["config"]


def test_client_quotas_in_zookeeper_beside_credentials(
    odradek_cluster: EmbeddedCluster, zk: KazooClient
) -> None:
    first = odradek_cluster.broker(1).bootstrap_servers
    admin = KafkaAdminClient(bootstrap_servers=first)
    try:
        admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion("gina", ScramMechanism.SCRAM_SHA_256, "gina-pw", 4096)]
        )
        assert (
            alter_quotas(
                first,
                [
                    ({"user": "gina"}, {"producer_byte_rate": 1024.0}),
                    ({"user": "gina", "client-id": "app"}, {"request_percentage": 12.5}),
                    ({"client-id": None}, {"consumer_byte_rate": 4096.0}),
                ],
            )
            == [(0, None)] * 3
        )
        # The credential is kept beside the quota, and the quota beside a new credential.
        assert set(_config(zk, "users/gina")) == {"SCRAM-SHA-256", "producer_byte_rate"}
        admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion("gina", ScramMechanism.SCRAM_SHA_512, "gina-pw", 4096)]
        )
    finally:
        admin.close()
    gina = _config(zk, "users/gina")
    assert gina["producer_byte_rate"] == "1024"
    assert set(gina) == {"SCRAM-SHA-256", "SCRAM-SHA-512", "producer_byte_rate"}
    assert _config(zk, "users/gina/clients/app") == {"request_percentage": "12.5"}
    assert _config(zk, "clients/<default>") == {"consumer_byte_rate": "4096"}
    changes = [
        json.loads(zk.get(f"{layout.CONFIG_CHANGES}/{child}")[0])["entity_path"]
        for child in zk.get_children(layout.CONFIG_CHANGES)
    ]
    assert {"users/gina/clients/app", "clients/<default>"} <= set(changes)

    # Removing the quota keeps the credentials.
    assert alter_quotas(first, [({"user": "gina"}, {"producer_byte_rate": None})]) == [(0, None)]
    assert set(_config(zk, "users/gina")) == {"SCRAM-SHA-256", "SCRAM-SHA-512"}

    # A client quota written by a tool straight into ZooKeeper, with its notification.
    zk.create(
        f"{layout.CONFIG}/users/gina/clients/tool",
        json.dumps({"version": 1, "config": {"producer_byte_rate": "2048"}}).encode(),
    )
    zk.create(
        f"{layout.CONFIG_CHANGES}/{layout.CONFIG_CHANGE_PREFIX}",
        layout.encode_config_change("users", "gina/clients/tool"),
        sequence=True,
    )
    expected = {
        (("user", "gina"), ("client-id", "app")): {"request_percentage": 12.5},
        (("user", "gina"), ("client-id", "tool")): {"producer_byte_rate": 2048.0},
        (("client-id", None),): {"consumer_byte_rate": 4096.0},
    }
    for broker in odradek_cluster.brokers.values():
        wait_until(
            lambda b=broker: described(describe_quotas(b.bootstrap_servers, [])) == expected,
            what=broker.bootstrap_servers,
        )
    for address in sasl_listeners(odradek_cluster):
        assert logs_in(address, "SCRAM-SHA-512", "gina", "gina-pw")

    # Enforced by another broker than the one that wrote it.
    last = odradek_cluster.broker(3).bootstrap_servers
    assert alter_quotas(first, [({"client-id": "busy"}, {"request_percentage": 0.01})]) == [
        (0, None)
    ]

    def throttled() -> bool:
        with KioClient(last, client_id="busy") as busy:
            metadata = MetadataRequest(
                topics=None,
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
            return any(busy.send(metadata).throttle_time.total_seconds() for _ in range(50))

    wait_until(throttled, what="a throttled client on broker 3")
    assert (
        alter_quotas(
            first,
            [
                ({"client-id": "busy"}, {"request_percentage": None}),
                ({"client-id": None}, {"consumer_byte_rate": None}),
            ],
        )
        == [(0, None)] * 2
    )
