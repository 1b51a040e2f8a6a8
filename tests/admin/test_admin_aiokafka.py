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
        await admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, name, configs={"retention.ms": "45000"})])
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
