"""MetadataStore: the interface to the cluster image, whatever keeps it.

A single node uses LocalMetadataStore (a JSON file in the data dir); a cluster
will implement the same interface on ZooKeeper. Writers (admin APIs, auto topic
creation) call the mutating methods; the ReplicaManager and others subscribe as
MetadataListeners and turn changes into partitions and logs, so a topic created
through any path gets its logs the same way.
"""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Protocol

from odradek.metadata.image import BrokerImage, TopicImage
from odradek.protocol.errors import ErrorCode, KafkaError


class TopicExists(KafkaError):
    error_code = ErrorCode.topic_already_exists


class UnknownTopic(KafkaError):
    error_code = ErrorCode.unknown_topic_or_partition


class InvalidPartitions(KafkaError):
    error_code = ErrorCode.invalid_partitions


class InvalidReplicationFactor(KafkaError):
    error_code = ErrorCode.invalid_replication_factor


class MetadataListener(Protocol):
    def on_topic_changed(self, before: TopicImage | None, after: TopicImage | None) -> None:
        """Called after a topic is created (before None), changed, or deleted (after None)."""


class MetadataStore(ABC):
    """Brokers, topics, partition assignments and dynamic configs of one cluster."""

    def __init__(self) -> None:
        self._listeners: list[MetadataListener] = []

    def subscribe(self, listener: MetadataListener) -> None:
        self._listeners.append(listener)

    def _publish(self, before: TopicImage | None, after: TopicImage | None) -> None:
        for listener in self._listeners:
            listener.on_topic_changed(before, after)

    @property
    @abstractmethod
    def cluster_id(self) -> str: ...

    @property
    @abstractmethod
    def controller_id(self) -> int: ...

    @abstractmethod
    def brokers(self) -> list[BrokerImage]: ...

    @abstractmethod
    def topics(self) -> dict[str, TopicImage]:
        """Every topic by name (a snapshot; later changes do not alter it)."""

    def topic(self, name: str) -> TopicImage | None:
        return self.topics().get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicImage | None:
        return next((t for t in self.topics().values() if t.topic_id == topic_id), None)

    @abstractmethod
    def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        configs: Mapping[str, str] | None = None,
        internal: bool = False,
    ) -> TopicImage:
        """Create a topic; TopicExists, InvalidPartitions, InvalidReplicationFactor.

        Name rules and config validation are the caller's job (the admin API and
        auto creation apply them before calling).
        """

    @abstractmethod
    def delete_topic(self, name: str) -> TopicImage:
        """Delete a topic; UnknownTopic if there is none."""

    @abstractmethod
    def create_partitions(self, name: str, total: int) -> TopicImage:
        """Grow a topic to ``total`` partitions; InvalidPartitions unless it grows."""

    @abstractmethod
    def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> TopicImage:
        """Replace a topic's config overrides (the full set, Kafka names)."""

    def topic_configs(self, name: str) -> dict[str, str]:
        topic = self.topic(name)
        if topic is None:
            raise UnknownTopic(f"topic {name} does not exist")
        return dict(topic.configs)

    @abstractmethod
    def broker_configs(self) -> dict[str, str]:
        """Dynamic broker config overrides (set through AlterConfigs), Kafka names."""

    @abstractmethod
    def set_broker_configs(self, configs: Mapping[str, str]) -> None:
        """Replace the dynamic broker config overrides."""
