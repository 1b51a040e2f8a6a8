"""num.replica.fetchers: partitions spread over fetchers exactly as Kafka spreads them."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from hypothesis import given
from hypothesis import strategies as st

from odradek.metrics.stats import BrokerTopicStats
from odradek.network.client_security import PLAINTEXT
from odradek.replication.fetcher import (
    FetcherSettings,
    ReplicaFetcherManager,
    fetcher_id,
    java_string_hash,
)
from odradek.storage import TopicPartition


def test_java_string_hash_codes() -> None:
    # Values of Java's "...".hashCode().
    assert java_string_hash("") == 0
    assert java_string_hash("foo") == 101574
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(2**31)  # Integer.MIN_VALUE
    # A surrogate pair is two UTF-16 units: 0xD83D * 31 + 0xDE00.
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00


def test_kafka_fetcher_ids() -> None:
    # Utils.abs(31 * hashCode + partition) % n, in Java's int arithmetic.
    assert [fetcher_id(TopicPartition("foo", p), 3) for p in range(4)] == [
        (31 * 101574 + p) % 3 for p in range(4)
    ]
    # 31 * "hello".hashCode() = 3074031982 overflows an int to -1220935314.
    assert fetcher_id(TopicPartition("hello", 1), 7) == abs(-1220935314 + 1) % 7
    # 31 * Integer.MIN_VALUE is Integer.MIN_VALUE again, whose Utils.abs is 0.
    assert fetcher_id(TopicPartition("polygenelubricants", 0), 5) == 0
    assert fetcher_id(TopicPartition("anything", 3), 1) == 0


def _manager(partitions: dict[TopicPartition, int], fetchers: int) -> ReplicaFetcherManager:
    """A manager following ``partitions`` (-> leader id) from leaders that are not registered
    (so each fetcher only backs off; nothing is fetched)."""
    followed = {tp: SimpleNamespace(leader_id=leader) for tp, leader in partitions.items()}
    replica_manager = SimpleNamespace(
        node_id=9, role_listeners=[], followed_partitions=lambda: followed
    )
    return ReplicaFetcherManager(
        replica_manager,  # type: ignore[arg-type]
        SimpleNamespace(brokers=list),  # type: ignore[arg-type]
        "PLAINTEXT",
        FetcherSettings(fetch_backoff_ms=60_000, num_fetchers=fetchers),
        BrokerTopicStats(),
        PLAINTEXT,
    )


def served_by_fetchers(
    partitions: dict[TopicPartition, int], fetchers: int
) -> dict[tuple[int, int], set[TopicPartition]]:
    """(leader, fetcher id) -> the partitions that fetcher serves, once the manager started."""

    async def started() -> dict[tuple[int, int], set[TopicPartition]]:
        manager = _manager(partitions, fetchers)
        manager.start()
        try:
            return {key: set(f.partitions()) for key, f in manager.fetchers().items()}
        finally:
            await manager.shutdown()

    return asyncio.run(started())


@given(
    partitions=st.dictionaries(
        st.builds(TopicPartition, st.sampled_from(["a", "orders", "t-1"]), st.integers(0, 50)),
        st.integers(1, 3),
        min_size=1,
    ),
    fetchers=st.integers(1, 4),
)
def test_each_partition_is_served_by_exactly_one_fetcher_of_its_leader(
    partitions: dict[TopicPartition, int], fetchers: int
) -> None:
    served = served_by_fetchers(partitions, fetchers)
    # Disjoint, covering every followed partition, each on its leader's fetcher of Kafka's id.
    assert sum(len(s) for s in served.values()) == len(partitions)
    assert set().union(*served.values()) == set(partitions)
    for (leader, fid), tps in served.items():
        assert tps, "a fetcher without partitions is not started"
        assert all((partitions[tp], fetcher_id(tp, fetchers)) == (leader, fid) for tp in tps)


def test_two_fetchers_split_one_leaders_partitions() -> None:
    partitions = {TopicPartition("orders", p): 1 for p in range(6)}

    served = served_by_fetchers(partitions, 2)
    assert set(served) == {(1, 0), (1, 1)}
    assert served[(1, 0)].isdisjoint(served[(1, 1)])
