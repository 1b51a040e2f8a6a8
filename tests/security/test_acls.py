"""ACL authorization against a real broker: every API's check as Kafka documents it.

One broker for the module with a SASL_PLAINTEXT listener (PLAIN users admin, alice, bob)
and StandardAuthorizer; admin is a super user and sets ACLs with confluent-kafka's
AdminClient, as an operator would. The table names, per API, the operation and resource
Kafka's KafkaApis checks (docs: "Operations and Resources on Protocols") and the error a
refusal answers; each row is tried as alice with no ACL, with an ALLOW on the literal name,
on a prefix, for every principal ("User:*"), on the "*" wildcard, and with that ALLOW beaten
by a DENY. Requests go over a raw kio client so that exact error fields are read.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AdminClient,
    NewTopic,
)
from confluent_kafka.admin import AclOperation as CkOperation
from confluent_kafka.admin import AclPermissionType as CkPermission
from confluent_kafka.admin import ResourcePatternType as CkPattern
from confluent_kafka.admin import ResourceType as CkResource
from integration.test_wire import batch_of_size
from integration.wire_client import WireClient
from kafka.record.default_records import DefaultRecordBatchBuilder

from odradek import EmbeddedBroker
from odradek.protocol import schemas
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from odradek.server.config import BrokerConfig, ConfigError
from security.clients import plain_login

JAAS = (  # the broker logs in to its inter-broker listener as admin, a super user
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" '
    'user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret";'
)
TOPIC, GROUP, TXN = "acl-topic", "acl-group", "acl-txn"
PREFIX = "acl-"


def broker_config() -> dict[str, str]:
    return {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
        "auto.create.topics.enable": "true",
        "transaction.two.phase.commit.enable": "true",
    }


def client_config(broker: EmbeddedBroker, user: str) -> dict[str, str]:
    return {
        "bootstrap.servers": broker.bootstrap_servers,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": f"{user}-secret",
    }


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    data = tmp_path_factory.mktemp("acl-broker")
    with EmbeddedBroker(config=broker_config(), data_dir=data) as b:
        admin = AdminClient(client_config(b, "admin"))
        for future in admin.create_topics([NewTopic(TOPIC, 1, 1)]).values():
            future.result(30)
        producer = Producer(client_config(b, "admin"))
        producer.produce(TOPIC, b"x")
        assert producer.flush(30) == 0
        # The coordinators' topics exist before the table runs (created on first use).
        txn = Producer({**client_config(b, "admin"), "transactional.id": "acl-warmup"})
        txn.init_transactions(30)
        consumer = Consumer({**client_config(b, "admin"), "group.id": "acl-warmup"})
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        assert consumer.poll(30) is not None
        consumer.commit(asynchronous=False)
        consumer.close()
        yield b


@pytest.fixture(scope="module")
def admin(broker: EmbeddedBroker) -> AdminClient:
    return AdminClient(client_config(broker, "admin"))


def login(broker: EmbeddedBroker, user: str) -> WireClient:
    return plain_login(broker.bootstrap_servers, user, f"{user}-secret")


_CK_RESOURCE = {
    ResourceType.TOPIC: CkResource.TOPIC,
    ResourceType.GROUP: CkResource.GROUP,
    ResourceType.CLUSTER: CkResource.BROKER,  # confluent-kafka's name for the CLUSTER resource
    ResourceType.TRANSACTIONAL_ID: CkResource.TRANSACTIONAL_ID,
}


def binding(
    resource_type: ResourceType,
    name: str,
    operation: AclOperation,
    permission: CkPermission = CkPermission.ALLOW,
    principal: str = "User:alice",
    pattern: CkPattern = CkPattern.LITERAL,
) -> AclBinding:
    return AclBinding(
        _CK_RESOURCE[resource_type],
        name,
        pattern,
        principal,
        "*",
        CkOperation[operation.name],
        permission,
    )


def create(admin: AdminClient, *bindings: AclBinding) -> None:
    if not bindings:
        return
    for future in admin.create_acls(list(bindings)).values():
        assert future.result(30) is None


def clear(admin: AdminClient) -> None:
    """Remove every ACL (admin needs none: a super user)."""
    every = AclBindingFilter(
        CkResource.ANY, None, CkPattern.ANY, None, None, CkOperation.ANY, CkPermission.ANY
    )
    for future in admin.delete_acls([every]).values():
        future.result(30)


def build(api: ApiKey, version: int, cls: str, **fields: Any) -> Any:
    """An entity of the request schema of ``api`` at ``version`` (the request or a part)."""
    return schemas.build(getattr(schemas.request_module(api, version), cls), **fields)


# -- the table -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """An API, what Kafka checks for it, and how its answer reads."""

    api: str
    operation: AclOperation
    resource_type: ResourceType
    #: The request, given the resource's name.
    request: Callable[[str], Any]
    #: The error code of the answer that tells allowed from refused.
    error_of: Callable[[Any], int]
    refused: ErrorCode
    #: The answer when allowed (the request is built to get a known one).
    allowed: ErrorCode = ErrorCode.none
    #: The resource's name, when not the table's one of its type.
    resource: str | None = None
    #: Another operation admits the request too (WriteTxnMarkers: ALTER or CLUSTER_ACTION),
    #: so an ALLOW of All gets it through a DENY of this one.
    alternative: bool = False

    @property
    def name(self) -> str:
        if self.resource is not None:
            return self.resource
        return {
            ResourceType.TOPIC: TOPIC,
            ResourceType.GROUP: GROUP,
            ResourceType.TRANSACTIONAL_ID: TXN,
            ResourceType.CLUSTER: CLUSTER_NAME,
        }[self.resource_type]


P, F, LO, MD = ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.LIST_OFFSETS, ApiKey.METADATA


def _produce(name: str) -> Any:
    return build(
        P,
        9,
        "ProduceRequest",
        transactional_id=None,
        acks=1,
        timeout=10_000,
        topic_data=(
            build(
                P,
                9,
                "TopicProduceData",
                name=name,
                partition_data=(
                    build(P, 9, "PartitionProduceData", index=0, records=batch_of_size(100)),
                ),
            ),
        ),
    )


def _fetch(name: str) -> Any:
    partition = build(
        F, 12, "FetchPartition", partition=0, fetch_offset=0, partition_max_bytes=1024
    )
    return build(
        F,
        12,
        "FetchRequest",
        max_wait=0,
        min_bytes=0,
        topics=(build(F, 12, "FetchTopic", topic=name, partitions=(partition,)),),
        forgotten_topics_data=(),
    )


def _first_partition_error(response: Any) -> int:
    topic = response.topics[0] if hasattr(response, "topics") else response.responses[0]
    return topic.partitions[0].error_code


ROWS = [
    Row(
        "Produce",
        AclOperation.WRITE,
        ResourceType.TOPIC,
        _produce,
        lambda r: r.responses[0].partition_responses[0].error_code,
        ErrorCode.topic_authorization_failed,
    ),
    Row(
        "Fetch",
        AclOperation.READ,
        ResourceType.TOPIC,
        _fetch,
        lambda r: r.responses[0].partitions[0].error_code,
        ErrorCode.topic_authorization_failed,
    ),
    Row(
        "ListOffsets",
        AclOperation.DESCRIBE,
        ResourceType.TOPIC,
        lambda name: build(
            LO,
            8,
            "ListOffsetsRequest",
            replica_id=-1,
            isolation_level=0,
            topics=(
                build(
                    LO,
                    8,
                    "ListOffsetsTopic",
                    name=name,
                    partitions=(
                        build(LO, 8, "ListOffsetsPartition", partition_index=0, timestamp=-1),
                    ),
                ),
            ),
        ),
        _first_partition_error,
        ErrorCode.topic_authorization_failed,
    ),
    Row(
        "Metadata",
        AclOperation.DESCRIBE,
        ResourceType.TOPIC,
        lambda name: build(
            MD,
            12,
            "MetadataRequest",
            topics=(build(MD, 12, "MetadataRequestTopic", name=name, topic_id=None),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        ),
        lambda r: r.topics[0].error_code,
        ErrorCode.topic_authorization_failed,
    ),
    Row(
        "CreateTopics",
        AclOperation.CREATE,
        ResourceType.TOPIC,
        lambda name: build(
            ApiKey.CREATE_TOPICS,
            7,
            "CreateTopicsRequest",
            topics=(
                build(
                    ApiKey.CREATE_TOPICS,
                    7,
                    "CreatableTopic",
                    name=name,
                    num_partitions=1,
                    replication_factor=1,
                    assignments=(),
                    configs=(),
                ),
            ),
            timeout=10_000,
            validate_only=True,
        ),
        lambda r: r.topics[0].error_code,
        ErrorCode.topic_authorization_failed,
        ErrorCode.topic_already_exists,
    ),
    Row(
        "DeleteTopics",
        AclOperation.DELETE,
        ResourceType.TOPIC,
        # A topic that does not exist: DELETE is checked before existence, and the table's
        # topic stays for the other rows.
        lambda name: build(
            ApiKey.DELETE_TOPICS,
            6,
            "DeleteTopicsRequest",
            topics=(
                build(
                    ApiKey.DELETE_TOPICS,
                    6,
                    "DeleteTopicState",
                    name=name,
                    topic_id=uuid.UUID(int=0),
                ),
            ),
            timeout=10_000,
        ),
        lambda r: r.responses[0].error_code,
        ErrorCode.topic_authorization_failed,
        ErrorCode.unknown_topic_or_partition,
        resource=TOPIC + "-gone",
    ),
    Row(
        "CreatePartitions",
        AclOperation.ALTER,
        ResourceType.TOPIC,
        lambda name: build(
            ApiKey.CREATE_PARTITIONS,
            3,
            "CreatePartitionsRequest",
            topics=(
                build(
                    ApiKey.CREATE_PARTITIONS,
                    3,
                    "CreatePartitionsTopic",
                    name=name,
                    count=1,
                    assignments=None,
                ),
            ),
            timeout=10_000,
            validate_only=True,
        ),
        lambda r: r.results[0].error_code,
        ErrorCode.topic_authorization_failed,
        ErrorCode.invalid_partitions,
    ),
    Row(
        "DescribeConfigs(topic)",
        AclOperation.DESCRIBE_CONFIGS,
        ResourceType.TOPIC,
        lambda name: build(
            ApiKey.DESCRIBE_CONFIGS,
            4,
            "DescribeConfigsRequest",
            resources=(
                build(
                    ApiKey.DESCRIBE_CONFIGS,
                    4,
                    "DescribeConfigsResource",
                    resource_type=2,
                    resource_name=name,
                    configuration_keys=None,
                ),
            ),
        ),
        lambda r: r.results[0].error_code,
        ErrorCode.topic_authorization_failed,
    ),
    Row(
        "DescribeConfigs(broker)",
        AclOperation.DESCRIBE_CONFIGS,
        ResourceType.CLUSTER,
        lambda name: build(
            ApiKey.DESCRIBE_CONFIGS,
            4,
            "DescribeConfigsRequest",
            resources=(
                build(
                    ApiKey.DESCRIBE_CONFIGS,
                    4,
                    "DescribeConfigsResource",
                    resource_type=4,
                    resource_name="",
                    configuration_keys=None,
                ),
            ),
        ),
        lambda r: r.results[0].error_code,
        ErrorCode.cluster_authorization_failed,
    ),
    Row(
        "IncrementalAlterConfigs",
        AclOperation.ALTER_CONFIGS,
        ResourceType.TOPIC,
        lambda name: build(
            ApiKey.INCREMENTAL_ALTER_CONFIGS,
            1,
            "IncrementalAlterConfigsRequest",
            resources=(
                build(
                    ApiKey.INCREMENTAL_ALTER_CONFIGS,
                    1,
                    "AlterConfigsResource",
                    resource_type=2,
                    resource_name=name,
                    configs=(
                        build(
                            ApiKey.INCREMENTAL_ALTER_CONFIGS,
                            1,
                            "AlterableConfig",
                            name="retention.ms",
                            config_operation=0,
                            value="3600000",
                        ),
                    ),
                ),
            ),
            validate_only=True,
        ),
        lambda r: r.responses[0].error_code,
        ErrorCode.topic_authorization_failed,
    ),
    Row(
        "DeleteRecords",
        AclOperation.DELETE,
        ResourceType.TOPIC,
        lambda name: build(
            ApiKey.DELETE_RECORDS,
            2,
            "DeleteRecordsRequest",
            topics=(
                build(
                    ApiKey.DELETE_RECORDS,
                    2,
                    "DeleteRecordsTopic",
                    name=name,
                    partitions=(
                        build(
                            ApiKey.DELETE_RECORDS,
                            2,
                            "DeleteRecordsPartition",
                            partition_index=0,
                            offset=0,
                        ),
                    ),
                ),
            ),
            timeout=10_000,
        ),
        _first_partition_error,
        ErrorCode.topic_authorization_failed,
    ),
    Row(
        "DescribeProducers",
        AclOperation.READ,
        ResourceType.TOPIC,
        lambda name: build(
            ApiKey.DESCRIBE_PRODUCERS,
            0,
            "DescribeProducersRequest",
            topics=(
                build(
                    ApiKey.DESCRIBE_PRODUCERS, 0, "TopicRequest", name=name, partition_indexes=(0,)
                ),
            ),
        ),
        _first_partition_error,
        ErrorCode.topic_authorization_failed,
    ),
    Row(
        "FindCoordinator(group)",
        AclOperation.DESCRIBE,
        ResourceType.GROUP,
        lambda name: build(
            ApiKey.FIND_COORDINATOR,
            4,
            "FindCoordinatorRequest",
            key_type=0,
            coordinator_keys=(name,),
        ),
        lambda r: r.coordinators[0].error_code,
        ErrorCode.group_authorization_failed,
    ),
    Row(
        "FindCoordinator(transaction)",
        AclOperation.DESCRIBE,
        ResourceType.TRANSACTIONAL_ID,
        lambda name: build(
            ApiKey.FIND_COORDINATOR,
            4,
            "FindCoordinatorRequest",
            key_type=1,
            coordinator_keys=(name,),
        ),
        lambda r: r.coordinators[0].error_code,
        ErrorCode.transactional_id_authorization_failed,
    ),
    Row(
        "JoinGroup",
        AclOperation.READ,
        ResourceType.GROUP,
        lambda name: build(
            ApiKey.JOIN_GROUP,
            9,
            "JoinGroupRequest",
            group_id=name,
            session_timeout=10_000,
            rebalance_timeout=10_000,
            member_id="",
            group_instance_id=None,
            protocol_type="consumer",
            protocols=(
                build(ApiKey.JOIN_GROUP, 9, "JoinGroupRequestProtocol", name="range", metadata=b""),
            ),
        ),
        lambda r: r.error_code,
        ErrorCode.group_authorization_failed,
        ErrorCode.member_id_required,
        resource=PREFIX + "joined",  # joining creates the group; the others want none
    ),
    Row(
        "OffsetFetch",
        AclOperation.DESCRIBE,
        ResourceType.GROUP,
        lambda name: build(
            ApiKey.OFFSET_FETCH, 7, "OffsetFetchRequest", group_id=name, topics=None
        ),
        lambda r: r.error_code,
        ErrorCode.group_authorization_failed,
    ),
    Row(
        "OffsetDelete",
        AclOperation.DELETE,
        ResourceType.GROUP,
        lambda name: build(
            ApiKey.OFFSET_DELETE, 0, "OffsetDeleteRequest", group_id=name, topics=()
        ),
        lambda r: r.error_code,
        ErrorCode.group_authorization_failed,
        ErrorCode.group_id_not_found,
    ),
    Row(
        "DescribeGroups",
        AclOperation.DESCRIBE,
        ResourceType.GROUP,
        lambda name: build(
            ApiKey.DESCRIBE_GROUPS,
            5,
            "DescribeGroupsRequest",
            groups=(name,),
            include_authorized_operations=False,
        ),
        lambda r: r.groups[0].error_code,
        ErrorCode.group_authorization_failed,
    ),
    Row(
        "DeleteGroups",
        AclOperation.DELETE,
        ResourceType.GROUP,
        lambda name: build(ApiKey.DELETE_GROUPS, 2, "DeleteGroupsRequest", groups_names=(name,)),
        lambda r: r.results[0].error_code,
        ErrorCode.group_authorization_failed,
        ErrorCode.group_id_not_found,
    ),
    Row(
        "InitProducerId(transactional)",
        AclOperation.WRITE,
        ResourceType.TRANSACTIONAL_ID,
        lambda name: build(
            ApiKey.INIT_PRODUCER_ID,
            5,
            "InitProducerIdRequest",
            transactional_id=name,
            transaction_timeout=60_000,
        ),
        lambda r: r.error_code,
        ErrorCode.transactional_id_authorization_failed,
        resource=PREFIX + "initialized",  # DescribeTransactions wants an unknown id
    ),
    Row(
        "InitProducerId(idempotent)",
        AclOperation.IDEMPOTENT_WRITE,
        ResourceType.CLUSTER,
        lambda name: build(
            ApiKey.INIT_PRODUCER_ID,
            5,
            "InitProducerIdRequest",
            transactional_id=None,
            transaction_timeout=60_000,
        ),
        lambda r: r.error_code,
        ErrorCode.cluster_authorization_failed,
    ),
    Row(
        "DescribeTransactions",
        AclOperation.DESCRIBE,
        ResourceType.TRANSACTIONAL_ID,
        lambda name: build(
            ApiKey.DESCRIBE_TRANSACTIONS,
            0,
            "DescribeTransactionsRequest",
            transactional_ids=(name,),
        ),
        lambda r: r.transaction_states[0].error_code,
        ErrorCode.transactional_id_authorization_failed,
        ErrorCode.transactional_id_not_found,
    ),
    Row(
        "ElectLeaders",
        AclOperation.ALTER,
        ResourceType.CLUSTER,
        lambda name: build(
            ApiKey.ELECT_LEADERS,
            2,
            "ElectLeadersRequest",
            election_type=0,
            topic_partitions=(
                build(ApiKey.ELECT_LEADERS, 2, "TopicPartitions", topic=name, partitions=(0,)),
            ),
            timeout=10_000,
        ),
        lambda r: r.error_code,
        ErrorCode.cluster_authorization_failed,
    ),
    Row(
        "ListPartitionReassignments",
        AclOperation.DESCRIBE,
        ResourceType.CLUSTER,
        lambda name: build(
            ApiKey.LIST_PARTITION_REASSIGNMENTS,
            0,
            "ListPartitionReassignmentsRequest",
            timeout=10_000,
            topics=None,
        ),
        lambda r: r.error_code,
        ErrorCode.cluster_authorization_failed,
    ),
    Row(
        "DescribeLogDirs",
        AclOperation.DESCRIBE,
        ResourceType.CLUSTER,
        lambda name: build(ApiKey.DESCRIBE_LOG_DIRS, 4, "DescribeLogDirsRequest", topics=None),
        lambda r: r.error_code,
        ErrorCode.cluster_authorization_failed,
    ),
    Row(
        "DescribeUserScramCredentials",
        AclOperation.DESCRIBE,
        ResourceType.CLUSTER,
        lambda name: build(
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
            0,
            "DescribeUserScramCredentialsRequest",
            users=None,
        ),
        lambda r: r.error_code,
        ErrorCode.cluster_authorization_failed,
    ),
    Row(
        "DescribeClientQuotas",
        AclOperation.DESCRIBE_CONFIGS,
        ResourceType.CLUSTER,
        lambda name: build(
            ApiKey.DESCRIBE_CLIENT_QUOTAS,
            1,
            "DescribeClientQuotasRequest",
            components=(),
            strict=False,
        ),
        lambda r: r.error_code,
        ErrorCode.cluster_authorization_failed,
    ),
    Row(
        "AlterClientQuotas",
        AclOperation.ALTER_CONFIGS,
        ResourceType.CLUSTER,
        lambda name: build(
            ApiKey.ALTER_CLIENT_QUOTAS,
            1,
            "AlterClientQuotasRequest",
            entries=(
                build(
                    ApiKey.ALTER_CLIENT_QUOTAS,
                    1,
                    "EntryData",
                    entity=(
                        build(
                            ApiKey.ALTER_CLIENT_QUOTAS,
                            1,
                            "EntityData",
                            entity_type="client-id",
                            entity_name="acl-quota",
                        ),
                    ),
                    ops=(
                        build(
                            ApiKey.ALTER_CLIENT_QUOTAS,
                            1,
                            "OpData",
                            key="producer_byte_rate",
                            value=0.0,
                            remove=True,
                        ),
                    ),
                ),
            ),
            validate_only=False,
        ),
        lambda r: r.entries[0].error_code,
        ErrorCode.cluster_authorization_failed,
    ),
    Row(
        "DescribeAcls",
        AclOperation.DESCRIBE,
        ResourceType.CLUSTER,
        lambda name: build(
            ApiKey.DESCRIBE_ACLS,
            3,
            "DescribeAclsRequest",
            resource_type_filter=1,
            resource_name_filter=None,
            pattern_type_filter=1,
            principal_filter=None,
            host_filter=None,
            operation=1,
            permission_type=1,
        ),
        lambda r: r.error_code,
        ErrorCode.cluster_authorization_failed,
    ),
    Row(
        "DeleteAcls",
        AclOperation.ALTER,
        ResourceType.CLUSTER,
        lambda name: build(
            ApiKey.DELETE_ACLS,
            3,
            "DeleteAclsRequest",
            filters=(
                build(
                    ApiKey.DELETE_ACLS,
                    3,
                    "DeleteAclsFilter",
                    resource_type_filter=2,
                    resource_name_filter="no-such-topic",
                    pattern_type_filter=3,
                    principal_filter=None,
                    host_filter=None,
                    operation=1,
                    permission_type=1,
                ),
            ),
        ),
        lambda r: r.filter_results[0].error_code,
        ErrorCode.cluster_authorization_failed,
    ),
]

ROWS += [
    Row(
        "SyncGroup",
        AclOperation.READ,
        ResourceType.GROUP,
        lambda name: build(
            ApiKey.SYNC_GROUP,
            5,
            "SyncGroupRequest",
            group_id=name,
            generation_id=1,
            member_id="nobody",
            group_instance_id=None,
            protocol_type="consumer",
            protocol_name="range",
            assignments=(),
        ),
        lambda r: r.error_code,
        ErrorCode.group_authorization_failed,
        ErrorCode.unknown_member_id,
    ),
    Row(
        "Heartbeat",
        AclOperation.READ,
        ResourceType.GROUP,
        lambda name: build(
            ApiKey.HEARTBEAT,
            4,
            "HeartbeatRequest",
            group_id=name,
            generation_id=1,
            member_id="nobody",
            group_instance_id=None,
        ),
        lambda r: r.error_code,
        ErrorCode.group_authorization_failed,
        ErrorCode.unknown_member_id,
    ),
    Row(
        "LeaveGroup",
        AclOperation.READ,
        ResourceType.GROUP,
        lambda name: build(
            ApiKey.LEAVE_GROUP,
            5,
            "LeaveGroupRequest",
            group_id=name,
            members=(
                build(
                    ApiKey.LEAVE_GROUP,
                    5,
                    "MemberIdentity",
                    member_id="nobody",
                    group_instance_id=None,
                ),
            ),
        ),
        lambda r: r.error_code,
        ErrorCode.group_authorization_failed,
        ErrorCode.unknown_member_id,
    ),
    Row(
        "OffsetCommit",
        AclOperation.READ,
        ResourceType.GROUP,
        lambda name: build(
            ApiKey.OFFSET_COMMIT,
            9,
            "OffsetCommitRequest",
            group_id=name,
            generation_id_or_member_epoch=-1,
            member_id="",
            group_instance_id=None,
            topics=(
                build(
                    ApiKey.OFFSET_COMMIT,
                    9,
                    "OffsetCommitRequestTopic",
                    name=TOPIC,
                    partitions=(
                        build(
                            ApiKey.OFFSET_COMMIT,
                            9,
                            "OffsetCommitRequestPartition",
                            partition_index=0,
                            committed_offset=0,
                            committed_metadata=None,
                        ),
                    ),
                ),
            ),
        ),
        _first_partition_error,
        ErrorCode.group_authorization_failed,
        # The group may be read; the topic needs READ too, which this row does not grant.
        ErrorCode.topic_authorization_failed,
    ),
    Row(
        "EndTxn",
        AclOperation.WRITE,
        ResourceType.TRANSACTIONAL_ID,
        lambda name: build(
            ApiKey.END_TXN,
            4,
            "EndTxnRequest",
            transactional_id=name,
            producer_id=1,
            producer_epoch=0,
            committed=True,
        ),
        lambda r: r.error_code,
        ErrorCode.transactional_id_authorization_failed,
        ErrorCode.invalid_producer_id_mapping,
    ),
    Row(
        "AddOffsetsToTxn",
        AclOperation.WRITE,
        ResourceType.TRANSACTIONAL_ID,
        lambda name: build(
            ApiKey.ADD_OFFSETS_TO_TXN,
            4,
            "AddOffsetsToTxnRequest",
            transactional_id=name,
            producer_id=1,
            producer_epoch=0,
            group_id=GROUP,
        ),
        lambda r: r.error_code,
        ErrorCode.transactional_id_authorization_failed,
        # The transaction may be written; its group needs READ, not granted here.
        ErrorCode.group_authorization_failed,
    ),
    Row(
        "OffsetForLeaderEpoch",
        AclOperation.DESCRIBE,
        ResourceType.TOPIC,
        lambda name: build(
            ApiKey.OFFSET_FOR_LEADER_EPOCH,
            4,
            "OffsetForLeaderEpochRequest",
            replica_id=-1,
            topics=(
                build(
                    ApiKey.OFFSET_FOR_LEADER_EPOCH,
                    4,
                    "OffsetForLeaderTopic",
                    topic=name,
                    partitions=(
                        build(
                            ApiKey.OFFSET_FOR_LEADER_EPOCH,
                            4,
                            "OffsetForLeaderPartition",
                            partition=0,
                            leader_epoch=0,
                        ),
                    ),
                ),
            ),
        ),
        _first_partition_error,
        ErrorCode.topic_authorization_failed,
    ),
    Row(
        "DescribeTopicPartitions",
        AclOperation.DESCRIBE,
        ResourceType.TOPIC,
        lambda name: build(
            ApiKey.DESCRIBE_TOPIC_PARTITIONS,
            0,
            "DescribeTopicPartitionsRequest",
            topics=(build(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, "TopicRequest", name=name),),
            response_partition_limit=100,
        ),
        lambda r: r.topics[0].error_code,
        ErrorCode.topic_authorization_failed,
    ),
    Row(
        "ConsumerGroupDescribe",
        AclOperation.DESCRIBE,
        ResourceType.GROUP,
        lambda name: build(
            ApiKey.CONSUMER_GROUP_DESCRIBE,
            0,
            "ConsumerGroupDescribeRequest",
            group_ids=(name,),
            include_authorized_operations=False,
        ),
        lambda r: r.groups[0].error_code,
        ErrorCode.group_authorization_failed,
        ErrorCode.group_id_not_found,
    ),
    Row(
        "AlterUserScramCredentials",
        AclOperation.ALTER,
        ResourceType.CLUSTER,
        lambda name: build(
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
            0,
            "AlterUserScramCredentialsRequest",
            deletions=(
                build(
                    ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
                    0,
                    "ScramCredentialDeletion",
                    name="nobody",
                    mechanism=1,
                ),
            ),
            upsertions=(),
        ),
        lambda r: r.results[0].error_code,
        ErrorCode.cluster_authorization_failed,
        ErrorCode.resource_not_found,
    ),
    Row(
        "AlterPartitionReassignments",
        AclOperation.ALTER,
        ResourceType.CLUSTER,
        lambda name: build(
            ApiKey.ALTER_PARTITION_REASSIGNMENTS,
            0,
            "AlterPartitionReassignmentsRequest",
            timeout=10_000,
            topics=(),
        ),
        lambda r: r.error_code,
        ErrorCode.cluster_authorization_failed,
    ),
    Row(
        "ListConfigResources",
        AclOperation.DESCRIBE_CONFIGS,
        ResourceType.CLUSTER,
        lambda name: build(
            ApiKey.LIST_CONFIG_RESOURCES, 1, "ListConfigResourcesRequest", resource_types=()
        ),
        lambda r: r.error_code,
        ErrorCode.cluster_authorization_failed,
    ),
    Row(
        "CreateAcls",
        AclOperation.ALTER,
        ResourceType.CLUSTER,
        lambda name: build(
            ApiKey.CREATE_ACLS,
            3,
            "CreateAclsRequest",
            creations=(
                build(
                    ApiKey.CREATE_ACLS,
                    3,
                    "AclCreation",
                    resource_type=ResourceType.TOPIC,
                    resource_name="created-by-the-table",
                    resource_pattern_type=3,
                    principal="User:bob",
                    host="*",
                    operation=AclOperation.READ,
                    permission_type=3,
                ),
            ),
        ),
        lambda r: r.results[0].error_code,
        ErrorCode.cluster_authorization_failed,
    ),
]

ROWS += [
    Row(
        "WriteTxnMarkers",
        AclOperation.CLUSTER_ACTION,
        ResourceType.CLUSTER,
        lambda name: build(
            ApiKey.WRITE_TXN_MARKERS,
            1,
            "WriteTxnMarkersRequest",
            markers=(
                build(
                    ApiKey.WRITE_TXN_MARKERS,
                    1,
                    "WritableTxnMarker",
                    producer_id=1,
                    producer_epoch=0,
                    transaction_result=False,
                    topics=(
                        build(
                            ApiKey.WRITE_TXN_MARKERS,
                            1,
                            "WritableTxnMarkerTopic",
                            name="no-such-topic",
                            partition_indexes=(0,),
                        ),
                    ),
                    coordinator_epoch=0,
                ),
            ),
        ),
        lambda r: r.markers[0].topics[0].partitions[0].error_code,
        ErrorCode.cluster_authorization_failed,
        ErrorCode.unknown_topic_or_partition,
        alternative=True,
    ),
    Row(
        "AddPartitionsToTxn",
        AclOperation.WRITE,
        ResourceType.TRANSACTIONAL_ID,
        lambda name: build(
            ApiKey.ADD_PARTITIONS_TO_TXN,
            3,
            "AddPartitionsToTxnRequest",
            v3_and_below_transactional_id=name,
            v3_and_below_producer_id=1,
            v3_and_below_producer_epoch=0,
            v3_and_below_topics=(
                build(
                    ApiKey.ADD_PARTITIONS_TO_TXN,
                    3,
                    "AddPartitionsToTxnTopic",
                    name=TOPIC,
                    partitions=(0,),
                ),
            ),
        ),
        lambda r: r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
        ErrorCode.transactional_id_authorization_failed,
        # The transaction may be written; its topic needs WRITE, not granted here.
        ErrorCode.topic_authorization_failed,
    ),
    Row(
        "ConsumerGroupHeartbeat",
        AclOperation.READ,
        ResourceType.GROUP,
        lambda name: build(
            ApiKey.CONSUMER_GROUP_HEARTBEAT,
            0,
            "ConsumerGroupHeartbeatRequest",
            group_id=name,
            member_id="",
            member_epoch=0,
            instance_id=None,
            rack_id=None,
            rebalance_timeout=10_000,
            subscribed_topic_names=(TOPIC,),
            server_assignor=None,
            topic_partitions=(),
        ),
        lambda r: r.error_code,
        ErrorCode.group_authorization_failed,
        resource=PREFIX + "heartbeating",  # a member joins; the other rows want no group
    ),
]

ROWS_BY_API = {row.api: row for row in ROWS}

#: How each variant of a row's ACLs is made, and whether alice is then allowed.
VARIANTS: dict[str, tuple[Callable[[Row], list[AclBinding]], bool]] = {
    "no-acl": (lambda row: [], False),
    "literal": (lambda row: [binding(row.resource_type, row.name, row.operation)], True),
    "prefixed": (
        lambda row: [
            binding(
                row.resource_type,
                # The CLUSTER resource has one valid name, also as a prefix.
                CLUSTER_NAME if row.resource_type == ResourceType.CLUSTER else PREFIX,
                row.operation,
                pattern=CkPattern.PREFIXED,
            )
        ],
        True,
    ),
    "any-principal": (
        lambda row: [binding(row.resource_type, row.name, row.operation, principal="User:*")],
        True,
    ),
    "wildcard-resource": (
        lambda row: [
            binding(
                row.resource_type,
                CLUSTER_NAME if row.resource_type == ResourceType.CLUSTER else "*",
                row.operation,
            )
        ],
        True,
    ),
    "deny-beats-allow": (
        lambda row: [
            binding(row.resource_type, row.name, AclOperation.ALL),
            binding(
                row.resource_type,
                CLUSTER_NAME if row.resource_type == ResourceType.CLUSTER else "*",
                row.operation,
                CkPermission.DENY,
                principal="User:*",
            ),
        ],
        False,
    ),
    "another-users-acl": (
        lambda row: [binding(row.resource_type, row.name, row.operation, principal="User:bob")],
        False,
    ),
}


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("row", ROWS, ids=[row.api for row in ROWS])
def test_api_authorization(
    broker: EmbeddedBroker, admin: AdminClient, row: Row, variant: str
) -> None:
    make, allowed = VARIANTS[variant]
    allowed = allowed or (row.alternative and variant == "deny-beats-allow")
    clear(admin)
    create(admin, *make(row))
    client = login(broker, "alice")
    try:
        error = row.error_of(client.call(row.request(row.name)))
    finally:
        client.close()
        clear(admin)
    assert error == (row.allowed if allowed else row.refused)


def test_super_user_bypasses_every_acl(broker: EmbeddedBroker, admin: AdminClient) -> None:
    create(admin, binding(ResourceType.TOPIC, "*", AclOperation.ALL, CkPermission.DENY, "User:*"))
    try:
        client = login(broker, "admin")
        try:
            fetched = client.call(_fetch(TOPIC))
        finally:
            client.close()
        assert fetched.responses[0].partitions[0].error_code == ErrorCode.none
    finally:
        clear(admin)


def _metadata_names(client: WireClient, names: list[str] | None) -> dict[str, int]:
    topics = (
        None
        if names is None
        else tuple(build(MD, 12, "MetadataRequestTopic", name=n, topic_id=None) for n in names)
    )
    response = client.call(
        build(
            MD,
            12,
            "MetadataRequest",
            topics=topics,
            allow_auto_topic_creation=True,
            include_topic_authorized_operations=True,
        )
    )
    return {t.name: t.error_code for t in response.topics}


def test_metadata_hides_topics_the_caller_may_not_describe(
    broker: EmbeddedBroker, admin: AdminClient
) -> None:
    hidden = f"hidden-{uuid.uuid4().hex[:6]}"
    for future in admin.create_topics([NewTopic(hidden, 1, 1)]).values():
        future.result(30)
    create(admin, binding(ResourceType.TOPIC, TOPIC, AclOperation.READ))
    client = login(broker, "alice")
    try:
        listed = _metadata_names(client, None)
        assert TOPIC in listed and hidden not in listed
        named = _metadata_names(client, [hidden, TOPIC])
        assert named == {hidden: ErrorCode.topic_authorization_failed, TOPIC: ErrorCode.none}
        # Auto-creation needs CREATE: without it the name is refused and nothing is created.
        fresh = f"auto-{uuid.uuid4().hex[:6]}"
        create(admin, binding(ResourceType.TOPIC, fresh, AclOperation.DESCRIBE))
        assert _metadata_names(client, [fresh]) == {fresh: ErrorCode.topic_authorization_failed}
        assert fresh not in admin.list_topics(timeout=30).topics
        create(admin, binding(ResourceType.TOPIC, fresh, AclOperation.CREATE))
        assert _metadata_names(client, [fresh]) == {fresh: ErrorCode.none}
    finally:
        client.close()
        clear(admin)


def test_topic_authorized_operations_follow_the_acls(
    broker: EmbeddedBroker, admin: AdminClient
) -> None:
    create(admin, binding(ResourceType.TOPIC, TOPIC, AclOperation.WRITE))
    client = login(broker, "alice")
    try:
        response = client.call(
            build(
                MD,
                12,
                "MetadataRequest",
                topics=(build(MD, 12, "MetadataRequestTopic", name=TOPIC, topic_id=None),),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=True,
            )
        )
    finally:
        client.close()
        clear(admin)
    # WRITE, and DESCRIBE which WRITE implies.
    expected = (1 << AclOperation.WRITE) | (1 << AclOperation.DESCRIBE)
    assert response.topics[0].topic_authorized_operations == expected


def test_confluent_admin_creates_describes_and_deletes_acls(admin: AdminClient) -> None:
    bindings = [
        binding(ResourceType.TOPIC, "orders", AclOperation.READ),
        binding(ResourceType.GROUP, "app-", AclOperation.READ, pattern=CkPattern.PREFIXED),
        binding(ResourceType.TRANSACTIONAL_ID, "tx", AclOperation.WRITE, CkPermission.DENY),
    ]
    create(admin, *bindings)
    try:
        every = AclBindingFilter(
            CkResource.ANY, None, CkPattern.ANY, None, None, CkOperation.ANY, CkPermission.ANY
        )
        assert set(admin.describe_acls(every).result(30)) == set(bindings)
        groups = AclBindingFilter(
            CkResource.GROUP,
            "app-orders",
            CkPattern.MATCH,
            None,
            None,
            CkOperation.ANY,
            CkPermission.ANY,
        )
        assert admin.describe_acls(groups).result(30) == [bindings[1]]
        topics = AclBindingFilter(
            CkResource.TOPIC, None, CkPattern.ANY, None, None, CkOperation.ANY, CkPermission.ANY
        )
        (deleted,) = admin.delete_acls([topics]).values()
        assert deleted.result(30) == [bindings[0]]
        assert set(admin.describe_acls(every).result(30)) == set(bindings[1:])
    finally:
        clear(admin)


def test_creating_acls_needs_alter_on_the_cluster(broker: EmbeddedBroker) -> None:
    alice = AdminClient(client_config(broker, "alice"))
    futures = alice.create_acls([binding(ResourceType.TOPIC, TOPIC, AclOperation.ALL)])
    (future,) = futures.values()
    with pytest.raises(KafkaException) as failed:
        future.result(30)
    assert failed.value.args[0].code() == ErrorCode.cluster_authorization_failed


def test_invalid_bindings_are_refused_one_by_one(
    broker: EmbeddedBroker, admin: AdminClient
) -> None:
    client = login(broker, "admin")
    creation = ApiKey.CREATE_ACLS

    def acl_creation(resource_type: int, name: str, principal: str) -> Any:
        return build(
            creation,
            3,
            "AclCreation",
            resource_type=resource_type,
            resource_name=name,
            resource_pattern_type=3,
            principal=principal,
            host="*",
            operation=AclOperation.READ,
            permission_type=3,
        )

    try:
        response = client.call(
            build(
                creation,
                3,
                "CreateAclsRequest",
                creations=(
                    acl_creation(ResourceType.CLUSTER, "not-the-cluster", "User:alice"),
                    acl_creation(ResourceType.TOPIC, "ok-topic", "User:alice"),
                    acl_creation(ResourceType.TOPIC, "", "User:alice"),
                    acl_creation(ResourceType.TOPIC, "t", "alice"),
                ),
            )
        )
    finally:
        client.close()
    try:
        assert [r.error_code for r in response.results] == [
            ErrorCode.invalid_request,
            ErrorCode.none,
            ErrorCode.invalid_request,
            ErrorCode.invalid_request,
        ]
        assert "kafka-cluster" in response.results[0].error_message
        every = AclBindingFilter(
            CkResource.ANY, None, CkPattern.ANY, None, None, CkOperation.ANY, CkPermission.ANY
        )
        assert [b.name for b in admin.describe_acls(every).result(30)] == ["ok-topic"]
    finally:
        clear(admin)


def test_a_consumer_group_with_acls_consumes(broker: EmbeddedBroker, admin: AdminClient) -> None:
    """The ACLs of kafka-acls.sh's --consumer: READ and DESCRIBE on the topic, READ on the group."""
    group = f"{PREFIX}consumers-{uuid.uuid4().hex[:6]}"
    create(
        admin,
        binding(ResourceType.TOPIC, TOPIC, AclOperation.READ),
        binding(ResourceType.TOPIC, TOPIC, AclOperation.DESCRIBE),
        binding(ResourceType.GROUP, group, AclOperation.READ),
    )
    consumer = Consumer(
        {**client_config(broker, "alice"), "group.id": group, "auto.offset.reset": "earliest"}
    )
    try:
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + 30
        message = None
        while message is None and time.monotonic() < deadline:
            message = consumer.poll(1)
        assert message is not None and message.error() is None
        consumer.commit(message=message, asynchronous=False)
    finally:
        consumer.close()
        clear(admin)


