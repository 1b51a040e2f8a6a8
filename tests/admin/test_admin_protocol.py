"""Admin APIs at the protocol level (kio requests over a socket) and their persistence across restarts."""

from __future__ import annotations

import datetime
import uuid

import pytest
from kio.schema.create_topics.v7 import request as create_v7
from kio.schema.delete_topics.v6 import request as delete_v6
from kio.schema.describe_configs.v4 import request as describe_configs_v4
from kio.schema.init_producer_id.v5.request import InitProducerIdRequest
from kio.schema.offset_for_leader_epoch.v4 import request as ofle_v4
from kio.static.primitive import i32Timedelta
from kio_client import KioClient, transaction_coordinator
from kio_client import incremental_alter as alter

from odradek import EmbeddedBroker
from odradek.protocol.errors import ErrorCode

TIMEOUT = i32Timedelta.parse(datetime.timedelta(seconds=30))
TOPIC, BROKER = 2, 4
DYNAMIC_TOPIC_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 1, 3


def unique() -> str:
    return f"proto-{uuid.uuid4().hex[:10]}"


def create_topic(
    client: KioClient,
    name: str,
    partitions: int = 1,
    configs: dict[str, str] | None = None,
    validate_only: bool = False,
):
    topic = create_v7.CreatableTopic(
        name=name,
        num_partitions=partitions,
        replication_factor=1,
        assignments=(),
        configs=tuple(
            create_v7.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()
        ),
    )
    (result,) = client.send(
        create_v7.CreateTopicsRequest(topics=(topic,), timeout=TIMEOUT, validate_only=validate_only)
    ).topics
    return result


def init_producer_id(client: KioClient, transactional_id: str | None = None):
    return client.send(
        InitProducerIdRequest(transactional_id=transactional_id, transaction_timeout=TIMEOUT)
    )


def describe_topic(client: KioClient, name: str, keys: tuple[str, ...] | None = None):
    request = describe_configs_v4.DescribeConfigsRequest(
        resources=(
            describe_configs_v4.DescribeConfigsResource(
                resource_type=TOPIC, resource_name=name, configuration_keys=keys
            ),
        ),
        include_synonyms=True,
        include_documentation=True,
    )
    (result,) = client.send(request).results
    return result


def test_create_topics_v7_returns_id_and_configs(odradek_broker) -> None:
    with KioClient(odradek_broker.bootstrap_servers) as client:
        name = unique()
        result = create_topic(client, name, partitions=2, configs={"retention.ms": "1000"})
        assert result.error_code == ErrorCode.none
        assert result.topic_id is not None and result.topic_id.int != 0
        assert (result.num_partitions, result.replication_factor) == (2, 1)
        configs = {c.name: c for c in result.configs}
        assert configs["retention.ms"].value == "1000"
        assert configs["retention.ms"].config_source == DYNAMIC_TOPIC_CONFIG
        dry = create_topic(client, unique(), validate_only=True)
        assert dry.error_code == ErrorCode.none and dry.num_partitions == 1


def test_describe_configs_synonyms_and_key_filter(odradek_broker) -> None:
    with KioClient(odradek_broker.bootstrap_servers) as client:
        name = unique()
        create_topic(client, name, configs={"retention.ms": "1000"})
        result = describe_topic(client, name, keys=("retention.ms",))
        assert result.error_code == ErrorCode.none
        (entry,) = result.configs
        assert entry.name == "retention.ms" and entry.documentation
        assert [s.name for s in entry.synonyms][:2] == ["retention.ms", "log.retention.hours"]
        missing = describe_topic(client, unique())
        assert missing.error_code == ErrorCode.unknown_topic_or_partition


def test_delete_topics_by_id(odradek_broker) -> None:
    with KioClient(odradek_broker.bootstrap_servers) as client:
        name = unique()
        topic_id = create_topic(client, name).topic_id
        request = delete_v6.DeleteTopicsRequest(
            topics=(delete_v6.DeleteTopicState(name=None, topic_id=topic_id),), timeout=TIMEOUT
        )
        (result,) = client.send(request).responses
        assert (result.error_code, result.name, result.topic_id) == (ErrorCode.none, name, topic_id)
        (again,) = client.send(request).responses
        assert again.error_code == ErrorCode.unknown_topic_id


def test_offset_for_leader_epoch(odradek_broker) -> None:
    with KioClient(odradek_broker.bootstrap_servers) as client:
        name = unique()
        create_topic(client, name)
        request = ofle_v4.OffsetForLeaderEpochRequest(
            topics=(
                ofle_v4.OffsetForLeaderTopic(
                    topic=name,
                    partitions=(
                        ofle_v4.OffsetForLeaderPartition(
                            partition=0, current_leader_epoch=0, leader_epoch=0
                        ),
                        ofle_v4.OffsetForLeaderPartition(
                            partition=7, current_leader_epoch=0, leader_epoch=0
                        ),
                    ),
                ),
            )
        )
        (topic,) = client.send(request).topics
        ok, unknown = topic.partitions
        assert (ok.error_code, ok.leader_epoch, ok.end_offset) == (ErrorCode.none, 0, 0)
        assert unknown.error_code == ErrorCode.unknown_topic_or_partition


