"""Every advertised version of the admin APIs answers a real request without error.

Clients pick the highest version both sides know; older clients pick older ones.
Each version has its own kio classes, so each one is exercised here.
"""

from __future__ import annotations

import datetime
import uuid

import pytest
from kio.index import load_payload_module
from kio.static.constants import EntityType
from kio.static.primitive import i32Timedelta
from kio_client import KioClient

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.schemas import build
from odradek.server.apis import API_TABLE

TIMEOUT = i32Timedelta.parse(datetime.timedelta(seconds=30))


def _module(api_key: int, version: int):
    return load_payload_module(api_key, version, EntityType.request)


def _versions(api_key: int) -> list[int]:
    spec = API_TABLE[api_key]
    return list(range(spec.min_version, spec.max_version + 1))


@pytest.fixture(scope="module")
def client(odradek_broker):
    with KioClient(odradek_broker.bootstrap_servers) as c:
        yield c


def _create(client: KioClient, version: int, name: str, partitions: int = 1):
    m = _module(ApiKey.CREATE_TOPICS, version)
    topic = build(
        m.CreatableTopic,
        name=name,
        num_partitions=partitions,
        replication_factor=1,
        assignments=(),
        configs=(build(m.CreatableTopicConfig, name="retention.ms", value="1000"),),
    )
    return client.send(
        build(m.CreateTopicsRequest, topics=(topic,), timeout=TIMEOUT, validate_only=False)
    )


@pytest.mark.parametrize("version", _versions(ApiKey.CREATE_TOPICS))
def test_create_and_delete_topics_every_version(client: KioClient, version: int) -> None:
    name = f"v{version}-{uuid.uuid4().hex[:8]}"
    (created,) = _create(client, version, name).topics
    assert created.error_code == ErrorCode.none
    for delete_version in _versions(ApiKey.DELETE_TOPICS):
        m = _module(ApiKey.DELETE_TOPICS, delete_version)
        target = f"{name}-d{delete_version}"
        _create(client, version, target)
        if hasattr(m, "DeleteTopicState"):
            request = m.DeleteTopicsRequest(
                topics=(m.DeleteTopicState(name=target, topic_id=None),), timeout=TIMEOUT
            )
        else:
            request = m.DeleteTopicsRequest(topic_names=(target,), timeout=TIMEOUT)
        (deleted,) = client.send(request).responses
        assert deleted.error_code == ErrorCode.none, delete_version


@pytest.mark.parametrize("version", _versions(ApiKey.DESCRIBE_CONFIGS))
def test_describe_configs_every_version(client: KioClient, version: int) -> None:
    name = f"dc{version}-{uuid.uuid4().hex[:8]}"
    _create(client, 7, name)
    m = _module(ApiKey.DESCRIBE_CONFIGS, version)
    resources = (
        build(
            m.DescribeConfigsResource, resource_type=2, resource_name=name, configuration_keys=None
        ),
        build(
            m.DescribeConfigsResource, resource_type=4, resource_name="1", configuration_keys=None
        ),
    )
    topic, broker = client.send(
        build(
            m.DescribeConfigsRequest,
            resources=resources,
            include_synonyms=True,
            include_documentation=True,
        )
    ).results
    assert topic.error_code == broker.error_code == ErrorCode.none
    assert {c.name: c.value for c in topic.configs}["retention.ms"] == "1000"


@pytest.mark.parametrize("version", _versions(ApiKey.ALTER_CONFIGS))
def test_alter_configs_every_version(client: KioClient, version: int) -> None:
    name = f"ac{version}-{uuid.uuid4().hex[:8]}"
    _create(client, 7, name)
    m = _module(ApiKey.ALTER_CONFIGS, version)
    resource = m.AlterConfigsResource(
        resource_type=2,
        resource_name=name,
        configs=(m.AlterableConfig(name="retention.ms", value="2000"),),
    )
    (response,) = client.send(
        m.AlterConfigsRequest(resources=(resource,), validate_only=False)
    ).responses
    assert response.error_code == ErrorCode.none


