"""Kafka's ZooKeeper layout: the paths and JSON of every znode cluster mode reads or writes.

Byte-compatible with what Kafka 3.x (ZooKeeper mode, ``kafka.zk.ZkData``) writes,
so tools that read the layout (Burrow, kafka-topics --zookeeper era scripts,
zkCli inspection) understand an Odradek cluster:

- ``/cluster/id``: ``{"version":"1","id":...}`` (the version is a string there)
- ``/brokers/ids/<id>`` (ephemeral): version 5 broker info with host/port of the
  first endpoint for old clients, ``endpoints`` as ``NAME://host:port``,
  ``listener_security_protocol_map``, ``rack`` only when set, ``features``
- ``/brokers/topics/<t>``: version 3 assignment ``{"partitions": {"0": [1,2]}}``
  with ``adding_replicas``/``removing_replicas`` and ``topic_id``
- ``/brokers/topics/<t>/partitions/<p>/state``: version 1 leader and ISR with
  ``controller_epoch``
- ``/controller`` (ephemeral): version 2 ``brokerid``, ``timestamp`` (a string),
  ``kraftControllerEpoch`` -1; ``/controller_epoch``: the epoch as a decimal string
- ``/config/<type>/<name>``: ``{"version":1,"config":{...}}``; a change is
  announced by a persistent sequential ``/config/changes/config_change_`` node
  ``{"version":2,"entity_path":"topics/<t>"}``. Client quotas are entity configs of
  ``users/<user>``, ``users/<user>/clients/<client-id>`` and ``clients/<client-id>``
  (``<default>`` for a default entity, other names sanitized), values as strings
  (``"1048576"``, ``"12.5"``); a user's config also holds its SCRAM credentials
- ``/admin/delete_topics/<t>`` (empty), ``/isr_change_notification/isr_change_``
  (version 1 list of partitions)
- ``/admin/reassign_partitions``: ``{"version":1,"partitions":[{"topic":t,"partition":p,
  "replicas":[...]}]}``, written by the reassignment tools of the ZooKeeper era (Kafka's
  LegacyPartitionAssignment; a ``log_dirs`` list beside the replicas is accepted and
  ignored); ``/admin/preferred_replica_election``: ``{"version":1,"partitions":[{"topic":t,
  "partition":p}]}``. The controller acts on both and deletes them (``zk_controller``).
- ``/controlled_shutdown/<id>`` (ephemeral, empty; Odradek's own): a broker asking the
  controller to move its leaderships away before it exits (see ``zk_controller``)
- ``/latest_producer_id_block``: the last block of producer ids a broker took,
  ``{"version":1,"broker":id,"block_start":"0","block_end":"999"}`` (strings)

Pure functions over bytes: no client here, so both the store and the controller
share one definition and the tests can check the shapes without a server.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import quote, unquote

from odradek.metadata.image import BrokerImage
from odradek.quota.entity import DEFAULT, QUOTA_CONFIGS, EntityName, QuotaEntity

CLUSTER_ID = "/cluster/id"
BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
SEQID = "/brokers/seqid"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
CONFIG = "/config"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
CONTROLLED_SHUTDOWN = "/controlled_shutdown"
#: The persistent paths Kafka's broker creates at start-up (KafkaZkClient.createTopLevelPaths),
#: and the parent of the controlled shutdown requests.
PERSISTENT_PATHS = (
    "/consumers",
    BROKER_IDS,
    TOPICS,
    CONFIG_CHANGES,
    "/admin",
    DELETE_TOPICS,
    "/brokers/seqid",
    ISR_CHANGE_NOTIFICATION,
    PRODUCER_ID_BLOCK,
    "/log_dir_event_notification",
    "/config/topics",
    "/config/clients",
    "/config/users",
    "/config/brokers",
    "/config/ips",
    CONTROLLED_SHUTDOWN,
)
#: Where a user's entity configs live (SCRAM credentials, quotas), one znode per user.
USER_CONFIGS = "/config/users"
CLIENT_CONFIGS = "/config/clients"
#: The keys of a user's config that are SCRAM credentials (Kafka's mechanism names).
SCRAM_CONFIG_KEYS = frozenset({"SCRAM-SHA-256", "SCRAM-SHA-512"})
#: The BROKER config entity that holds cluster-wide defaults.
DEFAULT_BROKER_ENTITY = "<default>"
#: ``LeaderAndIsr.NoLeader``.
NO_LEADER = -1
BROKER_INFO_VERSION = 5


def _encode(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def broker_path(node_id: int) -> str:
    return f"{BROKER_IDS}/{node_id}"


def controlled_shutdown_path(node_id: int) -> str:
    return f"{CONTROLLED_SHUTDOWN}/{node_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{TOPICS}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}"


def state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG}/topics/{topic}"


def broker_config_path(resource: str) -> str:
    """``resource`` "" (the cluster default) is Kafka's ``<default>`` entity."""
    return f"{CONFIG}/brokers/{resource or DEFAULT_BROKER_ENTITY}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


# -- /cluster/id ---------------------------------------------------------------------------


