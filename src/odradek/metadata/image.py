"""The cluster image: immutable snapshots of brokers and topics as the MetadataStore holds them."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class BrokerImage:
    node_id: int
    #: (listener name, host, port) of every advertised listener, as Kafka registers a broker's endpoints.
    endpoints: tuple[tuple[str, str, int], ...]
    rack: str | None = None

    def endpoint(self, listener_name: str) -> tuple[str, int] | None:
        """(host, port) a client connected on ``listener_name`` must use, None if not advertised there."""
        return next(
            ((host, port) for name, host, port in self.endpoints if name == listener_name), None
        )


@dataclass(frozen=True, slots=True)
class PartitionImage:
    """One partition's assignment; on a single node every replica list is [node id]."""

    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    #: The version of the partition's state in the cluster metadata (ZooKeeper's state znode
    #: version): bumped by every change of leader or ISR, the fence of a leader's ISR write.
    partition_epoch: int = 0


@dataclass(frozen=True, slots=True)
class IsrUpdate:
    """A leader's request to change a partition's ISR (Kafka's AlterPartition, one partition).

    ``broker_epochs`` gives each new ISR member's broker epoch as the leader last saw it
    fetch (-1 where unknown, and for the leader itself); a member registered under another
    epoch since then restarted and is refused (KIP-903).
    """

    leader_id: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]
    broker_epochs: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class OngoingReassignment:
    """A partition reassignment under way: the full replica set and who joins or leaves it."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TopicImage:
    name: str
    topic_id: uuid.UUID
    partitions: tuple[PartitionImage, ...]
    #: Topic-level config overrides only (Kafka names); defaults come from the broker.
    configs: dict[str, str] = field(default_factory=dict)
    internal: bool = False

    @property
    def replication_factor(self) -> int:
        return len(self.partitions[0].replicas) if self.partitions else 0
