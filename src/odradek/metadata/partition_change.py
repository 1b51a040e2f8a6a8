"""The controller's decisions on one partition: who leads after an election, which targets are valid.

Plain functions of a PartitionImage and the set of registered brokers, so the
single node's store and a cluster backend decide alike (Kafka keeps these rules
in its controller's PartitionChangeBuilder and validateManualPartitionAssignment).
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from dataclasses import replace

from odradek.metadata.image import PartitionImage
from odradek.metadata.store import (
    ElectionNotNeeded,
    ElectionType,
    EligibleLeadersNotAvailable,
    InvalidReplicaAssignment,
    PreferredLeaderNotAvailable,
)

NO_LEADER = -1


def elect_leader(
    partition: PartitionImage, election_type: ElectionType, alive: Set[int]
) -> PartitionImage:
    """The partition after the election, with a bumped leader epoch.

    PREFERRED: the first replica takes over if it is alive and in the ISR;
    ElectionNotNeeded when it already leads. UNCLEAN (only for a partition with
    no leader; ElectionNotNeeded otherwise): an alive ISR member, else any alive
    replica, which then forms the ISR alone since the others may hold records it
    lacks (Kafka's unclean election).
    """
    if election_type == ElectionType.PREFERRED:
        preferred = partition.replicas[0] if partition.replicas else NO_LEADER
        if partition.leader == preferred:
            raise ElectionNotNeeded("Leader election not needed for topic partition.")
        if preferred not in partition.isr or preferred not in alive:
            raise PreferredLeaderNotAvailable("The preferred leader was not available.")
        return replace(partition, leader=preferred, leader_epoch=partition.leader_epoch + 1)
    if partition.leader != NO_LEADER:
        raise ElectionNotNeeded("Leader election not needed for topic partition.")
    in_sync = [r for r in partition.replicas if r in partition.isr and r in alive]
    if in_sync:
        return replace(partition, leader=in_sync[0], leader_epoch=partition.leader_epoch + 1)
    unclean = [r for r in partition.replicas if r in alive]
    if not unclean:
        raise EligibleLeadersNotAvailable("Eligible topic partition leaders are not available.")
    return replace(
        partition, leader=unclean[0], leader_epoch=partition.leader_epoch + 1, isr=(unclean[0],)
    )


def validate_assignment(replicas: Sequence[int], registered: Set[int]) -> tuple[int, ...]:
    """``replicas`` as a tuple if a manual assignment may name them, else InvalidReplicaAssignment."""
    if not replicas:
        raise InvalidReplicaAssignment(
            "The manual partition assignment includes an empty replica list."
        )
    seen: set[int] = set()
    for broker in sorted(replicas):
        if broker not in registered:
            raise InvalidReplicaAssignment(
                f"The manual partition assignment includes broker {broker}, but no such broker "
                "is registered."
            )
        if broker in seen:
            raise InvalidReplicaAssignment(
                f"The manual partition assignment includes the broker {broker} more than once."
            )
        seen.add(broker)
    return tuple(replicas)