def encode_cluster_id(cluster_id: str) -> bytes:
    return _encode({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    return json.loads(data)["id"]


# -- /brokers/ids/<id> ---------------------------------------------------------------------


def encode_broker(broker: BrokerImage, security_protocols: dict[str, str]) -> bytes:
    """``security_protocols``: listener name -> security protocol of each advertised endpoint."""
    name, host, port = broker.endpoints[0]
    info: dict[str, object] = {
        "version": BROKER_INFO_VERSION,
        # Kafka puts a PLAINTEXT endpoint here for old clients, else host null and port -1.
        "host": host if security_protocols.get(name) == "PLAINTEXT" else None,
        "port": port if security_protocols.get(name) == "PLAINTEXT" else -1,
        "endpoints": [f"{n}://{h}:{p}" for n, h, p in broker.endpoints],
        "jmx_port": -1,
        "timestamp": str(int(time.time() * 1000)),
        "listener_security_protocol_map": {
            n: security_protocols[n] for n, _, _ in broker.endpoints
        },
        "features": {},
    }
    if broker.rack is not None:
        info["rack"] = broker.rack
    return _encode(info)


def decode_broker(node_id: int, data: bytes) -> BrokerImage:
    info = json.loads(data)
    endpoints = []
    for uri in info.get("endpoints", ()):
        name, _, address = uri.partition("://")
        host, _, port = address.rpartition(":")
        endpoints.append((name, host.strip("[]"), int(port)))
    if not endpoints and info.get("host"):
        endpoints.append(("PLAINTEXT", info["host"], int(info["port"])))
    return BrokerImage(node_id, tuple(endpoints), info.get("rack"))


# -- /brokers/topics/<t> -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    """What ``/brokers/topics/<t>`` holds: the topic id and each partition's replicas."""

    topic_id: uuid.UUID | None
    replicas: dict[int, tuple[int, ...]]
    adding: dict[int, tuple[int, ...]]
    removing: dict[int, tuple[int, ...]]


def encode_assignment(
    topic_id: uuid.UUID,
    replicas: dict[int, tuple[int, ...]],
    adding: dict[int, tuple[int, ...]] | None = None,
    removing: dict[int, tuple[int, ...]] | None = None,
) -> bytes:
    return _encode(
        {
            "partitions": {str(p): list(r) for p, r in sorted(replicas.items())},
            "topic_id": _kafka_uuid(topic_id),
            "adding_replicas": {str(p): list(r) for p, r in sorted((adding or {}).items())},
            "removing_replicas": {str(p): list(r) for p, r in sorted((removing or {}).items())},
            "version": 3,
        }
    )


def decode_assignment(data: bytes) -> TopicAssignment:
    info = json.loads(data)

    def parts(key: str) -> dict[int, tuple[int, ...]]:
        return {int(p): tuple(r) for p, r in (info.get(key) or {}).items()}

    raw_id = info.get("topic_id")
    return TopicAssignment(
        _parse_kafka_uuid(raw_id) if raw_id else None,
        parts("partitions"),
        parts("adding_replicas"),
        parts("removing_replicas"),
    )


def _kafka_uuid(value: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def _parse_kafka_uuid(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


# -- /brokers/topics/<t>/partitions/<p>/state ----------------------------------------------


@dataclass(frozen=True, slots=True)
class PartitionState:
    """``LeaderIsrAndControllerEpoch``: what the controller last decided for one partition."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int


def encode_partition_state(state: PartitionState) -> bytes:
    return _encode(
        {
            "controller_epoch": state.controller_epoch,
            "leader": state.leader,
            "version": 1,
            "leader_epoch": state.leader_epoch,
            "isr": list(state.isr),
        }
    )


def decode_partition_state(data: bytes) -> PartitionState:
    info = json.loads(data)
    return PartitionState(
        info["leader"], info["leader_epoch"], tuple(info["isr"]), info["controller_epoch"]
    )


# -- /controller, /controller_epoch --------------------------------------------------------


def encode_controller(node_id: int) -> bytes:
    return _encode(
        {
            "version": 2,
            "brokerid": node_id,
            "timestamp": str(int(time.time() * 1000)),
            "kraftControllerEpoch": -1,
        }
    )


def decode_controller(data: bytes) -> int:
    return int(json.loads(data)["brokerid"])


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes) -> int:
    return int(data)


# -- /config -------------------------------------------------------------------------------


def encode_config(configs: dict[str, str]) -> bytes:
    return _encode({"version": 1, "config": dict(configs)})


def decode_config(data: bytes | None) -> dict[str, str]:
    if not data:
        return {}
    return {k: str(v) for k, v in (json.loads(data).get("config") or {}).items()}


def sanitize(name: str) -> str:
    """Kafka's Sanitizer.sanitize: a user name as a znode name (URL-encoded, ``*`` and space too)."""
    return quote(name, safe="._-").replace("~", "%7E")


def desanitize(entity: str) -> str:
    return unquote(entity)


def encode_config_change(entity_type: str, entity_name: str) -> bytes:
    return _encode({"version": 2, "entity_path": f"{entity_type}/{entity_name}"})


def decode_config_change(data: bytes | None) -> str:
    """The entity path a change notification names ("" if it names none)."""
    if not data:
        return ""
    return str(json.loads(data).get("entity_path") or "")


def _entity_name(name: EntityName) -> str:
    return DEFAULT_BROKER_ENTITY if name is DEFAULT else sanitize(name)


def _parse_entity_name(entity: str) -> EntityName:
    return DEFAULT if entity == DEFAULT_BROKER_ENTITY else desanitize(entity)


def quota_entity_path(entity: QuotaEntity) -> str:
    """Where ``entity``'s configs live under /config: ``users/<u>``, ``clients/<c>`` or
    ``users/<u>/clients/<c>`` (Kafka's ZooKeeper layout of client quotas)."""
    if entity.user is None:
        assert entity.client_id is not None
        return f"clients/{_entity_name(entity.client_id)}"
    path = f"users/{_entity_name(entity.user)}"
    if entity.client_id is not None:
        path += f"/clients/{_entity_name(entity.client_id)}"
    return path


def parse_quota_entity_path(path: str) -> QuotaEntity | None:
    """The entity of a /config path that ``quota_entity_path`` makes; None for any other."""
    parts = path.split("/")
    if len(parts) == 2 and parts[0] == "users":
        return QuotaEntity(_parse_entity_name(parts[1]))
    if len(parts) == 2 and parts[0] == "clients":
        return QuotaEntity(client_id=_parse_entity_name(parts[1]))
    if len(parts) == 4 and parts[0] == "users" and parts[2] == "clients":
        return QuotaEntity(_parse_entity_name(parts[1]), _parse_entity_name(parts[3]))
    return None


def encode_quota_configs(quotas: Mapping[str, float]) -> dict[str, str]:
    """Quota values as Kafka writes them: integers for the byte rates, else Java's doubles."""
    return {
        key: str(int(value)) if QUOTA_CONFIGS.get(key) else str(float(value))
        for key, value in quotas.items()
    }


def decode_quota_configs(configs: Mapping[str, str]) -> dict[str, float]:
    """The quota configs among an entity's configs (a value that is no number is skipped)."""
    quotas = {}
    for key, text in configs.items():
        if key in QUOTA_CONFIGS:
            try:
                quotas[key] = float(text)
            except ValueError:
                continue
    return quotas


# -- /isr_change_notification --------------------------------------------------------------


def encode_isr_change(partitions: list[tuple[str, int]]) -> bytes:
    return _encode(
        {"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]}
    )


# -- /latest_producer_id_block -------------------------------------------------------------


def encode_producer_id_block(broker: int, first: int, last: int) -> bytes:
    return _encode(
        {"version": 1, "broker": broker, "block_start": str(first), "block_end": str(last)}
    )


def decode_producer_id_block_end(data: bytes | None) -> int:
    """The last id of the block taken last; -1 when none was taken yet (the znode is empty)."""
    if not data:
        return -1
    return int(json.loads(data)["block_end"])


def encode_reassign_partitions(targets: Mapping[tuple[str, int], Sequence[int]]) -> bytes:
    """Kafka's ReassignPartitionsZNode.encode (version 1)."""
    return _encode(
        {
            "version": 1,
            "partitions": [
                {"topic": topic, "partition": partition, "replicas": list(replicas)}
                for (topic, partition), replicas in targets.items()
            ],
        }
    )


def decode_reassign_partitions(data: bytes) -> dict[tuple[str, int], tuple[int, ...]]:
    """(topic, partition) -> target replicas; ValueError when it is not Kafka's JSON."""
    entries = _admin_partitions(data)
    targets = {}
    for entry in entries:
        replicas = entry.get("replicas")
        if not isinstance(replicas, list) or not all(_is_int(r) for r in replicas):
            raise ValueError(f"replicas of {entry} are not a list of broker ids")
        targets[_admin_partition(entry)] = tuple(replicas)
    return targets


def encode_preferred_replica_election(partitions: Iterable[tuple[str, int]]) -> bytes:
    """Kafka's PreferredReplicaElectionZNode.encode."""
    return _encode(
        {"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]}
    )


def decode_preferred_replica_election(data: bytes) -> set[tuple[str, int]]:
    """The partitions to elect; ValueError when it is not Kafka's JSON."""
    return {_admin_partition(entry) for entry in _admin_partitions(data)}


def _admin_partitions(data: bytes) -> list[dict]:
    try:
        value = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"not JSON: {e}") from None
    partitions = value.get("partitions") if isinstance(value, dict) else None
    if not isinstance(partitions, list) or not all(isinstance(e, dict) for e in partitions):
        raise ValueError("no list of partitions")
    return partitions


def _admin_partition(entry: dict) -> tuple[str, int]:
    topic, partition = entry.get("topic"), entry.get("partition")
    if not isinstance(topic, str) or not isinstance(partition, int) or isinstance(partition, bool):
        raise ValueError(f"{entry} does not name a topic and partition")
    return topic, partition


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
