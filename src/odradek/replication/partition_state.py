"""What the metadata says about a partition, and the ISR changes a leader proposes.

``PartitionState`` is the input that drives role changes: ZooKeeper's
``/brokers/topics/<t>/partitions/<p>/state`` znode (leader, leader_epoch, isr)
with the assignment (replicas) and the znode's version as the partition epoch,
the fence Kafka's AlterPartition checks (``partitionEpoch``).

``AlterPartition`` is an output: a leader never changes its ISR by itself.
It proposes the change with the leader epoch and partition epoch it knows,
the controller (or the ZooKeeper shell writing conditionally on the znode
version) commits it or refuses it, and the leader applies only a committed
answer (KIP-497). ``IsrState`` holds the committed ISR and, while a proposal
is in flight, the "maximal" ISR that the high watermark must respect:
an expansion counts the joining replica already, a shrink still counts the
leaving ones, so whichever answer comes back the high watermark was safe.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PartitionState:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    #: The partition state's version (ZooKeeper znode version); bumped by every committed change.
    partition_epoch: int = 0


@dataclass(frozen=True, slots=True)
class AlterPartition:
    """A leader's proposed ISR (Kafka's AlterPartition request for one partition)."""

    leader_id: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]
    #: Each new ISR member's broker epoch as its last fetch stated it (KIP-903), -1 where
    #: unknown and for the leader itself (the request's own broker epoch fences the leader).
    #: The controller refuses a member registered under another epoch since (it restarted,
    #: and may have lost what the leader saw it fetch), so a late copy of a refused
    #: proposal cannot be committed after the leader has moved on.
    broker_epochs: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class IsrState:
    """The committed ISR and, while ``pending`` is in flight, the maximal ISR."""

    isr: frozenset[int]
    maximal_isr: frozenset[int]
    pending: AlterPartition | None = None

    @classmethod
    def committed(cls, isr: frozenset[int]) -> IsrState:
        return cls(isr, isr)