def test_acls_survive_a_restart(tmp_path) -> None:
    config = broker_config()
    kept = binding(ResourceType.TOPIC, "kept", AclOperation.READ)
    with EmbeddedBroker(config=config, data_dir=tmp_path) as first:
        create(AdminClient(client_config(first, "admin")), kept)
    with EmbeddedBroker(config=config, data_dir=tmp_path) as second:
        every = AclBindingFilter(
            CkResource.ANY, None, CkPattern.ANY, None, None, CkOperation.ANY, CkPermission.ANY
        )
        admin = AdminClient(client_config(second, "admin"))  # kept alive until answered
        assert admin.describe_acls(every).result(30) == [kept]


def acls_cli(broker: EmbeddedBroker, properties, *args: str) -> subprocess.CompletedProcess[str]:
    """``odradek acls ...`` as an operator runs it, logged in as admin by --command-config."""
    action, *rest = args
    return subprocess.run(
        [sys.executable, "-m", "odradek", "acls", action, "--bootstrap-server"]
        + [broker.bootstrap_servers, "--command-config", str(properties), *rest],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_acls_cli_adds_lists_and_removes(
    broker: EmbeddedBroker, admin: AdminClient, tmp_path
) -> None:
    properties = tmp_path / "admin.properties"
    properties.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.username=admin\nsasl.password=admin-secret\n"
    )
    added = acls_cli(
        broker,
        properties,
        "add",
        "--allow-principal",
        "User:alice",
        "--consumer",
        "--topic",
        "cli-",
        "--group",
        "cli-",
        "--resource-pattern-type",
        "prefixed",
    )
    try:
        assert added.returncode == 0, added.stderr
        listed = acls_cli(
            broker, properties, "list", "--topic", "cli-orders", "--resource-pattern-type", "match"
        )
        assert listed.returncode == 0, listed.stderr
        assert (
            "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=cli-, "
            "patternType=PREFIXED)`:" in listed.stdout
        )
        assert (
            "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)" in listed.stdout
        )
        assert "operation=DESCRIBE" in listed.stdout and "GROUP" not in listed.stdout
        every = AclBindingFilter(
            CkResource.ANY, None, CkPattern.ANY, None, None, CkOperation.ANY, CkPermission.ANY
        )
        assert len(admin.describe_acls(every).result(30)) == 3  # topic READ, DESCRIBE; group READ
        removed = acls_cli(
            broker,
            properties,
            "remove",
            "--force",
            "--topic",
            "cli-",
            "--resource-pattern-type",
            "prefixed",
        )
        assert removed.returncode == 0, removed.stderr
        assert "Removed 2 ACL(s)" in removed.stdout
        assert [b.restype for b in admin.describe_acls(every).result(30)] == [CkResource.GROUP]
        wrong = acls_cli(
            broker,
            properties,
            "add",
            "--allow-principal",
            "User:alice",
            "--operation",
            "Write",
            "--group",
            "g",
        )
        assert wrong.returncode == 1
        assert "ResourceType GROUP only supports operations" in wrong.stderr
    finally:
        clear(admin)


