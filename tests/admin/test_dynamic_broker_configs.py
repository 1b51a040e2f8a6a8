"""Kafka's dynamic broker configs through real admin clients: accepted, stored, described,
kept across a restart, and refused where Kafka refuses them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType
from kio.schema.describe_configs.v4 import request as describe_v4
from kio_client import KioClient, incremental_alter

from odradek import EmbeddedBroker
from odradek.protocol.errors import ErrorCode

TIMEOUT = 30
BROKER, SET = 4, 0


@pytest.fixture(scope="module")
def broker(tmp_path_factory) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("dynamic") / "data") as b:
        yield b


@pytest.fixture(scope="module")
def admin(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def node_id(admin: AdminClient) -> str:
    return str(admin.describe_cluster().result(TIMEOUT).nodes[0].id)


def alter_broker(broker: EmbeddedBroker, name: str, **configs: str) -> int:
    """IncrementalAlterConfigs SET on a BROKER resource, its error code: confluent-kafka for a
    broker, a raw request for the cluster-wide default "" (confluent-kafka refuses that name)."""
    if name == "":
        with KioClient(broker.bootstrap_servers) as client:
            ops = [(key, SET, value) for key, value in configs.items()]
            return incremental_alter(client, BROKER, "", ops).error_code
    resource = ConfigResource(
        ResourceType.BROKER,
        name,
        incremental_configs=[
            ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
            for key, value in configs.items()
        ],
    )
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    (future,) = admin.incremental_alter_configs([resource]).values()
    try:
        future.result(TIMEOUT)
    except KafkaException as e:
        return e.args[0].code()
    return ErrorCode.none


def described(admin: AdminClient, name: str) -> dict:
    (future,) = admin.describe_configs([ConfigResource(ResourceType.BROKER, name)]).values()
    return future.result(TIMEOUT)


def set_values(admin: AdminClient, broker: EmbeddedBroker) -> None:
    node = node_id(admin)
    code = alter_broker(
        broker,
        node,
        **{
            "sasl.kerberos.min.time.before.relogin": "120000",
            "num.io.threads": "4",
            "listener.name.plaintext.ssl.key.password": "secret",
        },
    )
    assert code == ErrorCode.none
    code = alter_broker(broker, "", **{"log.cleaner.threads": "2", "background.threads": "5"})
    assert code == ErrorCode.none


def test_dynamic_configs_accepted_and_described(admin: AdminClient, broker) -> None:
    set_values(admin, broker)
    configs = described(admin, node_id(admin))
    relogin = configs["sasl.kerberos.min.time.before.relogin"]
    assert relogin.value == "120000" and relogin.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    assert relogin.is_read_only is False
    assert configs["num.io.threads"].value == "4"
    assert configs["log.cleaner.threads"].value == "2"
    assert configs["log.cleaner.threads"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    password = configs["listener.name.plaintext.ssl.key.password"]
    assert password.is_sensitive is True and password.value is None
    # The cluster-wide default "" (which both client libraries refuse to name) lists what is set.
    request = describe_v4.DescribeConfigsRequest(
        resources=(
            describe_v4.DescribeConfigsResource(
                resource_type=BROKER, resource_name="", configuration_keys=None
            ),
        ),
        include_synonyms=False,
        include_documentation=False,
    )
    with KioClient(broker.bootstrap_servers) as client:
        (result,) = client.send(request).results
    assert {c.name for c in result.configs} == {"log.cleaner.threads", "background.threads"}


def test_dynamic_configs_survive_a_restart(admin: AdminClient, broker) -> None:
    set_values(admin, broker)
    broker.restart()
    fresh = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    configs = described(fresh, node_id(fresh))
    assert configs["sasl.kerberos.min.time.before.relogin"].value == "120000"
    assert configs["background.threads"].value == "5"


@pytest.mark.parametrize(
    ("resource", "configs", "code"),
    [
        ("node", {"log.dirs": "/tmp/elsewhere"}, ErrorCode.invalid_request),
        ("node", {"ssl.keystore.location": "/k.jks"}, ErrorCode.invalid_request),
        ("", {"sasl.kerberos.min.time.before.relogin": "1"}, ErrorCode.invalid_request),
        ("node", {"sasl.kerberos.min.time.before.relogin": "soon"}, ErrorCode.invalid_config),
    ],
)
def test_refused_as_kafka_refuses(admin: AdminClient, broker, resource: str, configs, code) -> None:
    name = node_id(admin) if resource == "node" else resource
    assert alter_broker(broker, name, **configs) == code


def test_legacy_alter_configs_kafka_python(broker) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        node = str(admin.describe_cluster()["brokers"][0]["broker_id"])
        result = admin.alter_configs(
            [
                KpConfigResource(
                    ConfigResourceType.BROKER,
                    node,
                    configs={"sasl.login.refresh.buffer.seconds": "200", "num.io.threads": "6"},
                )
            ]
        )
        assert result["broker"][node] == "OK"
        configs = admin.describe_configs([KpConfigResource(ConfigResourceType.BROKER, node)])
        assert configs["broker"][node]["sasl.login.refresh.buffer.seconds"]["value"] == "200"
        assert configs["broker"][node]["num.io.threads"]["value"] == "6"
    finally:
        admin.close()
