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
from collections.abc import Callable, Iterable, Mapping, Sequence
from enum import IntEnum
from typing import Protocol

from odradek.metadata.image import (
    BrokerImage,
    IsrUpdate,
    OngoingReassignment,
    PartitionImage,
    TopicImage,
)
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.quota.entity import QuotaEntity
from odradek.security.acl import AccessControlEntry, ResourcePattern


class TopicExists(KafkaError):
    error_code = ErrorCode.topic_already_exists


class UnknownTopic(KafkaError):
    error_code = ErrorCode.unknown_topic_or_partition


class InvalidPartitions(KafkaError):
    error_code = ErrorCode.invalid_partitions


class InvalidReplicationFactor(KafkaError):
    error_code = ErrorCode.invalid_replication_factor


class InvalidReplicaAssignment(KafkaError):
    error_code = ErrorCode.invalid_replica_assignment


class ElectionNotNeeded(KafkaError):
    error_code = ErrorCode.election_not_needed


class PreferredLeaderNotAvailable(KafkaError):
    error_code = ErrorCode.preferred_leader_not_available


class EligibleLeadersNotAvailable(KafkaError):
    error_code = ErrorCode.eligible_leaders_not_available


class NoReassignmentInProgress(KafkaError):
    error_code = ErrorCode.no_reassignment_in_progress


class ElectionType(IntEnum):
    """ElectLeaders' election types, Kafka's ElectionType codes."""

    PREFERRED = 0
    UNCLEAN = 1


#: (topic, partition) as the controller-side methods take and return them.
TopicPartitionKey = tuple[str, int]


#: Told a resource pattern's ACL entries after they changed, through any broker (empty: none left).
AclListener = Callable[[ResourcePattern, frozenset[AccessControlEntry]], None]


class MetadataListener(Protocol):
    def on_topic_changed(self, before: TopicImage | None, after: TopicImage | None) -> None:
        """Called after a topic is created (before None), changed, or deleted (after None)."""


