"""ZkMetadataStore: the cluster image kept in ZooKeeper, in Kafka's layout (``zk_layout``).

Every broker keeps its image current from watches, level-triggered. kazoo's
DataWatch and ChildrenWatch re-arm ZooKeeper's one-shot watches and report the
latest value, not every intermediate one, so a watch firing only means "look
again": the callback carries the znode's current data and version, and the
image is brought to it. Nothing depends on seeing each change.

kazoo calls back on its own threads; each callback hands the value it read to
the broker's event loop with ``loop.call_soon_threadsafe``, so updates are
applied in order on the loop, where all partition state lives, and a value
older than the one held (by the znode's mzxid) is ignored.

What is watched: ``/brokers/ids`` (live brokers), ``/brokers/topics`` and, per
topic, its assignment, its config and each partition's state, ``/controller``,
``/admin/delete_topics`` (for the controller), ``/controlled_shutdown`` (brokers
asking to leave: the controller moves their leaderships, leaders stop adding them to
ISRs, until they are gone from ``/brokers/ids``), ``/config/brokers/*``,
``/config/users/*`` (SCRAM credentials and users' quotas), ``/config/clients/*`` and each
``/config/users/<user>/clients/<client-id>`` (client quotas; those znodes are found by
the ``/config/changes`` notification Kafka writes with them, since a znode that does not
exist yet cannot be listed). A topic is
published to the listeners (the ReplicaManager) once the controller has written
the state of its partitions: a partition without state has no leader yet, and
Metadata answers LEADER_NOT_AVAILABLE for the topic meanwhile, as Kafka does.

Writes follow Kafka's ZooKeeper-mode broker: CreateTopics and CreatePartitions
compute the assignment on the broker that received them and write
``/brokers/topics/<t>`` (the controller then elects leaders), DeleteTopics
writes ``/admin/delete_topics/<t>`` (the controller deletes), config changes
write ``/config/<type>/<name>`` plus a ``/config/changes`` notification. These
admin writes are synchronous ZooKeeper round trips on the event loop (well
under a millisecond on a local ensemble), because the MetadataStore interface
is synchronous; the produce and fetch paths never touch ZooKeeper.

The broker registers ``/brokers/ids/<id>`` as an ephemeral node. After a crash
the previous session's node lingers until that session expires; a restarted
broker waits for it to go (up to the session timeout) instead of failing as
Kafka does, so an operator's restart after kill -9 simply takes a little longer.

A ZooKeeper restart goes unnoticed however long the server is down: the server
restores its sessions from its data dir and times them from its own start, and kazoo
tries again at least every ``RECONNECT_MAX_DELAY_S`` (plus jitter), so it reconnects to
the same session, the registrations and the controller stay, and the
brokers serve what they lead meanwhile (replication and acks=all need no ZooKeeper).
A broker whose own session expires (silent past the timeout: paused, or cut off) is
told so when it reconnects; it registers again under a new session and the
controllership moves on with a higher epoch. Both are tests in
tests/cluster/test_controller_operations.py.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch
from kazoo.retry import KazooRetry

from odradek.metadata import zk_layout as layout
from odradek.metadata.image import (
    BrokerImage,
    IsrUpdate,
    OngoingReassignment,
    PartitionImage,
    TopicImage,
)
from odradek.metadata.partition_change import elect_leader, validate_assignment
from odradek.metadata.replica_assignment import assign_replicas
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
from odradek.metadata.topic_names import INTERNAL_TOPICS
from odradek.metadata.zk_acls import ZkAcls
from odradek.metadata.zk_fence import ControllerFence, ControllerMoved, check_fence, fenced
from odradek.metadata.zk_layout import PartitionState, TopicAssignment
from odradek.metadata.zk_notifications import purge_obsolete_notifications
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.quota.entity import QUOTA_CONFIGS, QuotaEntity
from odradek.security.acl import AccessControlEntry, ResourcePattern

log = logging.getLogger(__name__)

#: The longest wait between two attempts to reach a lost ZooKeeper (kazoo adds up to 40 %
#: jitter). A restarted server times the sessions it restored from its own start, so a broker
#: keeps its session only if it is back within the session timeout; kazoo's default doubles
#: the wait up to an hour, and after a few seconds of outage its next attempt came after the
#: session had expired. ZooKeeper's Java client, Kafka's, tries again within a second.
RECONNECT_MAX_DELAY_S = 1.0


class NotController(KafkaError):
    error_code = ErrorCode.not_controller


class ZooKeeperUnavailable(ConnectionError):
    """No ZooKeeper session could be made within zookeeper.connection.timeout.ms (an OSError,
    so ``odradek serve`` reports it as a start-up failure)."""


class BrokerIdInUse(ConnectionError):
    """``/brokers/ids/<id>`` stayed held by another live session."""


@dataclass(frozen=True, slots=True)
class ZkSettings:
    """``zookeeper.connect`` (``host:port[,host:port...][/chroot]``) and its timeouts."""

    connect: str
    session_timeout_ms: int = 18000
    connection_timeout_ms: int | None = None


def new_cluster_id() -> str:
    """Kafka's cluster id form: a random UUID in URL-safe base64, 22 characters."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class ZkMetadataStore(MetadataStore):
    """The image of a ZooKeeper-backed cluster as one broker sees it."""

    def __init__(
        self,
        settings: ZkSettings,
        security_protocols: Mapping[str, str],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        super().__init__()
        self.settings = settings
        #: Known once ``start`` is given this broker's registration.
        self.node_id = -1
        self._security_protocols = dict(security_protocols)
        self._loop = loop
        self.client = KazooClient(
            hosts=settings.connect,
            timeout=settings.session_timeout_ms / 1000,
            connection_retry=KazooRetry(max_tries=-1, max_delay=RECONNECT_MAX_DELAY_S),
        )
        self._cluster_id = ""
        self._broker: BrokerImage | None = None
        #: Called on the loop after every applied change (the controller listens).
        self.change_listeners: list[Callable[[], None]] = []
        # -- the image, touched on the loop only --
        self._brokers: dict[int, BrokerImage] = {}
        #: node id -> the czxid of its registration znode: Kafka's broker epoch in ZooKeeper mode.
        self._broker_epochs: dict[int, int] = {}
        #: This broker's own broker epoch, known once registered (before its watch reports it).
        self.own_broker_epoch = -1
        self._controller_id = -1
        self._topic_names: set[str] = set()
        #: topic -> (assignment, znode version, mzxid, czxid)
        self._assignments: dict[str, tuple[TopicAssignment, int, int, int]] = {}
        #: (topic, partition) -> (state, znode version, mzxid, czxid)
        self._states: dict[tuple[str, int], tuple[PartitionState, int, int, int]] = {}
        self._topic_configs: dict[str, tuple[dict[str, str], int]] = {}
        self._broker_configs: dict[str, tuple[dict[str, str], int]] = {}
        #: User entity (its znode name: sanitized, or <default>) -> (its /config/users/<user>
        #: configs, version): SCRAM credentials and the user's quotas among them.
        self._user_configs: dict[str, tuple[dict[str, str], int]] = {}
        #: ``clients/<c>`` and ``users/<u>/clients/<c>`` -> (their configs, version): quotas.
        self._client_configs: dict[str, tuple[dict[str, str], int]] = {}
        #: The sequence number of the last /config/changes notification looked at.
        self._last_change = -1
        self._deleting: set[str] = set()
        #: The children of ``/controlled_shutdown``: brokers that asked to leave.
        self._shutdown_requests: set[int] = set()
        #: Brokers in controlled shutdown -> the broker epoch they asked under. One stays here
        #: after its request is gone until that registration goes too (``_apply_shutting_down``).
        self._shutting_down: dict[int, int] = {}
        #: /admin/reassign_partitions and /admin/preferred_replica_election -> (data, version,
        #: czxid), None while absent: requests of the ZooKeeper-era tools, for the controller.
        self._admin_requests: dict[str, tuple[bytes, int, int] | None] = {}
        #: path -> (czxid, version) of this broker's last write there: older reports are stale.
        self._admin_request_floors: dict[str, tuple[int, int]] = {}
        self._pending: set[str] = set()
        self._published = asyncio.Event()
        # -- watch bookkeeping, touched on kazoo's threads (and the loop while starting) --
        self._watch_lock = threading.Lock()
        self._watched: set[str] = set()
        self._closed = False
        #: The fence of this broker's controller while it is the active one (set by it).
        self.controller_fence: ControllerFence | None = None
        #: /kafka-acl and its change notifications (zk_acls).
        self._zk_acls = ZkAcls(self.client, self._post, self._apply_acls)

    # -- life cycle --------------------------------------------------------------------------

    def connect(self, cluster_id: str | None) -> str:
        """Open the session, create Kafka's top-level paths, agree on the cluster id.

        ``/cluster/id`` wins: the first broker of a new cluster writes its id (``cluster_id``
        or a new one); later brokers read it. Blocking, at start-up only.
        """
        hosts, slash, chroot = self.settings.connect.partition("/")
        if slash and chroot.strip("/"):
            # As Kafka, create the chroot first (a chrooted session cannot).
            root = KazooClient(hosts=hosts, timeout=self.settings.session_timeout_ms / 1000)
            self._start_session(root)
            try:
                root.ensure_path("/" + chroot.strip("/"))
            finally:
                root.stop()
                root.close()
        self._start_session(self.client)
        for path in layout.PERSISTENT_PATHS:
            self.client.ensure_path(path)
        self._zk_acls.ensure_paths()
        try:
            self.client.create(
                layout.CLUSTER_ID,
                layout.encode_cluster_id(cluster_id or new_cluster_id()),
                makepath=True,
            )
        except NodeExistsError:
            pass
        self._cluster_id = layout.decode_cluster_id(self.client.get(layout.CLUSTER_ID)[0])
        return self._cluster_id

    def _start_session(self, client: KazooClient) -> None:
        timeout_ms = self.settings.connection_timeout_ms or self.settings.session_timeout_ms
        try:
            client.start(timeout=timeout_ms / 1000)
        except KazooTimeoutError:
            client.close()
            raise ZooKeeperUnavailable(
                f"cannot connect to ZooKeeper at zookeeper.connect={self.settings.connect} "
                f"within zookeeper.connection.timeout.ms={timeout_ms}"
            ) from None

    async def start(self, broker: BrokerImage) -> None:
        """Register this broker and follow the cluster; returns once the image is loaded."""
        self._broker = broker
        self.node_id = broker.node_id
        await asyncio.to_thread(self._register)
        self.client.add_listener(self._on_session_state)
        ChildrenWatch(self.client, layout.BROKER_IDS, self._watch_brokers)
        DataWatch(self.client, layout.CONTROLLER, self._watch_controller)
        ChildrenWatch(self.client, layout.DELETE_TOPICS, self._watch_deleting)
        ChildrenWatch(self.client, layout.CONTROLLED_SHUTDOWN, self._watch_shutting_down)
        ChildrenWatch(self.client, f"{layout.CONFIG}/brokers", self._watch_broker_config_names)
        ChildrenWatch(self.client, layout.TOPICS, self._watch_topic_names)
        ChildrenWatch(self.client, layout.USER_CONFIGS, self._watch_user_names)
        ChildrenWatch(self.client, layout.CLIENT_CONFIGS, self._watch_client_names)
        ChildrenWatch(self.client, layout.CONFIG_CHANGES, self._watch_config_changes)
        await asyncio.to_thread(self._watch_user_client_configs)
        for path in (layout.REASSIGN_PARTITIONS, layout.PREFERRED_REPLICA_ELECTION):
            DataWatch(self.client, path, partial(self._watch_admin_request, path))
        await asyncio.to_thread(self._zk_acls.load_and_follow)
        # Every value read while the watches were set is queued on the loop before this.
        barrier = self._loop.create_future()
        self._loop.call_soon_threadsafe(barrier.set_result, None)
        await barrier

    def close(self) -> None:
        """End the session: this broker's ephemeral nodes go at once."""
        self._closed = True
        try:
            self.client.stop()
        finally:
            self.client.close()

    def _register(self) -> None:
        """Create ``/brokers/ids/<id>``, waiting out a previous session's node if need be."""
        assert self._broker is not None
        path = layout.broker_path(self.node_id)
        data = layout.encode_broker(self._broker, self._security_protocols)
        timeout_ms = self.settings.session_timeout_ms + (
            self.settings.connection_timeout_ms or self.settings.session_timeout_ms
        )
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            try:
                self.client.create(path, data, ephemeral=True)
                self.own_broker_epoch = self.client.get(path)[1].czxid
                return
            except NodeExistsError:
                try:
                    _, stat = self.client.get(path)
                except NoNodeError:
                    continue
                if stat.ephemeralOwner == self.client.client_id[0]:
                    self.own_broker_epoch = stat.czxid
                    return
                if time.monotonic() > deadline:
                    raise BrokerIdInUse(
                        f"{path} is held by another ZooKeeper session (is broker "
                        f"{self.node_id} running elsewhere?)"
                    ) from None
                gone = threading.Event()
                if self.client.exists(path, watch=lambda _event, gone=gone: gone.set()):
                    gone.wait(1.0)

    def request_controlled_shutdown(self) -> None:
        """Ask the controller to move this broker's leaderships away: the ephemeral
        ``/controlled_shutdown/<id>``, gone with the session when the broker exits."""
        try:
            self.client.create(layout.controlled_shutdown_path(self.node_id), ephemeral=True)
        except NodeExistsError:
            pass

    def _on_session_state(self, state: str) -> None:
        # On kazoo's connection thread: never block here.
        if state == KazooState.LOST and not self._closed:
            self._post(self._on_session_lost)

    def _on_session_lost(self) -> None:
        log.warning("ZooKeeper session of broker %d expired; registering again", self.node_id)
        self._notify()
        task = asyncio.ensure_future(asyncio.to_thread(self._register_when_connected))
        task.add_done_callback(_log_failure)

    def _register_when_connected(self) -> None:
        while not self._closed and not self.client.connected:
            time.sleep(0.1)
        if not self._closed:
            self._register()

    # -- watches: kazoo threads read, the loop applies ---------------------------------------

    def _post(self, fn: Callable, *args: object) -> None:
        if not self._closed:
            self._loop.call_soon_threadsafe(fn, *args)

    def _watch_once(self, path: str) -> bool:
        """True the first time ``path`` is seen: the caller sets its watch (kept for the
        store's life, so a topic deleted and created again is followed by the same watch)."""
        with self._watch_lock:
            if path in self._watched:
                return False
            self._watched.add(path)
            return True

    def _watch_brokers(self, children: list[str]) -> None:
        brokers, epochs = {}, {}
        for child in children:
            try:
                data, stat = self.client.get(layout.broker_path(int(child)))
            except (NoNodeError, ValueError):
                continue
            brokers[int(child)] = layout.decode_broker(int(child), data)
            epochs[int(child)] = stat.czxid
        self._post(self._apply_brokers, brokers, epochs)

    def _watch_controller(self, data: bytes | None, stat, event=None) -> None:
        self._post(self._apply_controller, layout.decode_controller(data) if data else -1)

    def _watch_deleting(self, children: list[str]) -> None:
        self._post(self._apply_deleting, set(children))

    def _watch_admin_request(self, path: str, data: bytes | None, stat, event=None) -> None:
        held = (data or b"", stat.version, stat.czxid) if stat is not None else None
        self._post(self._apply_admin_request, path, held)

    def _watch_shutting_down(self, children: list[str]) -> None:
        self._post(self._apply_shutting_down, {int(c) for c in children if c.isdigit()})

    def _watch_broker_config_names(self, children: list[str]) -> None:
        for name in children:
            path = f"{layout.CONFIG}/brokers/{name}"
            if self._watch_once(path):
                resource = "" if name == layout.DEFAULT_BROKER_ENTITY else name
                DataWatch(self.client, path, self._config_watcher(self._broker_configs, resource))

    def _watch_user_names(self, children: list[str]) -> None:
        for entity in children:
            path = f"{layout.USER_CONFIGS}/{entity}"
            if self._watch_once(path):
                DataWatch(self.client, path, self._config_watcher(self._user_configs, entity))

    def _watch_client_names(self, children: list[str]) -> None:
        for entity in children:
            self._watch_client_config(f"clients/{entity}")

    def _watch_client_config(self, entity_path: str) -> None:
        path = f"{layout.CONFIG}/{entity_path}"
        if self._watch_once(path):
            DataWatch(self.client, path, self._config_watcher(self._client_configs, entity_path))

    def _watch_user_client_configs(self) -> None:
        """The ``users/<u>/clients/<c>`` configs there are (blocking, at start-up); later ones
        are found through their change notifications (``_watch_config_changes``)."""
        for user in self.client.get_children(layout.USER_CONFIGS):
            try:
                clients = self.client.get_children(f"{layout.USER_CONFIGS}/{user}/clients")
            except NoNodeError:
                continue
            for client in clients:
                self._watch_client_config(f"users/{user}/clients/{client}")

    def _watch_config_changes(self, children: list[str]) -> None:
        """Kafka's config change notifications name the entity changed: a user's client
        config znode cannot be watched before it exists, so its notification brings the
        watch. The notifications there at start are skipped: the start-up scan found their
        znodes (it runs after this watch is set, so nothing falls between the two)."""
        prefix = layout.CONFIG_CHANGE_PREFIX
        numbers = sorted(int(c[len(prefix) :]) for c in children if c.startswith(prefix))
        if self._last_change < 0:
            self._last_change = numbers[-1] if numbers else 0
            return
        for number in numbers:
            if number <= self._last_change:
                continue
            self._last_change = number
            try:
                data, _ = self.client.get(f"{layout.CONFIG_CHANGES}/{prefix}{number:010d}")
            except NoNodeError:
                continue
            entity_path = layout.decode_config_change(data)
            if entity_path.startswith("users/") and "/clients/" in entity_path:
                self._watch_client_config(entity_path)

    def _watch_topic_names(self, children: list[str]) -> None:
        self._post(self._apply_topic_names, set(children))
        for topic in children:
            path = layout.topic_path(topic)
            if self._watch_once(path):
                DataWatch(self.client, path, partial(self._watch_assignment, topic))
                DataWatch(
                    self.client,
                    layout.topic_config_path(topic),
                    self._config_watcher(self._topic_configs, topic),
                )

    def _watch_assignment(self, topic: str, data: bytes | None, stat, event=None) -> None:
        assignment = layout.decode_assignment(data) if data else None
        if assignment is not None:
            for p in assignment.replicas:
                path = layout.state_path(topic, p)
                if self._watch_once(path):
                    DataWatch(self.client, path, partial(self._watch_state, topic, p))
        self._post(self._apply_assignment, topic, assignment, stat)

    def _watch_state(
        self, topic: str, partition: int, data: bytes | None, stat, event=None
    ) -> None:
        state = layout.decode_partition_state(data) if data else None
        self._post(self._apply_state, topic, partition, state, stat)

    def _config_watcher(self, target: dict, name: str) -> Callable:
        def watch(data: bytes | None, stat, event=None) -> None:
            self._post(self._apply_config, target, name, layout.decode_config(data), stat)

        return watch

    # -- applying on the loop -----------------------------------------------------------------

    def _notify(self) -> None:
        for listener in self.change_listeners:
            listener()

    def _apply_brokers(self, brokers: dict[int, BrokerImage], epochs: dict[int, int]) -> None:
        if brokers != self._brokers or epochs != self._broker_epochs:
            self._brokers, self._broker_epochs = brokers, epochs
            self._shutting_down = self._still_shutting_down()
            self._notify()

    def _apply_controller(self, controller_id: int) -> None:
        self._controller_id = controller_id
        self._notify()

    def _apply_deleting(self, names: set[str]) -> None:
        self._deleting = names
        self._notify()

    def _apply_admin_request(self, path: str, held: tuple[bytes, int, int] | None) -> None:
        floor = self._admin_request_floors.get(path)
        if held is not None and floor is not None and (held[2], held[1]) < floor:
            return  # reported before the controller's own write, which is held already
        if self._admin_requests.get(path) != held:
            self._admin_requests[path] = held
            self._notify()

    def _apply_shutting_down(self, ids: set[int]) -> None:
        """A broker's request and its registration are ephemerals of the same session and go
        together, but two watches report them, in either order. So a broker whose request is
        gone stays in controlled shutdown while the registration it asked under is still
        held, as Kafka's controller keeps it until the broker is dead: in between it would
        look live and serving, and a leader would put the exiting broker back into its ISRs
        (then wait for it to count it out again), a controller could elect it."""
        self._shutdown_requests = ids
        shutting_down = self._still_shutting_down()
        if shutting_down != self._shutting_down:
            self._shutting_down = shutting_down
            self._notify()

    def _still_shutting_down(self) -> dict[int, int]:
        """The brokers asking now, and those that asked under a registration still held."""
        asked = {n: self._broker_epochs.get(n, -1) for n in self._shutdown_requests}
        leaving = {
            n: epoch
            for n, epoch in self._shutting_down.items()
            if epoch != -1 and self._broker_epochs.get(n) == epoch
        }
        return {**leaving, **asked}

    def _apply_topic_names(self, names: set[str]) -> None:
        gone = self._topic_names - names
        self._topic_names = names
        for topic in gone:
            self._assignments.pop(topic, None)
            self._reconcile(topic)
        self._notify()

    @staticmethod
    def _newer(held: int | None, stat) -> bool:
        """A value read with ``stat`` (None: the znode is gone) replaces one read at ``held``."""
        return stat is None or held is None or stat.mzxid >= held

    def _apply_assignment(self, topic: str, assignment: TopicAssignment | None, stat) -> None:
        held = self._assignments.get(topic)
        if not self._newer(held[2] if held else None, stat):
            return
        if assignment is None:
            self._assignments.pop(topic, None)
        else:
            self._assignments[topic] = (assignment, stat.version, stat.mzxid, stat.czxid)
        self._reconcile(topic)
        self._notify()

    def _apply_state(self, topic: str, partition: int, state: PartitionState | None, stat) -> None:
        key = (topic, partition)
        held = self._states.get(key)
        if not self._newer(held[2] if held else None, stat):
            return
        if state is None:
            self._states.pop(key, None)
        else:
            self._states[key] = (state, stat.version, stat.mzxid, stat.czxid)
        self._reconcile(topic)
        self._notify()

    def _apply_config(self, target: dict, name: str, configs: dict[str, str], stat) -> None:
        held = target.get(name)
        if not self._newer(held[1] if held else None, stat):
            return
        if stat is None:
            target.pop(name, None)
        else:
            target[name] = (configs, stat.mzxid)
        if target is self._topic_configs:
            self._reconcile(name)
        elif target is self._broker_configs:
            self._publish_broker_configs()
        else:
            self._publish_client_quotas()
        self._notify()

    def _image(self, topic: str) -> TopicImage | None:
        """The topic as published: every partition of the assignment once each has its
        leader decision; until then the image published before (or none), so that no
        client sees a topic with some of its partitions missing (a consumer assigned a
        missing partition would wait for its next periodic metadata refresh)."""
        held = self._assignments.get(topic)
        if held is None or held[0].topic_id is None:
            return None
        assignment, topic_id = held[0], held[0].topic_id
        before = self._topics.get(topic)
        shown = len(before.partitions) if before and before.topic_id == assignment.topic_id else 0
        partitions: list[PartitionImage] = []
        for p in range(len(assignment.replicas)):
            state = self._states.get((topic, p))
            if state is not None and state[3] < held[3]:
                state = None  # left from an earlier topic of that name, deleted since
            if state is None or p not in assignment.replicas:
                if p < shown:  # a state znode went away: the topic is being deleted
                    return before
                partitions = partitions[:shown]  # partitions being added: not shown yet
                break
            s = state[0]
            partitions.append(
                PartitionImage(p, s.leader, s.leader_epoch, assignment.replicas[p], s.isr, state[1])
            )
        if not partitions:
            return None
        configs = self._topic_configs.get(topic)
        return TopicImage(
            topic,
            topic_id,
            tuple(partitions),
            dict(configs[0]) if configs else {},
            internal=topic in INTERNAL_TOPICS,
        )

    def _reconcile(self, topic: str) -> None:
        before, after = self._topics.get(topic), self._image(topic)
        if before == after:
            return
        if before is not None and (after is None or after.topic_id != before.topic_id):
            del self._topics[topic]
            self._topic_ids.pop(before.topic_id, None)
            self._publish(before, None)
            before = None
        if after is not None:
            self._topics[topic] = after
            self._topic_ids[after.topic_id] = after
            self._publish(before, after)
        self._published.set()
        self._published = asyncio.Event()

    # -- a leader's ISR changes -------------------------------------------------------------------

    def broker_epoch(self, node_id: int) -> int:
        if node_id == self.node_id and self.own_broker_epoch >= 0:
            return self.own_broker_epoch
        return self._broker_epochs.get(node_id, -1)

    async def alter_isr(
        self, topic: str, partition: int, update: IsrUpdate
    ) -> PartitionImage | ErrorCode:
        """Write the ISR as Kafka's ZooKeeper-mode leader did: a conditional update of the
        partition's state znode on the version the leader knows (its partition epoch).

        Kafka's leader also created an ``/isr_change_notification`` entry so that the
        controller would broadcast the new ISR to every broker; here every broker watches
        the state znodes itself, so the write alone reaches them. A version mismatch whose
        znode already holds the proposed ISR under this leader epoch (a retry of a write
        whose answer was lost) is a success, as Kafka's conditional-update checker has it.
        A new ISR naming a broker in controlled shutdown is INELIGIBLE_REPLICA (KIP-841): the
        controller has just taken it out, and its fetches until it exits must not put it back.
        """
        replicas = self._assignments.get(topic)
        live = set(self._brokers) | {self.node_id}
        for member, epoch in zip(update.new_isr, update.broker_epochs):
            if member != update.leader_id and (
                member not in live
                or member in self._shutting_down
                or (epoch != -1 and self.broker_epoch(member) != epoch)
            ):
                return ErrorCode.ineligible_replica
        if replicas is None:
            return ErrorCode.unknown_topic_or_partition
        return await asyncio.to_thread(self._write_isr, topic, partition, update)

    def _write_isr(
        self, topic: str, partition: int, update: IsrUpdate
    ) -> PartitionImage | ErrorCode:
        path = layout.state_path(topic, partition)
        try:
            data, stat = self.client.get(path)
            current = layout.decode_partition_state(data)
            if current.leader != update.leader_id or current.leader_epoch != update.leader_epoch:
                return ErrorCode.fenced_leader_epoch
            if stat.version != update.partition_epoch:
                if current.isr == update.new_isr:
                    return self._committed(topic, partition, current, stat.version)
                return ErrorCode.invalid_update_version
            new = replace(current, isr=update.new_isr)
            try:
                stat = self.client.set(
                    path, layout.encode_partition_state(new), version=stat.version
                )
            except BadVersionError:
                return ErrorCode.invalid_update_version
        except NoNodeError:
            return ErrorCode.unknown_topic_or_partition
        except Exception as exc:  # the session or connection: the leader tries again
            log.warning("ISR update of %s-%d failed: %r", topic, partition, exc)
            return ErrorCode.request_timed_out
        return self._committed(topic, partition, new, stat.version)

    def _committed(
        self, topic: str, partition: int, state: PartitionState, version: int
    ) -> PartitionImage:
        held = self._assignments.get(topic)
        replicas = held[0].replicas.get(partition, ()) if held else ()
        return PartitionImage(
            partition, state.leader, state.leader_epoch, replicas, state.isr, version
        )

    # -- the controller's view ------------------------------------------------------------------

    def live_broker_ids(self) -> set[int]:
        return set(self._brokers)

    def assignments(self) -> dict[str, TopicAssignment]:
        return {t: held[0] for t, held in self._assignments.items()}

    def assignments_with_versions(self) -> dict[str, tuple[TopicAssignment, int]]:
        return {t: (held[0], held[1]) for t, held in self._assignments.items()}

    def partition_states(self) -> dict[tuple[str, int], tuple[PartitionState, int]]:
        return {key: (held[0], held[1]) for key, held in self._states.items()}

    def shutting_down_broker_ids(self) -> set[int]:
        """Brokers in controlled shutdown: live, but leading and joining ISRs no more."""
        return set(self._shutting_down) & set(self._brokers)

    def admin_request(self, path: str) -> tuple[bytes, int] | None:
        """The data and version of a tool-written admin znode (``layout.REASSIGN_PARTITIONS``,
        ``layout.PREFERRED_REPLICA_ELECTION``), None while there is none."""
        held = self._admin_requests.get(path)
        return None if held is None else (held[0], held[1])

    def admin_request_written(self, path: str, data: bytes | None, version: int) -> None:
        """Hold what the controller just wrote over ``version`` there (None: deleted) at once,
        as the watch will report it: a reconciliation in between must not act on the old
        request again, and a report from before the write is ignored."""
        held = self._admin_requests.get(path)
        if held is None or held[1] != version:
            return
        czxid = held[2]
        self._admin_request_floors[path] = (czxid, version + 1)
        self._admin_requests[path] = (data, version + 1, czxid) if data is not None else None

    def topics_to_delete(self) -> set[str]:
        return set(self._deleting)

    def topic_config_overrides(self, topic: str) -> dict[str, str]:
        held = self._topic_configs.get(topic)
        return dict(held[0]) if held else {}

    # -- MetadataStore ------------------------------------------------------------------------

    @property
    def cluster_id(self) -> str:
        return self._cluster_id

    @property
    def controller_id(self) -> int:
        return self._controller_id

    def brokers(self) -> list[BrokerImage]:
        return [self._brokers[node] for node in sorted(self._brokers)]

    def pending_topics(self) -> set[str]:
        """Reserved here, or written to ZooKeeper and still waiting for the controller."""
        return self._pending | {t for t in self._assignments if t not in self._topics}

    def new_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        configs: Mapping[str, str] | None = None,
        internal: bool = False,
        assignment: Sequence[Sequence[int]] | None = None,
    ) -> TopicImage:
        if name in self._topics or name in self._pending or name in self._assignments:
            raise TopicExists(f"Topic '{name}' already exists.")
        if assignment is not None:
            replicas = {p: tuple(r) for p, r in enumerate(assignment)}
        elif replication_factor < 1:
            raise InvalidReplicationFactor("Replication factor must be larger than 0.")
        else:
            replicas = assign_replicas(self.brokers(), partitions, replication_factor)
        self._pending.add(name)
        return TopicImage(
            name=name,
            topic_id=uuid.uuid4(),
            partitions=self._proposed(replicas),
            configs=dict(configs or {}),
            internal=internal,
        )

    def _proposed(self, assignment: dict[int, tuple[int, ...]]) -> tuple[PartitionImage, ...]:
        """Partitions as the controller will start them while every replica is live."""
        return tuple(
            PartitionImage(p, replicas[0], 0, replicas, replicas)
            for p, replicas in sorted(assignment.items())
        )

    def commit_new_topic(self, topic: TopicImage) -> TopicImage:
        """Write the topic's config and assignment; the controller elects its leaders."""
        self._pending.discard(topic.name)
        tx = self.client.transaction()
        config_path = layout.topic_config_path(topic.name)
        if self.client.exists(config_path) is None:
            tx.create(config_path, layout.encode_config(topic.configs))
        else:
            tx.set_data(config_path, layout.encode_config(topic.configs))
        tx.create(
            layout.topic_path(topic.name),
            layout.encode_assignment(
                topic.topic_id, {p.partition: p.replicas for p in topic.partitions}
            ),
        )
        results = tx.commit()
        if any(isinstance(r, NodeExistsError) for r in results):
            raise TopicExists(f"Topic '{topic.name}' already exists.")
        _raise_failure(results)
        return topic

    def abandon_new_topic(self, name: str) -> None:
        self._pending.discard(name)

    async def await_published(self, topic: TopicImage, timeout_s: float = 30.0) -> TopicImage:
        """Wait until the watches bring ``topic`` (this id, at least these partitions) back."""
        deadline = self._loop.time() + timeout_s
        while True:
            current = self._topics.get(topic.name)
            if (
                current is not None
                and current.topic_id == topic.topic_id
                and len(current.partitions) >= len(topic.partitions)
            ):
                return current
            remaining = deadline - self._loop.time()
            if remaining <= 0:
                return topic
            try:
                await asyncio.wait_for(self._published.wait(), remaining)
            except TimeoutError:
                return topic

    def delete_topic(self, name: str) -> TopicImage:
        """Queue the topic for the controller (``/admin/delete_topics/<t>``), as Kafka does."""
        before = self._require(name)
        try:
            self.client.create(layout.delete_topic_path(name))
        except NodeExistsError:
            pass
        return before

    def grown_topic(self, name: str, total: int) -> TopicImage:
        before = self._require(name)
        current = len(before.partitions)
        if total <= current:
            raise InvalidPartitions(
                f"Topic currently has {current} partitions, which is higher than or "
                f"equal to the requested {total}."
            )
        # Kafka continues the assignment from the broker holding partition 0's first replica.
        brokers = self.brokers()
        first = before.partitions[0].replicas[0]
        start = next((i for i, b in enumerate(brokers) if b.node_id >= first), 0)
        added = assign_replicas(
            brokers,
            total - current,
            before.replication_factor,
            fixed_start_index=start,
            start_partition=current,
        )
        return replace(before, partitions=before.partitions + self._proposed(added))

    def commit_partitions(self, grown: TopicImage) -> TopicImage:
        """Write the grown assignment, conditional on the one it was computed from."""
        held = self._assignments.get(grown.name)
        if held is None or held[0].topic_id != grown.topic_id:
            raise UnknownTopic(
                f"Topic '{grown.name}' was deleted while its partitions were being created."
            )
        assignment, version = held[0], held[1]
        if len(grown.partitions) <= len(assignment.replicas):
            raise InvalidPartitions(
                f"Topic currently has {len(assignment.replicas)} partitions, which is higher "
                f"than or equal to the requested {len(grown.partitions)}."
            )
        replicas = {p.partition: p.replicas for p in grown.partitions}
        replicas.update(assignment.replicas)
        try:
            self.client.set(
                layout.topic_path(grown.name),
                layout.encode_assignment(
                    grown.topic_id, replicas, assignment.adding, assignment.removing
                ),
                version=version,
            )
        except BadVersionError:
            raise InvalidPartitions(
                f"The partitions of topic '{grown.name}' changed meanwhile; retry."
            ) from None
        except NoNodeError:
            raise UnknownTopic(f"Topic '{grown.name}' does not exist.") from None
        return grown

    def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> TopicImage:
        self._require(name)
        self._write_config(self._topic_configs, "topics", name, name, dict(configs))
        self._reconcile(name)
        return self._require(name)

    def broker_configs(self, resource: str = "") -> dict[str, str]:
        held = self._broker_configs.get(resource)
        return dict(held[0]) if held else {}

    def set_broker_configs(self, configs: Mapping[str, str], resource: str = "") -> None:
        entity = resource or layout.DEFAULT_BROKER_ENTITY
        self._write_config(self._broker_configs, "brokers", entity, resource, dict(configs))

    def scram_credentials(self) -> dict[str, dict[str, str]]:
        users = {}
        for entity, (configs, _version) in self._user_configs.items():
            credentials = {k: v for k, v in configs.items() if k in layout.SCRAM_CONFIG_KEYS}
            if credentials and entity != layout.DEFAULT_BROKER_ENTITY:
                users[layout.desanitize(entity)] = credentials
        return users

    def set_scram_credentials(self, user: str, credentials: Mapping[str, str]) -> None:
        """Kafka's ZooKeeper mode: the credentials are keys of the user's entity config, beside
        any other user configs (quotas), which are kept."""
        entity = layout.sanitize(user)
        held = self._user_configs.get(entity)
        kept = held[0] if held else {}
        configs = {k: v for k, v in kept.items() if k not in layout.SCRAM_CONFIG_KEYS}
        configs.update(credentials)
        self._write_config(self._user_configs, "users", entity, entity, configs)

    def client_quotas(self) -> dict[QuotaEntity, dict[str, float]]:
        held = [(f"users/{e}", c) for e, (c, _) in self._user_configs.items()]
        held += [(path, c) for path, (c, _) in self._client_configs.items()]
        quotas = {}
        for path, configs in held:
            entity = layout.parse_quota_entity_path(path)
            values = layout.decode_quota_configs(configs)
            if entity is not None and values:
                quotas[entity] = values
        return quotas

    def set_client_quotas(self, entity: QuotaEntity, quotas: Mapping[str, float]) -> None:
        """The entity's quota keys are replaced; its other keys (a user's SCRAM credentials)
        are kept, as Kafka's ZooKeeper mode keeps them in the same config."""
        path = layout.quota_entity_path(entity)
        entity_type, _, name = path.partition("/")
        user_only = entity.client_id is None
        target, key = (self._user_configs, name) if user_only else (self._client_configs, path)
        held = target.get(key)
        configs = {k: v for k, v in (held[0] if held else {}).items() if k not in QUOTA_CONFIGS}
        configs.update(layout.encode_quota_configs(quotas))
        self._write_config(target, entity_type, name, key, configs)

    def update_acls(
        self,
        pattern: ResourcePattern,
        add: Iterable[AccessControlEntry] = (),
        remove: Iterable[AccessControlEntry] = (),
    ) -> frozenset[AccessControlEntry]:
        """AclAuthorizer's conditional write of ``/kafka-acl``; applied here at once (the
        change notification then brings every broker, this one too, the same entries)."""
        after = self._zk_acls.update(pattern, add, remove)
        self._apply_acls(pattern, after)
        return after

    def _write_config(
        self, target: dict, entity_type: str, entity: str, key: str, configs: dict[str, str]
    ) -> None:
        """Kafka's setOrCreateEntityConfigs plus a change notification; applied here at once
        (the watch then brings the same version, which is ignored)."""
        path = f"{layout.CONFIG}/{entity_type}/{entity}"
        data = layout.encode_config(configs)
        try:
            stat = self.client.set(path, data)
        except NoNodeError:
            self.client.create(path, data, makepath=True)
            stat = self.client.exists(path)
        self.client.create(
            f"{layout.CONFIG_CHANGES}/{layout.CONFIG_CHANGE_PREFIX}",
            layout.encode_config_change(entity_type, entity),
            sequence=True,
        )
        purge_obsolete_notifications(
            self.client, layout.CONFIG_CHANGES, self.client.get_children(layout.CONFIG_CHANGES)
        )
        if stat is not None:
            self._apply_config(target, key, configs, stat)

    # -- the controller's admin operations ---------------------------------------------------

    def elect_leaders(
        self, election_type: ElectionType, partitions: Iterable[TopicPartitionKey] | None
    ) -> dict[TopicPartitionKey, KafkaError | None]:
        """As Kafka's ZooKeeper-mode controller: only the active controller elects (others
        answer NOT_CONTROLLER per partition, as ``KafkaController.electLeaders``); each
        election is a fenced write conditional on the state's version."""
        if partitions is None:
            partitions = [
                (t.name, p.partition) for t in self._topics.values() for p in t.partitions
            ]
        alive = set(self._brokers)
        results: dict[TopicPartitionKey, KafkaError | None] = {}
        for key in partitions:
            try:
                results[key] = None
                self._elect(key, election_type, alive)
            except KafkaError as e:
                results[key] = e
        return results

    def _elect(self, key: TopicPartitionKey, election_type: ElectionType, alive: set[int]) -> None:
        name, index = key
        topic = self._topics.get(name)
        if topic is None or not 0 <= index < len(topic.partitions):
            raise UnknownTopic(f"Partition {name}-{index} does not exist.")
        fence = self.controller_fence
        if fence is None:
            raise NotController(f"Broker {self.node_id} is not the controller.")
        # Decided on the state znode as it is now, not on the watched copy: leaders write their
        # ISR changes there themselves, so another broker (whose metadata the client has read)
        # may see a replica back in the ISR before this controller's watch brings it. Kafka's
        # controller never lagged its brokers (it sent them every ISR change itself).
        path = layout.state_path(name, index)
        try:
            data, stat = self.client.get(path)
        except NoNodeError:
            raise UnknownTopic(f"Partition {name}-{index} does not exist.") from None
        current = layout.decode_partition_state(data)
        partition = replace(
            topic.partitions[index],
            leader=current.leader,
            leader_epoch=current.leader_epoch,
            isr=current.isr,
            partition_epoch=stat.version,
        )
        after = elect_leader(partition, election_type, alive)
        state = PartitionState(after.leader, after.leader_epoch, after.isr, fence.epoch)
        self._controller_write(fence, [(path, layout.encode_partition_state(state), stat.version)])

    def _controller_write(
        self, fence: ControllerFence, writes: Sequence[tuple[str, bytes, int]]
    ) -> None:
        """Fenced writes of (path, data, expected version) in one multi-op, for the admin
        operations the active controller serves; NOT_CONTROLLER when a check fails (the
        client retries, by then with the newer state or at the new controller)."""
        tx = fenced(self.client, fence)
        for path, data, version in writes:
            tx.set_data(path, data, version)
        results = tx.commit()
        try:
            check_fence(results)
        except ControllerMoved:
            raise NotController("Another broker was elected controller.") from None
        if any(isinstance(r, Exception) for r in results):
            raise NotController(f"{writes[-1][0]} changed meanwhile; retry.")

    def alter_partition_reassignments(
        self,
        targets: Mapping[TopicPartitionKey, Sequence[int] | None],
        allow_replication_factor_change: bool = True,
    ) -> dict[TopicPartitionKey, KafkaError | None]:
        """AlterPartitionReassignments (``reassign``); as Kafka, the latest reassignment of a
        partition wins, so one a tool asked for in ``/admin/reassign_partitions`` is dropped
        from there."""
        results = self.reassign(targets, allow_replication_factor_change)
        self._drop_admin_reassignments({key for key, error in results.items() if error is None})
        return results

    def _drop_admin_reassignments(self, keys: set[TopicPartitionKey]) -> None:
        held = self._admin_requests.get(layout.REASSIGN_PARTITIONS)
        fence = self.controller_fence
        if held is None or fence is None or not keys:
            return
        try:
            requested = layout.decode_reassign_partitions(held[0])
        except ValueError:
            return  # the controller deletes it
        remaining = {key: replicas for key, replicas in requested.items() if key not in keys}
        if len(remaining) == len(requested):
            return
        data = layout.encode_reassign_partitions(remaining) if remaining else None
        tx = fenced(self.client, fence)
        if data is not None:
            tx.set_data(layout.REASSIGN_PARTITIONS, data, held[1])
        else:
            tx.delete(layout.REASSIGN_PARTITIONS, held[1])
        results = tx.commit()
        if any(isinstance(r, Exception) for r in results):
            log.warning(
                "%s changed meanwhile: partitions reassigned through the API stay listed there",
                layout.REASSIGN_PARTITIONS,
            )
        else:
            self.admin_request_written(layout.REASSIGN_PARTITIONS, data, held[1])

    def reassign(
        self,
        targets: Mapping[TopicPartitionKey, Sequence[int] | None],
        allow_replication_factor_change: bool = True,
    ) -> dict[TopicPartitionKey, KafkaError | None]:
        """Kafka's ZooKeeper-mode controller (KIP-455): checked as Kafka checks them, then
        recorded in the topic znode together with a leader epoch bump of the partition (so
        its replicas learn of the new replica set), in one fenced multi-op conditional on
        both znodes' versions.

        A target moving data makes the replicas the target followed by the original ones
        not in it, with ``adding_replicas``/``removing_replicas`` saying which are which;
        the new replicas start following, and the controller finishes the move once they
        are in sync (``controller.completed_reassignments``). A target replacing one under
        way starts from the original replicas again. A null target cancels: the original
        replicas come back, and the controller drops the added ones from the ISR. A target
        of the original replicas in another order moves no data and is written at once.
        """
        registered = set(self._brokers)
        results: dict[TopicPartitionKey, KafkaError | None] = {}
        for (name, index), replicas in targets.items():
            try:
                topic = self._topics.get(name)
                if topic is None or not 0 <= index < len(topic.partitions):
                    raise UnknownTopic(f"Partition {name}-{index} does not exist.")
                if self.controller_fence is None:
                    raise NotController(f"Broker {self.node_id} is not the controller.")
                assignment = self._assignments[name][0]
                current = assignment.replicas.get(index, ())
                adding = assignment.adding.get(index, ())
                original = tuple(r for r in current if r not in adding)
                if replicas is None:
                    if not adding and not assignment.removing.get(index):
                        raise NoReassignmentInProgress(
                            "No reassignment is in progress for the partition."
                        )
                    self._write_reassignment(name, index, original, (), ())
                    results[(name, index)] = None
                    continue
                target = validate_assignment(replicas, registered)
                if len(target) != len(original) and not allow_replication_factor_change:
                    raise InvalidReplicationFactor(
                        "The replication factor is changed but the request does not allow it."
                    )
                if set(target) == set(original):
                    self._write_reassignment(name, index, target, (), ())
                else:
                    self._write_reassignment(
                        name,
                        index,
                        target + tuple(r for r in original if r not in target),
                        tuple(r for r in target if r not in original),
                        tuple(r for r in original if r not in target),
                    )
                results[(name, index)] = None
            except KafkaError as e:
                results[(name, index)] = e
        return results

    def _write_reassignment(
        self,
        name: str,
        index: int,
        replicas: tuple[int, ...],
        adding: tuple[int, ...],
        removing: tuple[int, ...],
    ) -> None:
        fence = self.controller_fence
        assert fence is not None
        held_topic = self._assignments[name]
        assignment, version = held_topic[0], held_topic[1]
        assert assignment.topic_id is not None  # the topic is published, so it has one
        if (
            assignment.replicas.get(index) == replicas
            and assignment.adding.get(index, ()) == adding
            and assignment.removing.get(index, ()) == removing
        ):
            return

        def with_entry(entries: dict[int, tuple[int, ...]], value: tuple[int, ...]) -> dict:
            updated = {p: v for p, v in entries.items() if p != index}
            if value:
                updated[index] = value
            return updated

        data = layout.encode_assignment(
            assignment.topic_id,
            {**assignment.replicas, index: replicas},
            with_entry(assignment.adding, adding),
            with_entry(assignment.removing, removing),
        )
        writes = [(layout.topic_path(name), data, version)]
        held = self._states.get((name, index))
        state = None
        if held is not None and set(replicas) != set(assignment.replicas.get(index, ())):
            # As Kafka, a new leader epoch tells the replicas of the new replica set (a new
            # order alone changes nothing for them).
            state = replace(
                held[0], leader_epoch=held[0].leader_epoch + 1, controller_epoch=fence.epoch
            )
            writes.append(
                (layout.state_path(name, index), layout.encode_partition_state(state), held[1])
            )
        self._controller_write(fence, writes)
        # Held at once with the versions written (the watches then bring the same values),
        # so that a next write, in this request or the next, is conditional on them.
        self._assignments[name] = (layout.decode_assignment(data), version + 1, *held_topic[2:])
        if state is not None and held is not None:
            self._states[(name, index)] = (state, held[1] + 1, *held[2:])

    def list_partition_reassignments(
        self, partitions: Iterable[TopicPartitionKey] | None
    ) -> dict[TopicPartitionKey, OngoingReassignment]:
        """The partitions whose topic znode lists replicas being added or removed."""
        ongoing = {}
        for name, held in self._assignments.items():
            assignment = held[0]
            for index in set(assignment.adding) | set(assignment.removing):
                ongoing[(name, index)] = OngoingReassignment(
                    assignment.replicas.get(index, ()),
                    assignment.adding.get(index, ()),
                    assignment.removing.get(index, ()),
                )
        if partitions is None:
            return ongoing
        return {key: ongoing[key] for key in partitions if key in ongoing}

    def producer_id_blocks(self) -> Callable[[int], int]:
        return self._take_producer_id_block

    def _take_producer_id_block(self, size: int) -> int:
        """Kafka's ZooKeeper-mode ``getNewProducerIdBlock``: the block after the last one any
        broker took, claimed by a write conditional on the znode's version (retried on a race)."""
        while True:
            data, stat = self.client.get(layout.PRODUCER_ID_BLOCK)
            first = layout.decode_producer_id_block_end(data) + 1
            block = layout.encode_producer_id_block(self.node_id, first, first + size - 1)
            try:
                self.client.set(layout.PRODUCER_ID_BLOCK, block, version=stat.version)
            except BadVersionError:
                continue
            return first

    def _require(self, name: str) -> TopicImage:
        topic = self._topics.get(name)
        if topic is None:
            raise UnknownTopic(f"This server does not host this topic-partition: {name}")
        return topic


def _raise_failure(results: list) -> None:
    """A failed kazoo transaction lists the failing op's exception (others RolledBackError)."""
    for result in results:
        if isinstance(result, Exception) and type(result).__name__ != "RolledBackError":
            raise result


def _log_failure(task: asyncio.Future) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("registering again after a session expiry failed: %s", task.exception())
