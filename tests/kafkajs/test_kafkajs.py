"""KafkaJS 2.2 (its own protocol versions: Produce v7, Fetch v11, JoinGroup v5, ...) against a
real broker process: records with headers, keys, nulls and gzip; idempotent and transactional
producers; consumer groups sharing partitions and rebalancing; the admin calls its users
script. One broker for the module; each test a topic and group of its own."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from kafkajs.runner import needs_kafkajs, run_kafkajs
from odradek import EmbeddedBroker

pytestmark = needs_kafkajs

#: Not the default 1, so that the ids KafkaJS reports are seen to be the broker's.
NODE_ID = 7


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    # No initial rebalance delay (Kafka's test setting), so a group's first join is prompt.
    config = {"group.initial.rebalance.delay.ms": "0", "node.id": str(NODE_ID)}
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("kafkajs"), config=config) as b:
        yield b


def names(prefix: str) -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    return f"{prefix}-{suffix}", f"{prefix}-group-{suffix}"


def test_records_round_trip_through_a_group(broker: EmbeddedBroker) -> None:
    topic, group = names("kjs-roundtrip")
    seen = run_kafkajs("roundtrip", broker.bootstrap_servers, topic, group)
    assert seen["created"] and seen["listed"] and not seen["afterDelete"]
    records = seen["records"]
    assert sorted(r["value"] for r in records if r["value"] is not None) == sorted(
        [f"value-{i}" for i in range(30)] + [f"gzip-{i}" for i in range(30)] + [""]
    )
    assert [r["key"] for r in records if r["value"] is None] == [None]
    assert {r["value"]: r["headers"] for r in records}["value-7"] == {"index": "7"}
    by_partition: dict[int, list[dict]] = {}
    for record in records:
        by_partition.setdefault(record["partition"], []).append(record)
    keys_at: dict[str, set[int]] = {}
    for partition, rows in by_partition.items():
        assert [r["offset"] for r in rows] == list(range(len(rows)))  # in order, none missing
        for r in rows:
            keys_at.setdefault(r["key"], set()).add(partition)
    assert all(len(keys_at[f"key-{k}"]) == 1 for k in range(5))  # a key stays on one partition
    high = {w["partition"]: w["high"] for w in seen["highWatermarks"]}
    assert high == {p: len(rows) for p, rows in by_partition.items()} | {
        p: 0 for p in range(3) if p not in by_partition
    }
    assert {c["partition"]: c["offset"] for c in seen["committed"]} == high
    assert seen["groupState"] == "Empty"
    assert seen["partitionLeaders"] == [NODE_ID] * 3


def test_transactions_commit_abort_and_offsets(broker: EmbeddedBroker) -> None:
    topic, group = names("kjs-txn")
    seen = run_kafkajs("transactions", broker.bootstrap_servers, topic, group)
    assert seen["values"] == ["committed-0", "committed-1", "committed-2"]  # read_committed
    assert seen["groupOffsets"] == [{"partition": 0, "offset": 7}, {"partition": 1, "offset": -1}]


def test_a_group_shares_partitions_and_rebalances(broker: EmbeddedBroker) -> None:
    topic, group = names("kjs-group")
    seen = run_kafkajs("groups", broker.bootstrap_servers, topic, group)
    everything = [0, 1, 2, 3]
    first_alone, first_shared, first_after = seen["first"]
    (second,) = seen["second"]
    assert first_alone == everything and first_after == everything
    assert sorted(first_shared + second) == everything and first_shared and second
    assert seen["membersWhileBoth"] == 2 and seen["listed"]
    assert seen["setOffsets"] == [
        {"partition": p, "offset": 3 if p == 1 else -1} for p in everything
    ]
    assert seen["deleted"] == [{"groupId": group, "errorCode": 0}]
    assert not seen["afterDelete"]


def test_admin_calls(broker: EmbeddedBroker) -> None:
    topic, group = names("kjs-admin")
    seen = run_kafkajs("administration", broker.bootstrap_servers, topic, group)
    assert seen["createdWith"] == {"retention.ms": "3600000", "cleanup.policy": "delete"}
    # AlterConfigs (not the incremental one) replaces the topic's whole set, as in Kafka:
    # retention.ms, not named, is back to the broker's default.
    assert seen["altered"] == {"retention.ms": "604800000", "cleanup.policy": "compact"}
    assert seen["partitions"] == 3
    assert seen["partition0"] == {"low": 4, "high": 10}
    assert seen["brokers"] == 1 and seen["controller"] == NODE_ID
