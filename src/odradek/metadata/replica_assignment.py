"""Kafka's replica assignment for new topics and partitions (``AdminUtils.assignReplicasToBrokers``).

Kept exactly as Kafka's so a cluster spreads leaders and followers the way Kafka
users expect:

- without racks: partition p's first replica is broker ``(p + start) % n`` of the
  sorted broker list; followers follow at a shift that grows by one every n
  partitions, so replicas of consecutive partitions do not stack up on the same
  followers;
- with ``broker.rack`` on every broker: the broker list alternates racks
  (rack a's first broker, rack b's first, ..., rack a's second, ...) and each
  partition's followers skip racks (and brokers) that already hold one of its
  replicas while any rack (broker) holds none;
- some brokers with a rack and some without is Kafka's AdminOperationException,
  which reaches the client as UNKNOWN_SERVER_ERROR with Kafka's message.

The start index and shift are random unless fixed (``fixed_start_index``), as in
Kafka; new partitions of an existing topic continue from ``start_partition``.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator

from odradek.metadata.image import BrokerImage
from odradek.metadata.store import InvalidPartitions, InvalidReplicationFactor
from odradek.protocol.errors import ErrorCode, KafkaError


class AdminOperationError(KafkaError):
    error_code = ErrorCode.unknown_server_error


def assign_replicas(
    brokers: Iterable[BrokerImage],
    partitions: int,
    replication_factor: int,
    fixed_start_index: int = -1,
    start_partition: int = -1,
    rng: random.Random | None = None,
) -> dict[int, tuple[int, ...]]:
    """Partition id -> replicas (the first is the preferred leader)."""
    brokers = sorted(brokers, key=lambda b: b.node_id)
    if partitions <= 0:
        raise InvalidPartitions("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactor("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise InvalidReplicationFactor(
            f"Replication factor: {replication_factor} larger than available brokers: "
            f"{len(brokers)}."
        )
    rng = rng or random.Random()
    if all(b.rack is None for b in brokers):
        return _rack_unaware(
            partitions,
            replication_factor,
            [b.node_id for b in brokers],
            fixed_start_index,
            start_partition,
            rng,
        )
    racks = {b.node_id: b.rack for b in brokers if b.rack is not None}
    if len(racks) < len(brokers):
        raise AdminOperationError(
            "Not all brokers have rack information for replica rack aware assignment."
        )
    return _rack_aware(
        partitions,
        replication_factor,
        racks,
        fixed_start_index,
        start_partition,
        rng,
    )


def _replica_index(first: int, shift: int, index: int, n: int) -> int:
    return (first + 1 + (shift + index) % (n - 1)) % n


def _first_replicas(
    partitions: int, n: int, fixed: int, start_partition: int, rng: random.Random
) -> Iterator[tuple[int, int, int]]:
    """(partition, index of its first replica, follower shift) as Kafka walks them: the start
    index and shift random unless fixed, the shift growing by one every n partitions."""
    start_index = fixed if fixed >= 0 else rng.randrange(n)
    shift = fixed if fixed >= 0 else rng.randrange(n)
    current = max(0, start_partition)
    for _ in range(partitions):
        if current > 0 and current % n == 0:
            shift += 1
        yield current, (current + start_index) % n, shift
        current += 1


def _rack_unaware(
    partitions: int,
    replication_factor: int,
    broker_list: list[int],
    fixed: int,
    start_partition: int,
    rng: random.Random,
) -> dict[int, tuple[int, ...]]:
    n = len(broker_list)
    return {
        p: (broker_list[first],)
        + tuple(
            broker_list[_replica_index(first, shift, j, n)] for j in range(replication_factor - 1)
        )
        for p, first, shift in _first_replicas(partitions, n, fixed, start_partition, rng)
    }


def rack_alternated_brokers(racks: dict[int, str]) -> list[int]:
    """Brokers ordered so that consecutive ones are on different racks where possible."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in sorted(racks.items()):
        by_rack.setdefault(rack, []).append(broker)
    iterators = {rack: iter(nodes) for rack, nodes in by_rack.items()}
    names = sorted(iterators)
    result: list[int] = []
    index = 0
    while len(result) < len(racks):
        node: int | None = next(iterators[names[index]], None)
        if node is not None:
            result.append(node)
        index = (index + 1) % len(names)
    return result


def _rack_aware(
    partitions: int,
    replication_factor: int,
    racks: dict[int, str],
    fixed: int,
    start_partition: int,
    rng: random.Random,
) -> dict[int, tuple[int, ...]]:
    num_racks = len(set(racks.values()))
    arranged = rack_alternated_brokers(racks)
    n = len(arranged)
    result: dict[int, tuple[int, ...]] = {}
    for p, first, shift in _first_replicas(partitions, n, fixed, start_partition, rng):
        leader = arranged[first]
        replicas = [leader]
        racks_with, brokers_with = {racks[leader]}, {leader}
        k = 0
        for _ in range(replication_factor - 1):
            while True:
                broker = arranged[_replica_index(first, shift * num_racks, k, n)]
                rack = racks[broker]
                k += 1
                # Skip a broker whose rack (or itself) holds a replica while another does not.
                if (rack not in racks_with or len(racks_with) == num_racks) and (
                    broker not in brokers_with or len(brokers_with) == n
                ):
                    replicas.append(broker)
                    racks_with.add(rack)
                    brokers_with.add(broker)
                    break
        result[p] = tuple(replicas)
    return result