def test_an_unknown_authorizer_class_stops_start_up() -> None:
    with pytest.raises(ConfigError, match="authorizer.class.name"):
        BrokerConfig({"authorizer.class.name": "com.example.MyAuthorizer"})
    for served in (
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "kafka.security.authorizer.AclAuthorizer",
    ):
        assert BrokerConfig({"authorizer.class.name": served})["authorizer.class.name"] == served


def test_without_an_authorizer_acl_apis_answer_security_disabled() -> None:
    with EmbeddedBroker() as plain:
        # Read raw: librdkafka's describe_acls returns an empty list for this error.
        client = WireClient(plain.bootstrap_servers)
        try:
            described = client.call(ROWS_BY_API["DescribeAcls"].request(CLUSTER_NAME))
        finally:
            client.close()
        assert described.error_code == ErrorCode.security_disabled
        admin = AdminClient({"bootstrap.servers": plain.bootstrap_servers})
        (created,) = admin.create_acls(
            [binding(ResourceType.TOPIC, "t", AclOperation.READ)]
        ).values()
        with pytest.raises(KafkaException) as refused:
            created.result(30)
        assert refused.value.args[0].code() == ErrorCode.security_disabled


def _list_groups(client: WireClient) -> set[str]:
    response = client.call(build(ApiKey.LIST_GROUPS, 5, "ListGroupsRequest"))
    return {g.group_id for g in response.groups}