class MetadataStore(ABC):
    """Brokers, topics, partition assignments and dynamic configs of one cluster."""

    def __init__(self) -> None:
        self._listeners: list[MetadataListener] = []
        #: The published topics by name and by id; each store keeps both current.
        self._topics: dict[str, TopicImage] = {}
        self._topic_ids: dict[uuid.UUID, TopicImage] = {}
        #: Called after dynamic broker configs changed elsewhere (another broker of a
        #: cluster); a broker's own AlterConfigs applies its change itself.
        self.broker_config_listeners: list[Callable[[], None]] = []
        #: The ACLs by resource pattern; each store keeps it current and tells ``acl_listeners``.
        self._acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        self.acl_listeners: list[AclListener] = []
        #: Called after any entity's client quotas changed, through any broker (the broker's
        #: quota managers then take ``client_quotas()`` again).
        self.client_quota_listeners: list[Callable[[], None]] = []

    def subscribe(self, listener: MetadataListener) -> None:
        self._listeners.append(listener)

    def _publish(self, before: TopicImage | None, after: TopicImage | None) -> None:
        for listener in self._listeners:
            listener.on_topic_changed(before, after)

    def _publish_broker_configs(self) -> None:
        for listener in self.broker_config_listeners:
            listener()

    def _publish_client_quotas(self) -> None:
        for listener in self.client_quota_listeners:
            listener()

    @property
    @abstractmethod
    def cluster_id(self) -> str: ...

    @property
    @abstractmethod
    def controller_id(self) -> int: ...

    @abstractmethod
    def brokers(self) -> list[BrokerImage]: ...

    def topics(self) -> dict[str, TopicImage]:
        """Every topic by name (a snapshot; later changes do not alter it)."""
        return dict(self._topics)

    def topic(self, name: str) -> TopicImage | None:
        """One topic by name, without the snapshot of every topic that ``topics`` makes
        (request handlers look topics up on every Produce and Fetch)."""
        return self._topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicImage | None:
        """One topic by id (Fetch v13+ and Produce v13+ name topics by id)."""
        return self._topic_ids.get(topic_id)

    @abstractmethod
    def new_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        configs: Mapping[str, str] | None = None,
        internal: bool = False,
        assignment: Sequence[Sequence[int]] | None = None,
    ) -> TopicImage:
        """Reserve ``name`` and return the image the topic will have, without publishing it.

        ``assignment``, when given, is each partition's replicas in order (CreateTopics'
        manual assignment; the first replica is the preferred leader) and takes the place
        of ``partitions`` and ``replication_factor``; otherwise the store assigns them.
        TopicExists if the name is taken or already reserved, InvalidPartitions,
        InvalidReplicationFactor. Name rules, config and assignment validation are the
        caller's job (the admin API and auto creation apply them first). The
        reservation lets the partitions' logs be created while other requests
        are served: a second creation of the name is refused meanwhile, and
        nobody sees the topic until ``commit_new_topic`` publishes it.
        """

    @abstractmethod
    def commit_new_topic(self, topic: TopicImage) -> TopicImage:
        """Make a reserved topic durable and tell the listeners."""

    async def await_published(self, topic: TopicImage, timeout_s: float = 30.0) -> TopicImage:
        """The committed ``topic`` as the listeners were given it.

        A single node publishes on commit. A cluster publishes once the
        controller has elected the new partitions' leaders, so ZooKeeper's store
        waits (up to ``timeout_s``, then returns ``topic`` as committed).
        """
        return self.topic(topic.name) or topic

    @abstractmethod
    def abandon_new_topic(self, name: str) -> None:
        """Drop a reservation whose creation failed."""

    @abstractmethod
    def pending_topics(self) -> set[str]:
        """Names reserved by ``new_topic`` and not yet committed or abandoned."""

    def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        configs: Mapping[str, str] | None = None,
        internal: bool = False,
    ) -> TopicImage:
        """Create and publish a topic in one step (listeners create its logs synchronously)."""
        return self.commit_new_topic(
            self.new_topic(name, partitions, replication_factor, configs, internal)
        )

    @abstractmethod
    def delete_topic(self, name: str) -> TopicImage:
        """Delete a topic; UnknownTopic if there is none."""

    @abstractmethod
    def grown_topic(self, name: str, total: int) -> TopicImage:
        """The image of topic ``name`` grown to ``total`` partitions, not yet published.

        UnknownTopic, or InvalidPartitions unless it grows.
        """

    @abstractmethod
    def commit_partitions(self, grown: TopicImage) -> TopicImage:
        """Publish the partitions a ``grown_topic`` image added.

        UnknownTopic if the topic was deleted (or re-created) meanwhile,
        InvalidPartitions if it no longer grows.
        """

    def create_partitions(self, name: str, total: int) -> TopicImage:
        """Grow a topic to ``total`` partitions in one step."""
        return self.commit_partitions(self.grown_topic(name, total))

    @abstractmethod
    def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> TopicImage:
        """Replace a topic's config overrides (the full set, Kafka names)."""

    def topic_configs(self, name: str) -> dict[str, str]:
        topic = self.topic(name)
        if topic is None:
            raise UnknownTopic(f"topic {name} does not exist")
        return dict(topic.configs)

    def producer_id_blocks(self) -> Callable[[int], int] | None:
        """Where blocks of producer ids come from: None on a single node, whose
        ProducerIdManager reserves them in its own state file; in a cluster a function
        taking ``size`` ids for this broker alone and returning the first, so that no two
        brokers hand out the same producer id."""
        return None

    @abstractmethod
    def broker_configs(self, resource: str = "") -> dict[str, str]:
        """Dynamic broker configs set through AlterConfigs, Kafka names.

        ``resource`` is the BROKER config resource name, as Kafka keys them:
        "" for the cluster-wide default, a node id ("1") for that broker alone.
        """

    @abstractmethod
    def set_broker_configs(self, configs: Mapping[str, str], resource: str = "") -> None:
        """Replace the dynamic broker configs of ``resource`` ("" or a node id)."""

    @abstractmethod
    def scram_credentials(self) -> dict[str, dict[str, str]]:
        """User name -> SCRAM mechanism name -> its credential in Kafka's text form
        (``salt=...,stored_key=...,server_key=...,iterations=...``); never a password."""

    @abstractmethod
    def set_scram_credentials(self, user: str, credentials: Mapping[str, str]) -> None:
        """Replace the SCRAM credentials of ``user`` (mechanism -> text); empty removes them."""

    @abstractmethod
    def client_quotas(self) -> dict[QuotaEntity, dict[str, float]]:
        """Every entity with client quotas -> its quota configs (Kafka names, validated values)."""

    @abstractmethod
    def set_client_quotas(self, entity: QuotaEntity, quotas: Mapping[str, float]) -> None:
        """Replace the client quotas of ``entity`` (empty removes them), durably, then tell
        ``client_quota_listeners``. A user's SCRAM credentials are kept (ZooKeeper keeps
        both in the user's entity config)."""

    def user_scram_credentials(self, user: str) -> dict[str, str]:
        """One user's SCRAM credentials, mechanism -> text (empty when none)."""
        return dict(self.scram_credentials().get(user, {}))

    def acls(self) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        """Every stored ACL, by resource pattern (a snapshot)."""
        return dict(self._acls)

    @abstractmethod
    def update_acls(
        self,
        pattern: ResourcePattern,
        add: Iterable[AccessControlEntry] = (),
        remove: Iterable[AccessControlEntry] = (),
    ) -> frozenset[AccessControlEntry]:
        """Add and remove entries of one resource pattern, durably; return its entries after.

        The change is applied against the stored entries at the time of writing (another
        broker's concurrent change to the same pattern is kept, as Kafka's conditional
        ZooKeeper updates keep it), then ``acl_listeners`` hear of it.
        """

    def _apply_acls(self, pattern: ResourcePattern, entries: frozenset[AccessControlEntry]) -> None:
        """Take a pattern's entries as stored and tell the listeners, if they changed."""
        if self._acls.get(pattern, frozenset()) == entries:
            return
        if entries:
            self._acls[pattern] = entries
        else:
            self._acls.pop(pattern, None)
        for listener in self.acl_listeners:
            listener(pattern, entries)

    # -- controller operations: leader elections and partition reassignments -----------------
    # Kafka runs these on the controller; a cluster backend makes the same decisions against
    # its own image (and its fencing), so the admin handlers stay unchanged.

    async def alter_isr(
        self, topic: str, partition: int, update: IsrUpdate
    ) -> PartitionImage | ErrorCode:
        """Commit a leader's ISR change: the partition as committed, or why not.

        As Kafka's controller answers AlterPartition: FENCED_LEADER_EPOCH when ``update``
        comes from a leader or leader epoch that is no longer current,
        INVALID_UPDATE_VERSION when the partition changed since (its partition epoch),
        INELIGIBLE_REPLICA for a new member that is not registered under the broker epoch
        given, REQUEST_TIMED_OUT when the metadata could not be reached (worth retrying).
        A store whose partitions have one replica never gets one.
        """
        return ErrorCode.operation_not_attempted

    def broker_epoch(self, node_id: int) -> int:
        """The epoch of broker ``node_id``'s current registration (-1 if unknown or not kept)."""
        return -1

    @abstractmethod
    def elect_leaders(
        self, election_type: ElectionType, partitions: Iterable[TopicPartitionKey] | None
    ) -> dict[TopicPartitionKey, KafkaError | None]:
        """Elect a leader for each partition (``None``: every partition); None means elected.

        Per partition, as Kafka's controller: UnknownTopic for an unknown topic or
        partition; ElectionNotNeeded when the preferred replica (the first of the
        replicas) already leads, or for an unclean election when there is a leader;
        PreferredLeaderNotAvailable / EligibleLeadersNotAvailable when no replica
        may take over. A new leader bumps the partition's leader epoch.
        """

    @abstractmethod
    def alter_partition_reassignments(
        self,
        targets: Mapping[TopicPartitionKey, Sequence[int] | None],
        allow_replication_factor_change: bool = True,
    ) -> dict[TopicPartitionKey, KafkaError | None]:
        """Start (replicas given) or cancel (None) the reassignment of each partition.

        Per partition: UnknownTopic; InvalidReplicaAssignment for an empty list, a
        duplicate or a broker that is not registered; InvalidReplicationFactor when
        the replica count changes and that is not allowed; NoReassignmentInProgress
        for a cancellation with nothing ongoing. A target that needs no data movement
        (the current replicas, possibly reordered) completes at once.
        """

    @abstractmethod
    def list_partition_reassignments(
        self, partitions: Iterable[TopicPartitionKey] | None
    ) -> dict[TopicPartitionKey, OngoingReassignment]:
        """The ongoing reassignments among ``partitions`` (``None``: all); unknown ones are skipped."""