@pytest.mark.parametrize("version", _versions(ApiKey.INCREMENTAL_ALTER_CONFIGS))
def test_incremental_alter_configs_every_version(client: KioClient, version: int) -> None:
    name = f"iac{version}-{uuid.uuid4().hex[:8]}"
    _create(client, 7, name)
    m = _module(ApiKey.INCREMENTAL_ALTER_CONFIGS, version)
    resource = m.AlterConfigsResource(
        resource_type=2,
        resource_name=name,
        configs=(m.AlterableConfig(name="retention.ms", config_operation=0, value="3000"),),
    )
    (response,) = client.send(
        m.IncrementalAlterConfigsRequest(resources=(resource,), validate_only=False)
    ).responses
    assert response.error_code == ErrorCode.none


@pytest.mark.parametrize("version", _versions(ApiKey.CREATE_PARTITIONS))
def test_create_partitions_every_version(client: KioClient, version: int) -> None:
    name = f"cp{version}-{uuid.uuid4().hex[:8]}"
    _create(client, 7, name)
    m = _module(ApiKey.CREATE_PARTITIONS, version)
    request = m.CreatePartitionsRequest(
        topics=(m.CreatePartitionsTopic(name=name, count=2, assignments=None),),
        timeout=TIMEOUT,
        validate_only=False,
    )
    (result,) = client.send(request).results
    assert result.error_code == ErrorCode.none


@pytest.mark.parametrize("version", _versions(ApiKey.DELETE_RECORDS))
def test_delete_records_every_version(client: KioClient, version: int) -> None:
    name = f"dr{version}-{uuid.uuid4().hex[:8]}"
    _create(client, 7, name)
    m = _module(ApiKey.DELETE_RECORDS, version)
    request = m.DeleteRecordsRequest(
        topics=(
            m.DeleteRecordsTopic(
                name=name,
                partitions=(
                    m.DeleteRecordsPartition(partition_index=0, offset=-1),
                    m.DeleteRecordsPartition(partition_index=0 + 1, offset=0),
                ),
            ),
        ),
        timeout=TIMEOUT,
    )
    (topic,) = client.send(request).topics
    ok, missing = topic.partitions
    assert (ok.error_code, ok.low_watermark) == (ErrorCode.none, 0)
    assert missing.error_code == ErrorCode.unknown_topic_or_partition


@pytest.mark.parametrize("version", _versions(ApiKey.OFFSET_FOR_LEADER_EPOCH))
def test_offset_for_leader_epoch_every_version(client: KioClient, version: int) -> None:
    name = f"ofle{version}-{uuid.uuid4().hex[:8]}"
    _create(client, 7, name)
    m = _module(ApiKey.OFFSET_FOR_LEADER_EPOCH, version)
    partition = build(
        m.OffsetForLeaderPartition, partition=0, current_leader_epoch=-1, leader_epoch=0
    )
    request = build(
        m.OffsetForLeaderEpochRequest,
        replica_id=-1,
        topics=(m.OffsetForLeaderTopic(topic=name, partitions=(partition,)),),
    )
    (topic,) = client.send(request).topics
    assert topic.partitions[0].error_code == ErrorCode.none


@pytest.mark.parametrize("version", _versions(ApiKey.DESCRIBE_LOG_DIRS))
def test_describe_log_dirs_every_version(client: KioClient, version: int) -> None:
    m = _module(ApiKey.DESCRIBE_LOG_DIRS, version)
    response = client.send(m.DescribeLogDirsRequest(topics=None))
    assert response.results and all(r.error_code == ErrorCode.none for r in response.results)


@pytest.mark.parametrize("version", _versions(ApiKey.DESCRIBE_CLUSTER))
def test_describe_cluster_every_version(client: KioClient, version: int) -> None:
    m = _module(ApiKey.DESCRIBE_CLUSTER, version)
    response = client.send(
        build(
            m.DescribeClusterRequest,
            include_cluster_authorized_operations=False,
            endpoint_type=1,
            include_fenced_brokers=False,
        )
    )
    assert response.error_code == ErrorCode.none and len(response.brokers) == 1


@pytest.mark.parametrize("version", _versions(ApiKey.INIT_PRODUCER_ID))
def test_init_producer_id_every_version(client: KioClient, version: int) -> None:
    m = _module(ApiKey.INIT_PRODUCER_ID, version)
    first = client.send(
        build(m.InitProducerIdRequest, transactional_id=None, transaction_timeout=TIMEOUT)
    )
    second = client.send(
        build(m.InitProducerIdRequest, transactional_id=None, transaction_timeout=TIMEOUT)
    )
    assert first.error_code == second.error_code == ErrorCode.none
    assert second.producer_id > first.producer_id >= 0 and first.producer_epoch == 0
