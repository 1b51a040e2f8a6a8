"""Admin APIs through aiokafka's AIOKafkaAdminClient."""

from __future__ import annotations

import asyncio
import uuid

from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType


def unique() -> str:
    return f"aio-{uuid.uuid4().hex[:10]}"


async def _round_trip(bootstrap: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)
    await admin.start()
    try:
        name = unique()
        await admin.create_topics([NewTopic(name, 2, 1, topic_configs={"retention.ms": "90000"})])
        assert name in await admin.list_topics()
        await admin.create_partitions({name: NewPartitions(total_count=3)})
        (described,) = await admin.describe_topics([name])
        assert len(described["partitions"]) == 3
        await admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, name, configs={"retention.ms": "45000"})]
        )
        (response,) = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)])
        (resource,) = response.resources
        error_code, _message, _type, resource_name, entries = resource[:5]
        assert error_code == 0 and resource_name == name
        values = {entry[0]: entry[1] for entry in entries}
        assert values["retention.ms"] == "45000"
        cluster = await admin.describe_cluster()
        assert len(cluster["brokers"]) == 1
        await admin.delete_topics([name])
        assert name not in await admin.list_topics()
    finally:
        await admin.close()


def test_aiokafka_admin_round_trip(odradek_broker) -> None:
    asyncio.run(asyncio.wait_for(_round_trip(odradek_broker.bootstrap_servers), 60))


async def _idempotent_round_trip(bootstrap: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    name = unique()
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, 1, 1)])
    finally:
        await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
    await producer.start()
    try:
        results = await asyncio.gather(
            *[await producer.send(name, str(i).encode()) for i in range(100)]
        )
    finally:
        await producer.stop()
    assert [r.offset for r in results] == list(range(100))
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tp = TopicPartition(name, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        values: list[int] = []
        while len(values) < 100:
            batch = await consumer.getmany(tp, timeout_ms=5000)
            assert batch, f"only {len(values)} records arrived"
            values.extend(int(m.value) for m in batch[tp])
    finally:
        await consumer.stop()
    assert values == list(range(100))


def test_aiokafka_idempotent_producer(odradek_broker) -> None:
    asyncio.run(asyncio.wait_for(_idempotent_round_trip(odradek_broker.bootstrap_servers), 60))
