"""ACLs in a cluster: kept in ZooKeeper as Kafka's AclAuthorizer kept them, applied by every broker.

Two brokers on the module's ZooKeeper, each with a PLAINTEXT listener (replication; its
principal, User:ANONYMOUS, is a super user, as a deployment's broker principal is) and a
SASL_PLAINTEXT one with PLAIN users admin (a super user) and alice. An ACL created through
one broker is written to ``/kafka-acl`` (or ``/kafka-acl-extended/prefixed``) with a change
notification, and the other broker applies it from its watch; a deletion through the other
broker is seen by the first; an ACL written straight into ZooKeeper, as Kafka's tools of the
ZooKeeper era wrote them, is applied too.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kazoo.client import KazooClient
from security.clients import plain_login

from odradek.metadata import zk_acls
from odradek.metadata.zk_notifications import (
    CHANGE_EXPIRATION_MS,
    purge_obsolete_notifications,
)
from odradek.protocol import schemas
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.security.acl import PatternType, ResourcePattern
from odradek.security.acl import ResourceType as SecurityResourceType
from odradek.server.embedded_cluster import EmbeddedCluster
from odradek.server.zookeeper_server import ZooKeeperServer
from tests.cluster.test_cluster import wait_until

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'user_admin="admin-secret" user_alice="alice-secret";'
)
TOPIC = "zk-acl-topic"


@pytest.fixture(scope="module")
def odradek_cluster(zookeeper: ZooKeeperServer, tmp_path_factory) -> Iterator[EmbeddedCluster]:
    """Two brokers, named as the plugin's cluster so that conftest's ``zk`` reads this one."""
    config = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:ANONYMOUS;User:admin",
        "zookeeper.session.timeout.ms": "6000",
    }
    with EmbeddedCluster(
        brokers=2,
        config=config,
        data_dir=tmp_path_factory.mktemp("zk-acls"),
        zookeeper=zookeeper.connect_string,
    ) as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        for future in admin.create_topics([NewTopic(TOPIC, 1, 2)]).values():
            future.result(30)
        yield c


def sasl(cluster: EmbeddedCluster, node: int) -> str:
    return cluster.brokers[node].listeners["SASL_PLAINTEXT"]


def admin_on(cluster: EmbeddedCluster, node: int) -> AdminClient:
    """An admin client that talks to broker ``node`` only (bootstrap and, one broker's
    metadata aside, its requests)."""
    return AdminClient(
        {
            "bootstrap.servers": sasl(cluster, node),
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "admin",
            "sasl.password": "admin-secret",
        }
    )


def metadata_error(cluster: EmbeddedCluster, node: int, topic: str) -> int:
    """What broker ``node`` answers alice for Metadata on ``topic``."""
    module = schemas.request_module(ApiKey.METADATA, 12)
    client = plain_login(sasl(cluster, node), "alice", "alice-secret")
    try:
        response = client.call(
            schemas.build(
                module.MetadataRequest,
                topics=(schemas.build(module.MetadataRequestTopic, name=topic, topic_id=None),),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        )
    finally:
        client.close()
    return response.topics[0].error_code


def every_broker_answers(cluster: EmbeddedCluster, topic: str, error: int) -> None:
    for node in cluster.brokers:
        wait_until(
            lambda node=node: metadata_error(cluster, node, topic) == error,
            what=f"broker {node} answering {ErrorCode(error).name} for {topic}",
        )


def test_created_on_one_broker_stored_as_kafka_and_applied_by_all(
    odradek_cluster: EmbeddedCluster, zk: KazooClient
) -> None:
    every_broker_answers(odradek_cluster, TOPIC, ErrorCode.topic_authorization_failed)
    read = AclBinding(
        ResourceType.TOPIC,
        TOPIC,
        ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    prefixed = AclBinding(
        ResourceType.GROUP,
        "zk-",
        ResourcePatternType.PREFIXED,
        "User:alice",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    first = admin_on(odradek_cluster, 1)
    for future in first.create_acls([read, prefixed]).values():
        assert future.result(30) is None

    assert json.loads(zk.get(f"/kafka-acl/Topic/{TOPIC}")[0]) == {
        "version": 1,
        "acls": [
            {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}
        ],
    }
    assert (
        json.loads(zk.get("/kafka-acl-extended/prefixed/Group/zk-")[0])["acls"][0]["operation"]
        == "Read"
    )
    literal_changes = [
        zk.get(f"/kafka-acl-changes/{c}")[0] for c in zk.get_children("/kafka-acl-changes")
    ]
    assert f"TOPIC:{TOPIC}".encode() in literal_changes
    extended = [
        json.loads(zk.get(f"/kafka-acl-extended-changes/{c}")[0])
        for c in zk.get_children("/kafka-acl-extended-changes")
    ]
    assert {
        "version": 1,
        "resourceType": "GROUP",
        "name": "zk-",
        "patternType": "PREFIXED",
    } in extended

    every_broker_answers(odradek_cluster, TOPIC, ErrorCode.none)  # READ implies DESCRIBE, on both

    second = admin_on(odradek_cluster, 2)
    topics = AclBindingFilter(
        ResourceType.TOPIC,
        TOPIC,
        ResourcePatternType.LITERAL,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    (deleted,) = second.delete_acls([topics]).values()
    assert deleted.result(30) == [read]
    assert not zk.exists(f"/kafka-acl/Topic/{TOPIC}")
    every_broker_answers(odradek_cluster, TOPIC, ErrorCode.topic_authorization_failed)
    every = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    assert first.describe_acls(every).result(30) == [prefixed]


def test_acl_written_into_zookeeper_by_another_tool_is_applied(
    odradek_cluster: EmbeddedCluster, zk: KazooClient
) -> None:
    """What kafka-acls.sh --authorizer-properties zookeeper.connect=... wrote in Kafka 2.x/3.x."""
    topic = "zk-acl-written"
    admin = AdminClient(
        {"bootstrap.servers": odradek_cluster.bootstrap_servers}
    )  # alive until answered
    admin.create_topics([NewTopic(topic, 1, 2)])[topic].result(30)
    document = {
        "version": 1,
        "acls": [
            {"principal": "User:*", "permissionType": "Allow", "operation": "Describe", "host": "*"}
        ],
    }
    zk.create(f"/kafka-acl/Topic/{topic}", json.dumps(document).encode(), makepath=True)
    zk.create("/kafka-acl-changes/acl_changes_", f"Topic:{topic}".encode(), sequence=True)
    every_broker_answers(odradek_cluster, topic, ErrorCode.none)


def test_a_restarted_broker_loads_the_acls_from_zookeeper(odradek_cluster: EmbeddedCluster) -> None:
    """The ACL is made while broker 2 is down: it learns it from the load at start-up."""
    topic = "zk-acl-restart"
    creator = admin_on(odradek_cluster, 1)
    creator.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    odradek_cluster.stop_broker(2)
    try:
        # A client that knew broker 2 may send CreateAcls to it (librdkafka retried a stopped
        # controller for the request's whole timeout): this one learns of broker 1 alone.
        admin = admin_on(odradek_cluster, 1)
        wait_until(
            lambda: list(admin.list_topics(timeout=10).brokers) == [1],
            what="broker 1's metadata without broker 2",
        )
        describe = AclBinding(
            ResourceType.TOPIC,
            topic,
            ResourcePatternType.LITERAL,
            "User:alice",
            "*",
            AclOperation.DESCRIBE,
            AclPermissionType.ALLOW,
        )
        for future in admin.create_acls([describe]).values():
            assert future.result(30) is None
    finally:
        odradek_cluster.start_broker(2)
    assert metadata_error(odradek_cluster, 2, topic) == ErrorCode.none


def test_change_notifications_in_kafkas_encoding() -> None:
    literal = ResourcePattern(SecurityResourceType.TOPIC, "orders", PatternType.LITERAL)
    prefixed = ResourcePattern(SecurityResourceType.GROUP, "app-", PatternType.PREFIXED)
    assert zk_acls.encode_change(literal) == ("/kafka-acl-changes/acl_changes_", b"TOPIC:orders")
    path, data = zk_acls.encode_change(prefixed)
    assert path == "/kafka-acl-extended-changes/acl_changes_"
    assert json.loads(data) == {
        "version": 1,
        "resourceType": "GROUP",
        "name": "app-",
        "patternType": "PREFIXED",
    }
    assert zk_acls.decode_change(zk_acls.LITERAL_CHANGES, b"Topic:orders") == literal
    assert zk_acls.decode_change(zk_acls.EXTENDED_CHANGES, data) == prefixed
    assert zk_acls.resource_path(prefixed) == "/kafka-acl-extended/prefixed/Group/app-"
    with pytest.raises(ValueError):
        zk_acls.decode_change(zk_acls.LITERAL_CHANGES, b"no separator")


def test_change_notifications_older_than_fifteen_minutes_are_purged(zk: KazooClient) -> None:
    path = "/purge-test"
    zk.ensure_path(path)
    names = [
        zk.create(f"{path}/acl_changes_", b"Topic:x", sequence=True).rsplit("/", 1)[1]
        for _ in range(3)
    ]
    created = [zk.exists(f"{path}/{n}").ctime for n in names]
    # Now: nothing has expired.
    assert purge_obsolete_notifications(zk, path, names, now_ms=created[-1]) == []
    # Fifteen minutes and a millisecond after the second one: the first two go, the third stays.
    later = created[1] + CHANGE_EXPIRATION_MS + 1
    assert purge_obsolete_notifications(zk, path, reversed(names), now_ms=later) == names[:2]
    assert sorted(zk.get_children(path)) == names[2:]
    # A notification another broker purged meanwhile is skipped.
    far = created[2] + CHANGE_EXPIRATION_MS + 1
    assert purge_obsolete_notifications(zk, path, names, now_ms=far) == names[2:]
    assert zk.get_children(path) == []