def test_list_groups_shows_what_the_caller_may_describe(
    broker: EmbeddedBroker, admin: AdminClient
) -> None:
    """acl-warmup is the fixture's group: listed with DESCRIBE on it, or on the cluster."""
    client = login(broker, "alice")
    try:
        assert "acl-warmup" not in _list_groups(client)
        create(
            admin,
            binding(
                ResourceType.GROUP, "acl-warm", AclOperation.DESCRIBE, pattern=CkPattern.PREFIXED
            ),
        )
        assert "acl-warmup" in _list_groups(client)
        clear(admin)
        create(admin, binding(ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.DESCRIBE))
        assert "acl-warmup" in _list_groups(client)
    finally:
        client.close()
        clear(admin)


def test_list_transactions_shows_what_the_caller_may_describe(
    broker: EmbeddedBroker, admin: AdminClient
) -> None:
    """acl-warmup is the fixture's transactional id."""
    request = build(ApiKey.LIST_TRANSACTIONS, 1, "ListTransactionsRequest")
    client = login(broker, "alice")
    try:
        listed = {t.transactional_id for t in client.call(request).transaction_states}
        assert "acl-warmup" not in listed
        create(admin, binding(ResourceType.TRANSACTIONAL_ID, "acl-warmup", AclOperation.WRITE))
        listed = {t.transactional_id for t in client.call(request).transaction_states}
        assert "acl-warmup" in listed  # WRITE implies DESCRIBE
    finally:
        client.close()
        clear(admin)


