"""Kafka 4's admin APIs as clients call them: kafka-python 3 and confluent-kafka admins, and
raw requests (kio) where a client hides the field or the case.

DescribeTopicPartitions, ElectLeaders, Alter/ListPartitionReassignments, DescribeProducers,
ListConfigResources, OffsetCommit to unknown topics, authorized operations and the features
of ApiVersions, against one broker whose ``max.request.partition.size.limit`` is 3 so that
the broker's cap on a page is visible.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, ElectionType, Producer, TopicCollection
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AclOperation, AdminClient
from kafka import KafkaAdminClient, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import (
    InvalidReplicationAssignmentError,
    NoReassignmentInProgressError,
    UnknownTopicOrPartitionError,
)
from kafka.structs import OffsetAndMetadata
from kio.schema.api_versions.v3.request import ApiVersionsRequest as ApiVersionsV3
from kio.schema.api_versions.v4.request import ApiVersionsRequest as ApiVersionsV4
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest as DescribeGroupsV5
from kio.schema.describe_groups.v6.request import DescribeGroupsRequest as DescribeGroupsV6
from kio.schema.describe_topic_partitions.v0 import request as dtp_v0
from kio.schema.elect_leaders.v2 import request as elect_v2
from kio.schema.list_config_resources.v0.request import ListConfigResourcesRequest as LcrV0
from kio.schema.list_config_resources.v1.request import ListConfigResourcesRequest as LcrV1
from kio.schema.metadata.v10 import request as metadata_v10
from kio.schema.metadata.v12 import request as metadata_v12
from kio.static.primitive import i8, i32Timedelta
from kio_client import KioClient

from odradek import EmbeddedBroker
from odradek.protocol.errors import ErrorCode

TIMEOUT_MS = 30_000
TIMEOUT = 30
CAP = 3
#: Kafka's bit fields with no authorizer: every operation that applies to the resource type.
TOPIC_OPS = {"READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE"} | {
    "DESCRIBE_CONFIGS",
    "ALTER_CONFIGS",
}
TOPIC_OPS_BITS = sum(1 << code for code in (3, 4, 5, 6, 7, 8, 10, 11))
CLUSTER_OPS_BITS = sum(1 << code for code in (5, 7, 8, 9, 10, 11, 12))
GROUP_OPS_BITS = sum(1 << code for code in (3, 6, 8, 10, 11))
NOT_REQUESTED = -(2**31)


def unique(prefix: str = "k4") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(config={"max.request.partition.size.limit": str(CAP)}) as b:
        yield b


@pytest.fixture(scope="module")
def admin(broker) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(
        bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=TIMEOUT_MS
    )
    yield client
    client.close()


@pytest.fixture(scope="module")
def ck_admin(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


@pytest.fixture
def kio(broker) -> Iterator[KioClient]:
    with KioClient(broker.bootstrap_servers) as client:
        yield client


def create(admin: KafkaAdminClient, *topics: tuple[str, int]) -> None:
    admin.create_topics([NewTopic(name, partitions, 1) for name, partitions in topics])


# -- DescribeTopicPartitions ------------------------------------------------------------------


def test_describe_topic_partitions_pages_with_cursor(admin: KafkaAdminClient) -> None:
    a, b = unique("a"), unique("b")
    create(admin, (a, 2), (b, 4))
    missing = unique("c")

    first = admin.describe_topic_partitions([b, a, missing], response_partition_limit=3)
    names = [t["name"] for t in first["topics"]]
    assert names == [a, b]  # name order; the page ends inside b before the unknown topic
    assert [p["partition_index"] for p in first["topics"][0]["partitions"]] == [0, 1]
    assert [p["partition_index"] for p in first["topics"][1]["partitions"]] == [0]
    assert first["next_cursor"] == {"topic_name": b, "partition_index": 1}

    second = admin.describe_topic_partitions(
        [a, b, missing], response_partition_limit=3, cursor=first["next_cursor"]
    )
    topics = {t["name"]: t for t in second["topics"]}
    assert [p["partition_index"] for p in topics[b]["partitions"]] == [1, 2, 3]
    # The page is full after b: the unknown topic is where the next one starts.
    assert second["next_cursor"] == {"topic_name": missing, "partition_index": 0}

    third = admin.describe_topic_partitions(
        [a, b, missing], response_partition_limit=3, cursor=second["next_cursor"]
    )
    (unknown,) = third["topics"]
    assert unknown["name"] == missing
    assert unknown["error_code"] == ErrorCode.unknown_topic_or_partition
    assert unknown["partitions"] == []
    assert third["next_cursor"] is None

    described = topics[b]
    assert described["error_code"] == 0 and described["is_internal"] is False
    assert described["topic_authorized_operations"] == TOPIC_OPS_BITS
    partition = described["partitions"][0]
    assert partition["leader_id"] == partition["replica_nodes"][0]
    assert partition["isr_nodes"] == partition["replica_nodes"]
    assert partition["leader_epoch"] == 0 and partition["offline_replicas"] == []


def test_describe_topic_partitions_capped_by_broker_limit(admin: KafkaAdminClient) -> None:
    name = unique()
    create(admin, (name, 5))
    page = admin.describe_topic_partitions([name], response_partition_limit=2000)
    (topic,) = page["topics"]
    assert [p["partition_index"] for p in topic["partitions"]] == [0, 1, 2]
    assert page["next_cursor"] == {"topic_name": name, "partition_index": CAP}


def test_describe_topic_partitions_all_topics_skips_errors(kio: KioClient, admin) -> None:
    name = unique("zz")
    create(admin, (name, 1))
    request = dtp_v0.DescribeTopicPartitionsRequest(
        topics=(),
        response_partition_limit=2000,
        cursor=dtp_v0.Cursor(topic_name=name, partition_index=0),
    )
    response = kio.send(request)
    assert [t.name for t in response.topics] == [name]  # from the cursor's topic on
    assert response.topics[0].partitions[0].partition_index == 0
    assert response.next_cursor is None


def test_describe_topic_partitions_bad_cursor_and_names(kio: KioClient, admin) -> None:
    name = unique()
    create(admin, (name, 1))
    outside = dtp_v0.DescribeTopicPartitionsRequest(
        topics=(dtp_v0.TopicRequest(name=name),),
        response_partition_limit=10,
        cursor=dtp_v0.Cursor(topic_name=unique(), partition_index=0),
    )
    (topic,) = kio.send(outside).topics
    assert (topic.name, topic.error_code) == (name, ErrorCode.invalid_request)
    negative = dtp_v0.DescribeTopicPartitionsRequest(
        topics=(dtp_v0.TopicRequest(name=name),),
        response_partition_limit=10,
        cursor=dtp_v0.Cursor(topic_name=name, partition_index=-1),
    )
    (topic,) = kio.send(negative).topics
    assert topic.error_code == ErrorCode.invalid_request
    illegal = dtp_v0.DescribeTopicPartitionsRequest(
        topics=(dtp_v0.TopicRequest(name="no spaces"),), response_partition_limit=10
    )
    (topic,) = kio.send(illegal).topics
    assert topic.error_code == ErrorCode.invalid_topic_exception


# -- ElectLeaders ----------------------------------------------------------------------------


def test_elect_leaders_kafka_python(admin: KafkaAdminClient) -> None:
    name = unique()
    create(admin, (name, 2))
    for election_type in (0, 1):  # preferred, unclean: the only replica already leads
        response = admin.elect_leaders(election_type, {name: [0, 1, 7]}, raise_errors=False)
        assert response.error_code == 0
        (result,) = response.replica_election_results
        errors = {p.partition_id: p.error_code for p in result.partition_result}
        assert errors == {
            0: ErrorCode.election_not_needed,
            1: ErrorCode.election_not_needed,
            7: ErrorCode.unknown_topic_or_partition,
        }
    response = admin.elect_leaders(0, {unique(): [0]}, raise_errors=False)
    (result,) = response.replica_election_results
    assert result.partition_result[0].error_code == ErrorCode.unknown_topic_or_partition


def test_elect_leaders_confluent(ck_admin: AdminClient, admin: KafkaAdminClient) -> None:
    name = unique()
    create(admin, (name, 1))
    future = ck_admin.elect_leaders(ElectionType.PREFERRED, [CkTopicPartition(name, 0)])
    (error,) = future.result(TIMEOUT).values()
    assert error is not None and error.code() == ErrorCode.election_not_needed


def test_elect_leaders_every_partition_and_bad_type(kio: KioClient, admin) -> None:
    name = unique()
    create(admin, (name, 2))
    timeout = i32Timedelta.parse(datetime.timedelta(seconds=30))
    everything = elect_v2.ElectLeadersRequest(
        election_type=i8(0), topic_partitions=None, timeout=timeout
    )
    response = kio.send(everything)
    assert response.error_code == 0
    results = {r.topic: r.partition_result for r in response.replica_election_results}
    # Every topic is listed; partitions whose election was not needed are left out, as Kafka.
    assert results[name] == ()
    bad = elect_v2.ElectLeadersRequest(election_type=i8(5), topic_partitions=(), timeout=timeout)
    assert kio.send(bad).error_code == ErrorCode.invalid_request


# -- Partition reassignments -----------------------------------------------------------------


def test_partition_reassignments(admin: KafkaAdminClient, broker) -> None:
    name = unique()
    create(admin, (name, 2))
    node = admin.describe_cluster()["brokers"][0]["broker_id"]
    results = admin.alter_partition_reassignments(
        {
            TopicPartition(name, 0): [node],  # the current replica set: done at once
            TopicPartition(name, 1): [node, node + 1],  # a broker that is not registered
        }
    )
    assert results[TopicPartition(name, 0)] is None
    assert results[TopicPartition(name, 1)] is InvalidReplicationAssignmentError
    assert admin.list_partition_reassignments() == {}
    assert admin.list_partition_reassignments({name: [0, 1]}) == {}
    results = admin.alter_partition_reassignments(
        {
            TopicPartition(name, 0): None,  # cancel: nothing is in progress
            TopicPartition(name, 1): [node, node],
            TopicPartition(unique(), 0): [node],
        }
    )
    assert list(results.values()) == [
        NoReassignmentInProgressError,
        InvalidReplicationAssignmentError,
        UnknownTopicOrPartitionError,
    ]
    (topic,) = admin.describe_topics([name])
    assert all(p["replica_nodes"] == [node] and p["leader_id"] == node for p in topic["partitions"])


# -- DescribeProducers -----------------------------------------------------------------------


def test_describe_producers(admin: KafkaAdminClient, broker) -> None:
    name = unique()
    create(admin, (name, 2))
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "enable.idempotence": True})
    for i in range(5):
        producer.produce(name, str(i).encode(), partition=0)
        producer.flush(TIMEOUT)  # one batch per record: sequences 0..4
    states = admin.describe_producers([TopicPartition(name, 0), TopicPartition(name, 1)])
    (state,) = states[TopicPartition(name, 0)].active_producers
    assert state.producer_id >= 0 and state.producer_epoch == 0
    assert state.last_sequence == 4
    assert state.last_timestamp > 0
    assert state.coordinator_epoch == -1 and state.current_transaction_start_offset == -1
    assert states[TopicPartition(name, 1)].active_producers == []


def test_describe_producers_unknown_partition(admin: KafkaAdminClient) -> None:
    name = unique()
    create(admin, (name, 1))
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.describe_producers([TopicPartition(name, 3)], broker_id=_node(admin))


def _node(admin: KafkaAdminClient) -> int:
    return admin.describe_cluster()["brokers"][0]["broker_id"]


# -- ListConfigResources ---------------------------------------------------------------------


def test_list_config_resources(admin: KafkaAdminClient, broker) -> None:
    name, group = unique(), unique("group")
    create(admin, (name, 1))
    errors = admin.alter_group_offsets(
        group, {TopicPartition(name, 0): OffsetAndMetadata(0, "", -1)}
    )
    assert errors[TopicPartition(name, 0)].errno == 0
    everything = admin.list_config_resources()
    assert name in everything["topic"]
    assert everything["broker"] == [str(_node(admin))]
    assert group in everything["group"]
    only_topics = admin.list_config_resources(["TOPIC"])
    assert set(only_topics) == {"topic"}


def test_list_config_resources_versions(kio: KioClient) -> None:
    v0 = kio.send(LcrV0())  # client-metrics subscriptions only: none here
    assert (v0.error_code, v0.config_resources) == (ErrorCode.none, ())
    broker_loggers = kio.send(LcrV1(resource_types=(i8(8),)))
    assert broker_loggers.error_code == ErrorCode.unsupported_version
    brokers = kio.send(LcrV1(resource_types=(i8(4),)))
    assert [(r.resource_type, r.resource_name) for r in brokers.config_resources] == [
        (4, brokers.config_resources[0].resource_name)
    ]
    assert kio.send(LcrV1(resource_types=(i8(16),))).config_resources == ()


# -- OffsetCommit to topics that do not exist ------------------------------------------------


def test_commit_to_unknown_topic_kafka_python(admin: KafkaAdminClient) -> None:
    name, group = unique(), unique("group")
    create(admin, (name, 1))
    missing = unique("missing")
    result = admin.alter_group_offsets(
        group,
        {
            TopicPartition(name, 0): OffsetAndMetadata(3, "", -1),
            TopicPartition(name, 5): OffsetAndMetadata(3, "", -1),  # no such partition
            TopicPartition(missing, 0): OffsetAndMetadata(3, "", -1),
        },
    )
    assert result[TopicPartition(name, 0)].errno == 0
    assert result[TopicPartition(name, 5)] is UnknownTopicOrPartitionError
    assert result[TopicPartition(missing, 0)] is UnknownTopicOrPartitionError
    committed = admin.list_group_offsets(group)[group]
    assert committed == {TopicPartition(name, 0): OffsetAndMetadata(3, "", -1)}
    assert missing not in admin.list_topics()  # and the commit created no topic


def test_commit_to_unknown_topic_confluent(ck_admin: AdminClient) -> None:
    group, missing = unique("group"), unique("missing")
    request = ConsumerGroupTopicPartitions(group, [CkTopicPartition(missing, 0, 5)])
    (future,) = ck_admin.alter_consumer_group_offsets([request]).values()
    result = future.result(TIMEOUT)
    (partition,) = result.topic_partitions
    assert partition.error is not None
    assert partition.error.code() == ErrorCode.unknown_topic_or_partition


# -- Authorized operations -------------------------------------------------------------------


def test_authorized_operations_confluent(ck_admin: AdminClient, admin) -> None:

    name = unique()
    create(admin, (name, 1))
    cluster = ck_admin.describe_cluster(include_authorized_operations=True).result(TIMEOUT)
    assert {op.name for op in cluster.authorized_operations} == {
        "CREATE",
        "ALTER",
        "DESCRIBE",
        "CLUSTER_ACTION",
        "DESCRIBE_CONFIGS",
        "ALTER_CONFIGS",
        "IDEMPOTENT_WRITE",
    }
    (future,) = ck_admin.describe_topics(
        TopicCollection([name]), include_authorized_operations=True
    ).values()
    topic = future.result(TIMEOUT)
    assert {op.name for op in topic.authorized_operations} == TOPIC_OPS
    without = ck_admin.describe_cluster().result(TIMEOUT)
    assert not without.authorized_operations
    assert AclOperation.READ in topic.authorized_operations


def test_authorized_operations_of_groups(ck_admin: AdminClient, admin) -> None:
    name, group = unique(), unique("group")
    create(admin, (name, 1))
    admin.alter_group_offsets(group, {TopicPartition(name, 0): OffsetAndMetadata(1, "", -1)})
    (future,) = ck_admin.describe_consumer_groups(
        [group], include_authorized_operations=True
    ).values()
    described = future.result(TIMEOUT)
    assert {op.name for op in described.authorized_operations} == {
        "READ",
        "DESCRIBE",
        "DELETE",
        "DESCRIBE_CONFIGS",
        "ALTER_CONFIGS",
    }
    described = admin.describe_groups([group], include_authorized_operations=True)[group]
    assert set(described["authorized_operations"]) == {
        "READ",
        "DESCRIBE",
        "DELETE",
        "DESCRIBE_CONFIGS",
        "ALTER_CONFIGS",
    }


def test_group_authorized_operations_only_when_asked(kio: KioClient, admin) -> None:
    name, group = unique(), unique("group")
    create(admin, (name, 1))
    admin.alter_group_offsets(group, {TopicPartition(name, 0): OffsetAndMetadata(1, "", -1)})
    (asked,) = kio.send(
        DescribeGroupsV5(groups=(group,), include_authorized_operations=True)
    ).groups
    assert asked.authorized_operations == GROUP_OPS_BITS
    (unasked,) = kio.send(
        DescribeGroupsV5(groups=(group,), include_authorized_operations=False)
    ).groups
    assert unasked.authorized_operations == NOT_REQUESTED
    # v6 answers GROUP_ID_NOT_FOUND for an unknown group, and no operations with an error.
    (unknown,) = kio.send(
        DescribeGroupsV6(groups=(unique("none"),), include_authorized_operations=True)
    ).groups
    assert unknown.error_code == ErrorCode.group_id_not_found
    assert unknown.authorized_operations == NOT_REQUESTED


def test_metadata_authorized_operations_when_asked(kio: KioClient, admin) -> None:
    name = unique()
    create(admin, (name, 1))

    def metadata(include: bool):
        return kio.send(
            metadata_v12.MetadataRequest(
                topics=(metadata_v12.MetadataRequestTopic(topic_id=None, name=name),),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=include,
            )
        )

    (topic,) = metadata(True).topics
    assert topic.topic_authorized_operations == TOPIC_OPS_BITS
    (topic,) = metadata(False).topics
    assert topic.topic_authorized_operations == NOT_REQUESTED
    for include in (True, False):  # the cluster's operations: Metadata v8-v10 only
        response = kio.send(
            metadata_v10.MetadataRequest(
                topics=(),
                allow_auto_topic_creation=False,
                include_cluster_authorized_operations=include,
                include_topic_authorized_operations=False,
            )
        )
        expected = CLUSTER_OPS_BITS if include else NOT_REQUESTED
        assert response.cluster_authorized_operations == expected


# -- Features --------------------------------------------------------------------------------


def test_features_kafka_python(admin: KafkaAdminClient) -> None:
    features = admin.describe_features()
    assert features["metadata.version"]["supported"] == (7, 25)
    assert features["metadata.version"]["finalized"] == (25, 25)
    assert features["group.version"]["finalized"] == (1, 1)
    # Transactions version 2 (KIP-890), and the earlier levels for older clients.
    assert features["transaction.version"] == {
        "supported": (0, 2),
        "finalized": (2, 2),
        "finalized_epoch": 0,
    }
    assert features["kraft.version"] == {"supported": (0, 0)}


def test_features_by_api_versions_version(kio: KioClient) -> None:
    v4 = kio.send(ApiVersionsV4(client_software_name="kio", client_software_version="1"))
    assert {f.name for f in v4.supported_features} == {
        "metadata.version",
        "group.version",
        "transaction.version",
        "kraft.version",
    }
    assert {(f.name, f.max_version_level) for f in v4.finalized_features} == {
        ("metadata.version", 25),
        ("group.version", 1),
        ("transaction.version", 2),
    }
    assert v4.finalized_features_epoch == 0 and v4.zk_migration_ready is False
    # Before v4, supported features whose minimum is 0 are left out (KAFKA-17492).
    v3 = kio.send(ApiVersionsV3(client_software_name="kio", client_software_version="1"))
    assert [f.name for f in v3.supported_features] == ["metadata.version"]
