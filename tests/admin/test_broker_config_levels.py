"""Dynamic broker configs per broker (resource name = node id) and cluster-wide (""), as Kafka keeps them.

A per-broker value wins over the cluster default, which wins over the static
config and the built-in default; DescribeConfigs reports the winning source,
the synonyms of every level, and Kafka's ConfigDef types.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)
from kio.schema.describe_configs.v4 import request as describe_configs_v4
from kio.static.primitive import i32Timedelta
from kio_client import KioClient, incremental_alter

from odradek import EmbeddedBroker
from odradek.protocol.errors import ErrorCode

TIMEOUT = i32Timedelta.parse(datetime.timedelta(seconds=30))
TOPIC, BROKER = 2, 4
SET, DELETE, APPEND = 0, 1, 2
DYNAMIC_TOPIC, DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT = 1, 2, 3, 4, 5
BOOLEAN, STRING, INT, SHORT, LONG, LIST = 1, 2, 3, 4, 5, 7


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    # A broker of its own: these tests change broker-wide configs.
    with EmbeddedBroker(config={"log.segment.bytes": "2000000"}) as b:
        yield b


@pytest.fixture
def client(broker: EmbeddedBroker) -> Iterator[KioClient]:
    with KioClient(broker.bootstrap_servers) as c:
        yield c


@pytest.fixture(scope="module")
def node_id(broker: EmbeddedBroker) -> str:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    return str(admin.describe_cluster().result(30).nodes[0].id)


def describe(client: KioClient, resource_type: int, name: str, keys: tuple[str, ...] | None = None):
    request = describe_configs_v4.DescribeConfigsRequest(
        resources=(
            describe_configs_v4.DescribeConfigsResource(
                resource_type=resource_type, resource_name=name, configuration_keys=keys
            ),
        ),
        include_synonyms=True,
        include_documentation=False,
    )
    (result,) = client.send(request).results
    return result


def entries(result) -> dict:
    return {c.name: c for c in result.configs}


def synonyms(entry) -> list[tuple[str, str | None, int]]:
    return [(s.name, s.value, s.source) for s in entry.synonyms]


def alter(
    client: KioClient,
    name: str,
    ops: list[tuple[str, int, str | None]],
    resource_type: int = BROKER,
):
    return incremental_alter(client, resource_type, name, ops)


def new_topic(broker: EmbeddedBroker) -> str:
    name = f"levels-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    return name


def test_per_broker_wins_over_cluster_default(
    client: KioClient, broker: EmbeddedBroker, node_id: str
) -> None:
    assert alter(client, "", [("log.retention.ms", SET, "1000")]).error_code == ErrorCode.none
    assert alter(client, node_id, [("log.retention.ms", SET, "2000")]).error_code == ErrorCode.none
    try:
        mine = entries(describe(client, BROKER, node_id))
        retention = mine["log.retention.ms"]
        assert (retention.value, retention.config_source, retention.read_only) == (
            "2000",
            DYNAMIC_BROKER,
            False,
        )
        assert synonyms(retention) == [
            ("log.retention.ms", "2000", DYNAMIC_BROKER),
            ("log.retention.ms", "1000", DYNAMIC_DEFAULT),
            ("log.retention.hours", "168", DEFAULT),
        ]
        # Synonyms of other names that come first are dropped, as in Kafka.
        hours = mine["log.retention.hours"]
        assert (hours.value, hours.config_source, synonyms(hours)) == (
            "168",
            DEFAULT,
            [("log.retention.hours", "168", DEFAULT)],
        )

        cluster = entries(describe(client, BROKER, ""))
        assert set(cluster) == {"log.retention.ms"}
        assert (cluster["log.retention.ms"].value, cluster["log.retention.ms"].config_source) == (
            "1000",
            DYNAMIC_DEFAULT,
        )
        assert synonyms(cluster["log.retention.ms"]) == [
            ("log.retention.ms", "1000", DYNAMIC_DEFAULT)
        ]

        topic = entries(describe(client, TOPIC, new_topic(broker), ("retention.ms",)))[
            "retention.ms"
        ]
        assert (topic.value, topic.config_source) == ("2000", DYNAMIC_BROKER)
        assert synonyms(topic)[:2] == [
            ("log.retention.ms", "2000", DYNAMIC_BROKER),
            ("log.retention.ms", "1000", DYNAMIC_DEFAULT),
        ]
    finally:
        alter(client, node_id, [("log.retention.ms", DELETE, None)])
    # Without the per-broker value the cluster default applies again.
    topic = entries(describe(client, TOPIC, new_topic(broker), ("retention.ms",)))["retention.ms"]
    assert (topic.value, topic.config_source) == ("1000", DYNAMIC_DEFAULT)
    alter(client, "", [("log.retention.ms", DELETE, None)])
    assert describe(client, BROKER, "").configs == ()


def test_static_config_source(client: KioClient, node_id: str) -> None:
    segment = entries(describe(client, BROKER, node_id, ("log.segment.bytes",)))[
        "log.segment.bytes"
    ]
    assert (segment.value, segment.config_source) == ("2000000", STATIC)
    assert synonyms(segment) == [
        ("log.segment.bytes", "2000000", STATIC),
        ("log.segment.bytes", "1073741824", DEFAULT),
    ]


def test_config_types_are_kafkas(client: KioClient, node_id: str) -> None:
    configs = entries(describe(client, BROKER, node_id))
    expected = {
        "num.partitions": INT,
        "message.max.bytes": INT,
        "log.retention.ms": LONG,
        "log.retention.hours": INT,
        "log.retention.bytes": LONG,
        "connections.max.idle.ms": LONG,
        "offsets.topic.replication.factor": SHORT,
        "auto.create.topics.enable": BOOLEAN,
        "listeners": STRING,
        "log.dirs": STRING,
        "log.cleanup.policy": LIST,
        "log.message.timestamp.after.max.ms": LONG,
    }
    assert {name: configs[name].config_type for name in expected} == expected
    assert configs["num.partitions"].read_only and not configs["log.cleanup.policy"].read_only


def test_append_to_a_broker_list_config(client: KioClient, node_id: str) -> None:
    assert (
        alter(client, node_id, [("log.cleanup.policy", APPEND, "compact")]).error_code
        == ErrorCode.none
    )
    try:
        policy = entries(describe(client, BROKER, node_id, ("log.cleanup.policy",)))[
            "log.cleanup.policy"
        ]
        assert (policy.value, policy.config_source) == ("delete,compact", DYNAMIC_BROKER)
    finally:
        alter(client, node_id, [("log.cleanup.policy", DELETE, None)])


@pytest.mark.parametrize("name", ["abc", "99"])
def test_other_broker_names_are_refused(client: KioClient, name: str) -> None:
    assert describe(client, BROKER, name).error_code == ErrorCode.invalid_request
    assert (
        alter(client, name, [("log.retention.ms", SET, "1")]).error_code
        == ErrorCode.invalid_request
    )


def test_non_dynamic_config_is_refused(client: KioClient, node_id: str) -> None:
    response = alter(client, node_id, [("num.partitions", SET, "3")])
    assert response.error_code == ErrorCode.invalid_request
    assert "num.partitions" in response.error_message


def test_confluent_admin_sees_per_broker_source(broker: EmbeddedBroker, node_id: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    resource = ConfigResource(
        ResourceType.BROKER,
        node_id,
        incremental_configs=[
            ConfigEntry(
                "log.retention.bytes", "123456", incremental_operation=AlterConfigOpType.SET
            )
        ],
    )
    (future,) = admin.incremental_alter_configs([resource]).values()
    future.result(30)
    try:
        (described,) = admin.describe_configs(
            [ConfigResource(ResourceType.BROKER, node_id)]
        ).values()
        entry = described.result(30)["log.retention.bytes"]
        assert entry.value == "123456"
        assert entry.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    finally:
        resource = ConfigResource(
            ResourceType.BROKER,
            node_id,
            incremental_configs=[
                ConfigEntry(
                    "log.retention.bytes", None, incremental_operation=AlterConfigOpType.DELETE
                )
            ],
        )
        (future,) = admin.incremental_alter_configs([resource]).values()
        future.result(30)