def test_cluster_authorized_operations_need_describe_on_the_cluster(
    broker: EmbeddedBroker, admin: AdminClient
) -> None:
    request = build(
        ApiKey.DESCRIBE_CLUSTER,
        1,
        "DescribeClusterRequest",
        include_cluster_authorized_operations=True,
    )
    client = login(broker, "alice")
    try:
        create(admin, binding(ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.ALTER_CONFIGS))
        assert client.call(request).cluster_authorized_operations == 0  # no DESCRIBE
        create(admin, binding(ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.DESCRIBE))
        expected = sum(
            1 << op
            for op in (
                AclOperation.ALTER_CONFIGS,
                AclOperation.DESCRIBE_CONFIGS,
                AclOperation.DESCRIBE,
            )
        )
        assert client.call(request).cluster_authorized_operations == expected
    finally:
        client.close()
        clear(admin)


def test_an_idempotent_producer_may_start_with_write_on_some_topic(
    broker: EmbeddedBroker, admin: AdminClient
) -> None:
    """KIP-679: without IDEMPOTENT_WRITE on the cluster, WRITE on any topic admits it."""
    request = ROWS_BY_API["InitProducerId(idempotent)"].request(CLUSTER_NAME)
    create(
        admin, binding(ResourceType.TOPIC, "some-", AclOperation.WRITE, pattern=CkPattern.PREFIXED)
    )
    client = login(broker, "alice")
    try:
        assert client.call(request).error_code == ErrorCode.none
    finally:
        client.close()
        clear(admin)