def test_transactional_id_epoch_bumps(odradek_broker) -> None:
    transaction_coordinator(odradek_broker.bootstrap_servers)
    with KioClient(odradek_broker.bootstrap_servers) as client:
        tid = unique()
        first = init_producer_id(client, tid)
        second = init_producer_id(client, tid)
        assert first.error_code == second.error_code == ErrorCode.none
        assert (second.producer_id, second.producer_epoch) == (
            first.producer_id,
            first.producer_epoch + 1,
        )


@pytest.fixture
def own_broker(tmp_path):
    broker = EmbeddedBroker(data_dir=tmp_path / "data")
    broker.start()
    yield broker
    broker.close()


def test_topics_configs_and_producer_ids_survive_restart(own_broker: EmbeddedBroker) -> None:
    name = unique()
    with KioClient(own_broker.bootstrap_servers) as client:
        topic_id = create_topic(
            client, name, partitions=3, configs={"cleanup.policy": "compact"}
        ).topic_id
        assert alter(client, TOPIC, name, [("retention.ms", 0, "777")]).error_code == ErrorCode.none
        assert (
            alter(client, BROKER, "", [("log.retention.ms", 0, "888")]).error_code == ErrorCode.none
        )
        ids_before = {init_producer_id(client).producer_id for _ in range(5)}
    own_broker.restart()
    with KioClient(own_broker.bootstrap_servers) as client:
        result = describe_topic(client, name)
        configs = {c.name: c for c in result.configs}
        assert configs["retention.ms"].value == "777"
        assert configs["cleanup.policy"].value == "compact"
        assert configs["delete.retention.ms"].value is not None
        other = unique()
        create_topic(client, other)
        inherited = {c.name: c for c in describe_topic(client, other).configs}["retention.ms"]
        assert (inherited.value, inherited.config_source) == ("888", DYNAMIC_DEFAULT_BROKER_CONFIG)
        ids_after = {init_producer_id(client).producer_id for _ in range(5)}
        assert ids_before.isdisjoint(ids_after)
        assert min(ids_after) > max(ids_before)
        request = delete_v6.DeleteTopicsRequest(
            topics=(delete_v6.DeleteTopicState(name=None, topic_id=topic_id),), timeout=TIMEOUT
        )
        (deleted,) = client.send(request).responses
        assert deleted.error_code == ErrorCode.none


def test_manual_assignment_and_bad_broker(odradek_broker) -> None:
    with KioClient(odradek_broker.bootstrap_servers) as client:

        def create_assigned(name: str, brokers: list[list[int]]):
            topic = create_v7.CreatableTopic(
                name=name,
                num_partitions=-1,
                replication_factor=-1,
                configs=(),
                assignments=tuple(
                    create_v7.CreatableReplicaAssignment(partition_index=i, broker_ids=tuple(b))
                    for i, b in enumerate(brokers)
                ),
            )
            (result,) = client.send(
                create_v7.CreateTopicsRequest(topics=(topic,), timeout=TIMEOUT)
            ).topics
            return result

        node = client.send(
            create_v7.CreateTopicsRequest(topics=(), timeout=TIMEOUT)
        )  # empty request is fine
        assert node.topics == ()
        ok = create_assigned(unique(), [[1], [1]])
        assert (ok.error_code, ok.num_partitions, ok.replication_factor) == (ErrorCode.none, 2, 1)
        bad = create_assigned(unique(), [[99]])
        assert bad.error_code == ErrorCode.invalid_replica_assignment


def test_stale_transactional_producer_is_fenced(odradek_broker) -> None:
    transaction_coordinator(odradek_broker.bootstrap_servers)
    with KioClient(odradek_broker.bootstrap_servers) as client:
        tid = unique()
        first = init_producer_id(client, tid)
        init_producer_id(client, tid)
        stale = client.send(
            InitProducerIdRequest(
                transactional_id=tid,
                transaction_timeout=TIMEOUT,
                producer_id=first.producer_id,
                producer_epoch=first.producer_epoch,
            )
        )
        assert stale.error_code == ErrorCode.producer_fenced


def test_broker_config_alter_rules(odradek_broker) -> None:
    with KioClient(odradek_broker.bootstrap_servers) as client:
        static_only = alter(client, BROKER, "", [("listeners", 0, "PLAINTEXT://127.0.0.1:1")])
        assert static_only.error_code == ErrorCode.invalid_request
        bad_value = alter(client, BROKER, "", [("log.retention.ms", 0, "never")])
        assert bad_value.error_code == ErrorCode.invalid_config
        wrong_broker = alter(client, BROKER, "12345", [("log.retention.ms", 0, "1000")])
        assert wrong_broker.error_code == ErrorCode.invalid_request
        name = unique()
        create_topic(client, name)
        append_int = alter(client, TOPIC, name, [("retention.ms", 2, "5")])
        assert append_int.error_code == ErrorCode.invalid_config


def test_topic_deletion_disabled(tmp_path) -> None:
    with EmbeddedBroker(config={"delete.topic.enable": "false"}, data_dir=tmp_path / "d") as broker:
        with KioClient(broker.bootstrap_servers) as client:
            name = unique()
            create_topic(client, name)
            request = delete_v6.DeleteTopicsRequest(
                topics=(delete_v6.DeleteTopicState(name=name, topic_id=None),), timeout=TIMEOUT
            )
            (result,) = client.send(request).responses
            assert result.error_code == ErrorCode.topic_deletion_disabled
