"""LocalMetadataStore: the cluster image of a single node, kept in a JSON file in the data dir.

Every change is written atomically (temp file, fsync, rename, fsync of the
directory) before listeners hear of it, so a topic the broker acknowledged
survives a crash.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from odradek.durable import write_atomically
from odradek.metadata.image import BrokerImage, OngoingReassignment, PartitionImage, TopicImage
from odradek.metadata.partition_change import elect_leader, validate_assignment
from odradek.metadata.store import (
    ElectionType,
    InvalidPartitions,
    InvalidReplicationFactor,
    MetadataStore,
    NoReassignmentInProgress,
    TopicExists,
    TopicPartitionKey,
    UnknownTopic,
)
from odradek.protocol.errors import KafkaError
from odradek.quota.entity import QuotaEntity
from odradek.security.acl import (
    AccessControlEntry,
    PatternType,
    ResourcePattern,
    ResourceType,
    entries_from_json,
    entries_to_json,
    name_of,
    parse_name,
)

FILE_NAME = "__cluster_metadata.json"


class LocalMetadataStore(MetadataStore):
    """A cluster of one: this node is every partition's only replica, leader and controller."""

    def __init__(
        self, data_dir: str | Path, node_id: int, cluster_id: str, broker: BrokerImage
    ) -> None:
        super().__init__()
        self._path = Path(data_dir) / FILE_NAME
        self._node_id = node_id
        self._cluster_id = cluster_id
        self._broker = broker
        #: BROKER config resource name ("" cluster default, or a node id) -> its dynamic configs.
        self._broker_configs: dict[str, dict[str, str]] = {}
        #: User -> SCRAM mechanism -> credential text, as Kafka's /config/users/<user> holds them.
        self._scram_credentials: dict[str, dict[str, str]] = {}
        self._client_quotas: dict[QuotaEntity, dict[str, float]] = {}
        self._pending: set[str] = set()
        if self._path.exists():
            self._load()

    @property
    def cluster_id(self) -> str:
        return self._cluster_id

    @property
    def controller_id(self) -> int:
        return self._node_id

    def brokers(self) -> list[BrokerImage]:
        return [self._broker]

    def new_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        configs: Mapping[str, str] | None = None,
        internal: bool = False,
        assignment: Sequence[Sequence[int]] | None = None,
    ) -> TopicImage:
        # A single node: the only valid manual assignment names this node once per partition,
        # which is what every partition gets anyway.
        if assignment is not None:
            partitions, replication_factor = len(assignment), 1
        if name in self._topics or name in self._pending:
            raise TopicExists(f"Topic '{name}' already exists.")
        if partitions < 1:
            raise InvalidPartitions("Number of partitions must be larger than 0.")
        if replication_factor < 1:
            raise InvalidReplicationFactor("Replication factor must be larger than 0.")
        if replication_factor > len(self.brokers()):
            raise InvalidReplicationFactor(
                f"Unable to replicate the partition {replication_factor} time(s): "
                f"The target replication factor of {replication_factor} cannot be reached "
                f"because only {len(self.brokers())} broker(s) are registered."
            )
        self._pending.add(name)
        return TopicImage(
            name=name,
            topic_id=uuid.uuid4(),
            partitions=tuple(self._new_partition(p) for p in range(partitions)),
            configs=dict(configs or {}),
            internal=internal,
        )

    def commit_new_topic(self, topic: TopicImage) -> TopicImage:
        self._pending.discard(topic.name)
        if topic.name in self._topics:
            raise TopicExists(f"Topic '{topic.name}' already exists.")
        return self._commit(None, topic)

    def abandon_new_topic(self, name: str) -> None:
        self._pending.discard(name)

    def pending_topics(self) -> set[str]:
        return set(self._pending)

    def delete_topic(self, name: str) -> TopicImage:
        before = self._require(name)
        del self._topics[name]
        del self._topic_ids[before.topic_id]
        self._save()
        self._publish(before, None)
        return before

    def grown_topic(self, name: str, total: int) -> TopicImage:
        before = self._require(name)
        current = len(before.partitions)
        if total <= current:
            raise InvalidPartitions(
                f"Topic currently has {current} partitions, which is higher than or "
                f"equal to the requested {total}."
            )
        added = tuple(self._new_partition(p) for p in range(current, total))
        return replace(before, partitions=before.partitions + added)

    def commit_partitions(self, grown: TopicImage) -> TopicImage:
        before = self._require(grown.name)
        if before.topic_id != grown.topic_id:
            raise UnknownTopic(
                f"Topic '{grown.name}' was deleted while its partitions were being created."
            )
        if len(grown.partitions) <= len(before.partitions):
            raise InvalidPartitions(
                f"Topic currently has {len(before.partitions)} partitions, which is higher than or "
                f"equal to the requested {len(grown.partitions)}."
            )
        added = grown.partitions[len(before.partitions) :]
        return self._commit(before, replace(before, partitions=before.partitions + added))

    def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> TopicImage:
        before = self._require(name)
        return self._commit(before, replace(before, configs=dict(configs)))

    def broker_configs(self, resource: str = "") -> dict[str, str]:
        return dict(self._broker_configs.get(resource, {}))

    def set_broker_configs(self, configs: Mapping[str, str], resource: str = "") -> None:
        if configs:
            self._broker_configs[resource] = dict(configs)
        else:
            self._broker_configs.pop(resource, None)
        self._save()

    def scram_credentials(self) -> dict[str, dict[str, str]]:
        return {user: dict(creds) for user, creds in self._scram_credentials.items()}

    def set_scram_credentials(self, user: str, credentials: Mapping[str, str]) -> None:
        if credentials:
            self._scram_credentials[user] = dict(credentials)
        else:
            self._scram_credentials.pop(user, None)
        self._save()

    def client_quotas(self) -> dict[QuotaEntity, dict[str, float]]:
        return {entity: dict(quotas) for entity, quotas in self._client_quotas.items()}

    def set_client_quotas(self, entity: QuotaEntity, quotas: Mapping[str, float]) -> None:
        if quotas:
            self._client_quotas[entity] = dict(quotas)
        else:
            self._client_quotas.pop(entity, None)
        self._save()
        self._publish_client_quotas()

    def update_acls(
        self,
        pattern: ResourcePattern,
        add: Iterable[AccessControlEntry] = (),
        remove: Iterable[AccessControlEntry] = (),
    ) -> frozenset[AccessControlEntry]:
        before = self._acls.get(pattern, frozenset())
        after = (before | frozenset(add)) - frozenset(remove)
        if after != before:
            acls = {p: e for p, e in self._acls.items() if p != pattern}
            if after:
                acls[pattern] = after
            self._save(acls)  # durable before anyone is told, as every change here
            self._apply_acls(pattern, after)
        return after

    def elect_leaders(
        self, election_type: ElectionType, partitions: Iterable[TopicPartitionKey] | None
    ) -> dict[TopicPartitionKey, KafkaError | None]:
        if partitions is None:
            partitions = [
                (t.name, p.partition) for t in self._topics.values() for p in t.partitions
            ]
        alive = {b.node_id for b in self.brokers()}
        results: dict[TopicPartitionKey, KafkaError | None] = {}
        elected: dict[str, TopicImage] = {}
        for key in partitions:
            name, index = key
            try:
                topic = elected.get(name) or self._require_partition(name, index)
                after = elect_leader(topic.partitions[index], election_type, alive)
            except KafkaError as e:
                results[key] = e
                continue
            results[key] = None
            parts = list(topic.partitions)
            parts[index] = after
            elected[name] = replace(topic, partitions=tuple(parts))
        for name, topic in elected.items():
            self._commit(self._topics[name], topic)
        return results

    def alter_partition_reassignments(
        self,
        targets: Mapping[TopicPartitionKey, Sequence[int] | None],
        allow_replication_factor_change: bool = True,
    ) -> dict[TopicPartitionKey, KafkaError | None]:
        # This node is the only registered broker, so the only valid target is this node
        # alone: the replica set every partition already has. Such a reassignment moves no
        # data and is complete when accepted (Kafka completes it at once too), so nothing
        # is ever in progress here and the replication factor cannot change.
        registered = {b.node_id for b in self.brokers()}
        results: dict[TopicPartitionKey, KafkaError | None] = {}
        for (name, index), replicas in targets.items():
            try:
                self._require_partition(name, index)
                if replicas is None:
                    raise NoReassignmentInProgress("No partition reassignment is in progress.")
                validate_assignment(replicas, registered)
            except KafkaError as e:
                results[(name, index)] = e
            else:
                results[(name, index)] = None
        return results

    def list_partition_reassignments(
        self, partitions: Iterable[TopicPartitionKey] | None
    ) -> dict[TopicPartitionKey, OngoingReassignment]:
        return {}  # every reassignment completes when accepted (see above)

    def _require_partition(self, name: str, index: int) -> TopicImage:
        topic = self._topics.get(name)
        if topic is None:
            raise UnknownTopic(f"Unable to find a topic named {name}.")
        if not 0 <= index < len(topic.partitions):
            raise UnknownTopic(f"Unable to find partition {name}:{index}.")
        return topic

    def _new_partition(self, partition: int) -> PartitionImage:
        node = (self._node_id,)
        return PartitionImage(
            partition=partition, leader=self._node_id, leader_epoch=0, replicas=node, isr=node
        )

    def _require(self, name: str) -> TopicImage:
        topic = self._topics.get(name)
        if topic is None:
            raise UnknownTopic(f"This server does not host this topic-partition: {name}")
        return topic

    def _commit(self, before: TopicImage | None, after: TopicImage) -> TopicImage:
        """Store a new or changed topic, write the file, then tell listeners (delete_topic's
        removal does the same)."""
        self._topics[after.name] = after
        self._topic_ids[after.topic_id] = after
        self._save()
        self._publish(before, after)
        return after

    def _load(self) -> None:
        state = json.loads(self._path.read_text())
        self._broker_configs = {}
        if state.get("broker_configs"):
            self._broker_configs[""] = state["broker_configs"]
        self._broker_configs.update(state.get("per_broker_configs", {}))
        self._scram_credentials = state.get("scram_credentials", {})
        self._client_quotas = {
            QuotaEntity.from_wire(q["entity"]): q["quotas"] for q in state.get("client_quotas", [])
        }
        # Each pattern as Kafka names it in ZooKeeper, with its /kafka-acl znode's JSON.
        for resource in state.get("acls", []):
            pattern = ResourcePattern(
                parse_name(ResourceType, resource["resourceType"]),
                resource["name"],
                parse_name(PatternType, resource["patternType"]),
            )
            self._acls[pattern] = entries_from_json(resource)
        for t in state.get("topics", []):
            topic = self._topics[t["name"]] = TopicImage(
                name=t["name"],
                topic_id=uuid.UUID(t["topic_id"]),
                partitions=tuple(
                    PartitionImage(
                        p["partition"],
                        p["leader"],
                        p["leader_epoch"],
                        tuple(p["replicas"]),
                        tuple(p["isr"]),
                    )
                    for p in t["partitions"]
                ),
                configs=t.get("configs", {}),
                internal=t.get("internal", False),
            )
            self._topic_ids[topic.topic_id] = topic

    def _save(
        self, acls: Mapping[ResourcePattern, frozenset[AccessControlEntry]] | None = None
    ) -> None:
        """Write the whole state; ``acls`` replaces the held ACLs in what is written."""
        state = {
            "broker_configs": self._broker_configs.get("", {}),
            "per_broker_configs": {name: c for name, c in self._broker_configs.items() if name},
            "scram_credentials": self._scram_credentials,
            #: Each entity as AlterClientQuotas names it (type -> name, null: the default).
            "client_quotas": [
                {"entity": entity.to_wire(), "quotas": quotas}
                for entity, quotas in self._client_quotas.items()
            ],
            "acls": [
                {
                    "resourceType": name_of(pattern.resource_type),
                    "name": pattern.name,
                    "patternType": pattern.pattern_type.name,
                    **entries_to_json(entries),
                }
                for pattern, entries in (self._acls if acls is None else acls).items()
            ],
            "topics": [
                {
                    "name": t.name,
                    "topic_id": str(t.topic_id),
                    "partitions": [
                        {
                            "partition": p.partition,
                            "leader": p.leader,
                            "leader_epoch": p.leader_epoch,
                            "replicas": list(p.replicas),
                            "isr": list(p.isr),
                        }
                        for p in t.partitions
                    ],
                    "configs": t.configs,
                    "internal": t.internal,
                }
                for t in self._topics.values()
            ],
        }
        write_atomically(self._path, json.dumps(state))