def test_transactional_records_need_write_on_the_transactional_id(
    broker: EmbeddedBroker, admin: AdminClient
) -> None:
    builder = DefaultRecordBatchBuilder(2, 0, True, 1000, 0, 0, 2**31 - 1)
    builder.append(0, timestamp=1000, key=None, value=b"in a transaction", headers=[])
    request = build(
        P,
        9,
        "ProduceRequest",
        transactional_id=TXN,
        acks=1,
        timeout=10_000,
        topic_data=(
            build(
                P,
                9,
                "TopicProduceData",
                name=TOPIC,
                partition_data=(
                    build(P, 9, "PartitionProduceData", index=0, records=bytes(builder.build())),
                ),
            ),
        ),
    )
    create(admin, binding(ResourceType.TOPIC, TOPIC, AclOperation.WRITE))
    client = login(broker, "alice")
    try:
        response = client.call(request)
    finally:
        client.close()
        clear(admin)
    error = response.responses[0].partition_responses[0].error_code
    assert error == ErrorCode.transactional_id_authorization_failed


def test_two_phase_commit_needs_its_own_operation_besides_write(
    broker: EmbeddedBroker, admin: AdminClient
) -> None:
    """KIP-939: InitProducerId with Enable2Pc needs TWO_PHASE_COMMIT on the transactional id as
    well as WRITE. confluent-kafka has no name for the operation (code 15): its ACL goes over
    the wire."""
    name = TXN + "-2pc"
    acl = {
        "resource_type": ResourceType.TRANSACTIONAL_ID,
        "resource_name": name,
        "principal": "User:alice",
        "host": "*",
        "operation": AclOperation.TWO_PHASE_COMMIT,
        "permission_type": 3,  # ALLOW
    }
    A, D = ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS
    clear(admin)
    create(admin, binding(ResourceType.TRANSACTIONAL_ID, name, AclOperation.WRITE))
    superuser, alice = login(broker, "admin"), login(broker, "alice")

    def init(enable2_pc: bool) -> int:
        request = build(
            ApiKey.INIT_PRODUCER_ID,
            6,
            "InitProducerIdRequest",
            transactional_id=name,
            transaction_timeout=60_000,
            enable2_pc=enable2_pc,
        )
        return alice.call(request).error_code

    try:
        assert init(False) == ErrorCode.none
        assert init(True) == ErrorCode.transactional_id_authorization_failed
        created = superuser.call(
            build(A, 3, "CreateAclsRequest", creations=(build(A, 3, "AclCreation", **acl),))
        )
        assert [r.error_code for r in created.results] == [ErrorCode.none]
        assert init(True) == ErrorCode.none
    finally:
        filters = {
            "resource_type_filter": acl["resource_type"],
            "resource_name_filter": name,
            "principal_filter": None,
            "host_filter": None,
            "operation": acl["operation"],
            "permission_type": acl["permission_type"],
        }
        superuser.call(
            build(D, 3, "DeleteAclsRequest", filters=(build(D, 3, "DeleteAclsFilter", **filters),))
        )
        superuser.close()
        alice.close()
        clear(admin)
