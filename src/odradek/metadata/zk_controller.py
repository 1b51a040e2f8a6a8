"""ZkController: the controller's ZooKeeper shell around the decisions in ``controller``.

Every broker runs one; at most one is active at a time. Election is Kafka's
(``registerControllerAndIncrementControllerEpoch``): read ``/controller_epoch``
with its version, then in one multi-op create the ephemeral ``/controller``
and write epoch + 1 conditional on that version. Whoever's multi-op succeeds
is controller with that epoch; when its session ends ``/controller`` goes and
every broker's watch tries again.

Fencing: each controller write is a multi-op whose first op checks that
``/controller_epoch`` still has the version this controller wrote. A controller
that lost its session (a "zombie" that has not noticed yet) fails that check
once a successor was elected, and nothing it decided lands. Partition state
writes are also conditional on the state znode's version, so a decision made
from a stale view fails instead of overwriting a newer one; the watches then
bring the newer view and the controller decides again.

The active controller reconciles level-triggered: after any change it computes
the state writes the whole view calls for (``controller.partition_state_changes``)
and performs them, and it deletes the topics queued in ``/admin/delete_topics``
(states, partitions, assignment, config, then the queue entry, in one fenced
multi-op). One reconciliation runs at a time; changes arriving meanwhile mark it
to run again. ZooKeeper calls are kazoo's asynchronous ones, awaited on the loop.

Controlled shutdown takes a ZooKeeper path rather than Kafka's ControlledShutdown
request (api key 7). A broker about to exit creates the ephemeral
``/controlled_shutdown/<id>``; the controller's next reconciliation treats it as
live but not serving (``controller.partition_state_changes``): new leaders from
the rest of the ISR for what it leads, out of the ISRs it follows. The broker
watches its own partitions' states until it leads none with other replicas
(``ZkCluster.controlled_shutdown``). Why not the API: Kafka 4's protocol
definitions, which this broker's codecs are generated from, no longer carry
ControlledShutdown (it went with ZooKeeper mode); the controller here is
level-triggered on ZooKeeper already, so a request znode costs no new machinery;
and an ephemeral request cannot outlive its broker, while a controller failing
over in the middle simply finds the request in ZooKeeper and carries on, where
an RPC would have to be retried against the new controller.

Partition reassignments are started by the admin request on the controller
(``ZkMetadataStore.alter_partition_reassignments``: the topic znode's
``adding_replicas``/``removing_replicas`` and a leader epoch bump) and finished here,
level-triggered like the rest: after each reconciliation, every reassignment whose
target replicas are all in the ISR completes in one fenced multi-op per topic
(``controller.completed_reassignments``). A controller failing over mid-way finds
the reassignment in the topic znode and finishes it.

The reassignment and preferred-leader tools of the ZooKeeper era write their request
into ZooKeeper instead of sending one: ``/admin/reassign_partitions`` (Kafka's JSON,
version 1) and ``/admin/preferred_replica_election``. The controller answers them as
Kafka's did, level-triggered with the rest. A reassignment request's partitions are
started as AlterPartitionReassignments starts them (``ZkMetadataStore.reassign``); each
is removed from the znode once it is complete, or when it cannot be done (an unknown
partition, an invalid replica list, logged), and the znode is deleted when none is
left, so a tool can write the next one. A reassignment through the API of a partition
listed there takes it out (the latest request wins, as in Kafka). A preferred election
request elects the first replica of each partition that can (``elect_leaders``), logs
the ones that cannot, and deletes the znode. A znode that is not Kafka's JSON is logged
and deleted (Kafka ignored it, which left it blocking every later request). Each write
is fenced and conditional on the version read, so a request rewritten meanwhile is
handled again from its new content.

Auto leader rebalance (``auto.leader.rebalance.enable``) is a timer on every
broker that acts only while this broker is the active controller: every
``leader.imbalance.check.interval.seconds`` it writes the preferred-leader
elections ``controller.preferred_leader_changes`` calls for, each fenced and
conditional like the reconciliation's writes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from kazoo.client import KazooClient, TransactionRequest
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from odradek.metadata import zk_layout as layout
from odradek.metadata.controller import (
    ReassignmentCompletion,
    StateChange,
    completed_reassignments,
    partition_state_changes,
    preferred_leader_changes,
)
from odradek.metadata.store import ElectionType
from odradek.metadata.zk_fence import ControllerFence, ControllerMoved, check_fence, fenced
from odradek.metadata.zk_store import NotController, ZkMetadataStore

log = logging.getLogger(__name__)

#: What an admin znode decodes to.
_Request = TypeVar("_Request")


def elect(client: KazooClient, node_id: int) -> ControllerFence | None:
    """Try to become controller; the fence on success, None if another broker is controller."""
    while True:
        try:
            data, stat = client.get(layout.CONTROLLER_EPOCH)
        except NoNodeError:
            try:
                client.create(layout.CONTROLLER_EPOCH, layout.encode_controller_epoch(0))
            except NodeExistsError:
                pass
            continue
        epoch = layout.decode_controller_epoch(data) + 1
        tx = client.transaction()
        tx.create(layout.CONTROLLER, layout.encode_controller(node_id), ephemeral=True)
        tx.set_data(layout.CONTROLLER_EPOCH, layout.encode_controller_epoch(epoch), stat.version)
        results = tx.commit()
        if isinstance(results[0], NodeExistsError):
            return None
        if isinstance(results[1], BadVersionError):
            continue  # another election bumped the epoch meanwhile: read it again
        for result in results:
            if isinstance(result, Exception):
                raise result
        return ControllerFence(epoch, results[1].version)


def add_state_change(tx: TransactionRequest, change: StateChange) -> None:
    path = layout.state_path(change.topic, change.partition)
    data = layout.encode_partition_state(change.state)
    if change.expected_version is None:
        tx.create(path, data)
    else:
        tx.set_data(path, data, change.expected_version)


class ZkController:
    """Election and the active controller's work, on the broker's event loop."""

    def __init__(
        self,
        store: ZkMetadataStore,
        unclean_leader_election: Callable[[str, dict[str, str]], bool],
        leader_imbalance_check_interval_s: float | None = None,
        leader_imbalance_percentage: int = 10,
    ) -> None:
        """``unclean_leader_election(topic, overrides)``: the topic's effective
        unclean.leader.election.enable (its override, else the broker default);
        ``leader_imbalance_check_interval_s`` None: no auto leader rebalance."""
        self.store = store
        self.client = store.client
        self.node_id = store.node_id
        self._unclean = unclean_leader_election
        self._task: asyncio.Task | None = None
        self._rebalance_interval_s = leader_imbalance_check_interval_s
        self._imbalance_percentage = leader_imbalance_percentage
        self._rebalancer: asyncio.Task | None = None
        self._again = False
        self._stopped = False

    @property
    def fence(self) -> ControllerFence | None:
        """Set while this broker is the active controller; kept on the store, which serves
        the controller's admin operations (ElectLeaders) with it."""
        return self.store.controller_fence

    @fence.setter
    def fence(self, fence: ControllerFence | None) -> None:
        self.store.controller_fence = fence

    @property
    def active(self) -> bool:
        return self.fence is not None

    def start(self) -> None:
        self.store.change_listeners.append(self._on_change)
        self._on_change()
        if self._rebalance_interval_s is not None:
            self._rebalancer = asyncio.ensure_future(self._rebalance_periodically())

    async def stop(self) -> None:
        self._stopped = True
        self.fence = None
        for task in (self._task, self._rebalancer):
            if task is not None:
                task.cancel()
                try:
                    await task
                except (asyncio.CancelledError, Exception):
                    pass

    def _on_change(self) -> None:
        if self._stopped:
            return
        if self.fence is not None and self.store.controller_id not in (-1, self.node_id):
            log.info("broker %d is no longer controller", self.node_id)
            self.fence = None
        if not self.client.connected:
            self.fence = None
            return
        self._again = True
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        while self._again and not self._stopped:
            self._again = False
            try:
                if self.fence is None and self.store.controller_id == -1:
                    self.fence = await asyncio.to_thread(elect, self.client, self.node_id)
                    if self.fence is not None:
                        log.info(
                            "broker %d is controller, epoch %d", self.node_id, self.fence.epoch
                        )
                if self.fence is not None:
                    await self._reconcile(self.fence)
            except ControllerMoved as e:
                log.info("broker %d resigns as controller: %s", self.node_id, e)
                self.fence = None
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("controller step failed; retrying on the next change")

    async def _reconcile(self, fence: ControllerFence) -> None:
        store = self.store
        deleting = store.topics_to_delete()
        changes = partition_state_changes(
            store.assignments(),
            store.partition_states(),
            store.live_broker_ids(),
            fence.epoch,
            lambda topic: self._unclean(topic, store.topic_config_overrides(topic)),
            deleting,
            store.shutting_down_broker_ids(),
        )
        pending = [self._write_state(fence, change) for change in changes]
        pending += [self._delete_topic(fence, topic) for topic in deleting]
        await self._settle_writes(pending)
        await self._complete_reassignments(fence)
        await self._admin_reassignments(fence)
        await self._admin_preferred_elections(fence)

    async def _complete_reassignments(self, fence: ControllerFence) -> None:
        """Finish the reassignments whose target replicas are all in sync (after the
        reconciliation's writes, so a stale view fails its version checks and is redone
        when the watches bring the newer one)."""
        store = self.store
        completions = completed_reassignments(
            {
                topic: held
                for topic, held in store.assignments_with_versions().items()
                if topic not in store.topics_to_delete()
            },
            store.partition_states(),
            store.live_broker_ids(),
            fence.epoch,
            store.shutting_down_broker_ids(),
        )
        await self._settle_writes([self._write_completion(fence, c) for c in completions])

    async def _admin_reassignments(self, fence: ControllerFence) -> None:
        """Start the reassignments ``/admin/reassign_partitions`` asks for and take the
        finished (or impossible) ones out of it."""
        store = self.store
        request = await self._admin_request(
            fence, layout.REASSIGN_PARTITIONS, layout.decode_reassign_partitions
        )
        if request is None:
            return
        requested, version = request
        done: set[tuple[str, int]] = set()
        to_start = {}
        for key, target in requested.items():
            state = self._reassignment_state(key, target)
            if state == "complete":
                log.info("reassignment of %s-%d to %s is complete", *key, list(target))
                done.add(key)
            elif state == "deleting":
                log.warning("reassignment of %s-%d dropped: the topic is being deleted", *key)
                done.add(key)
            elif state == "start":
                to_start[key] = target
        for key, error in store.reassign(to_start).items():
            if isinstance(error, NotController):
                continue  # a concurrent change: tried again from the newer view
            if error is not None:
                log.warning("reassignment of %s-%d not started: %s", *key, error)
                done.add(key)
            elif self._reassignment_state(key, requested[key]) == "complete":
                done.add(key)  # the same replicas in another order: written at once
        if done:
            remaining = {k: v for k, v in requested.items() if k not in done}
            data = layout.encode_reassign_partitions(remaining) if remaining else None
            await self._replace_admin_request(fence, layout.REASSIGN_PARTITIONS, data, version)

    def _reassignment_state(self, key: tuple[str, int], target: tuple[int, ...]) -> str:
        """The state of the reassignment of ``key`` to ``target``: "complete", "moving"
        (under way), "deleting" (its topic is), or "start" (another reassignment or none; an
        unknown partition too, which ``reassign`` refuses)."""
        topic, index = key
        if topic in self.store.topics_to_delete():
            return "deleting"
        held = self.store.assignments().get(topic)
        if held is None or index not in held.replicas:
            return "start"
        replicas = held.replicas[index]
        moving = bool(held.adding.get(index) or held.removing.get(index))
        if replicas == target and not moving:
            return "complete"
        if moving and replicas[: len(target)] == target:
            return "moving"
        return "start"

    async def _admin_preferred_elections(self, fence: ControllerFence) -> None:
        """Elect the preferred leaders ``/admin/preferred_replica_election`` lists, then
        delete it (whatever each election's outcome, as Kafka)."""
        request = await self._admin_request(
            fence, layout.PREFERRED_REPLICA_ELECTION, layout.decode_preferred_replica_election
        )
        if request is None:
            return
        partitions, version = request
        results = self.store.elect_leaders(ElectionType.PREFERRED, sorted(partitions))
        for (topic, index), error in sorted(results.items()):
            if error is None:
                log.info("preferred replica election of %s-%d done", topic, index)
            else:
                log.warning("preferred replica election of %s-%d: %s", topic, index, error)
        await self._replace_admin_request(fence, layout.PREFERRED_REPLICA_ELECTION, None, version)

    async def _admin_request(
        self, fence: ControllerFence, path: str, decode: Callable[[bytes], _Request]
    ) -> tuple[_Request, int] | None:
        """The decoded request at ``path`` and its version; None when there is none, or when
        it is not Kafka's JSON (then it is logged and deleted)."""
        held = self.store.admin_request(path)
        if held is None:
            return None
        data, version = held
        try:
            return decode(data), version
        except ValueError as e:
            log.warning("deleting %s: %s", path, e)
            await self._replace_admin_request(fence, path, None, version)
            return None

    async def _replace_admin_request(
        self, fence: ControllerFence, path: str, data: bytes | None, version: int
    ) -> None:
        """Rewrite (``data``) or delete (None) an admin znode, fenced and conditional on the
        version it was read at (a tool's newer write is handled on the next change)."""
        tx = fenced(self.client, fence)
        if data is None:
            tx.delete(path, version)
        else:
            tx.set_data(path, data, version)
        results = await self._call(tx.commit_async())
        check_fence(results)
        if any(isinstance(r, Exception) for r in results):
            log.info("%s changed meanwhile; handled again", path)
        else:
            self.store.admin_request_written(path, data, version)

    async def _write_completion(self, fence: ControllerFence, done: ReassignmentCompletion) -> None:
        assignment = done.assignment
        assert assignment.topic_id is not None
        tx = fenced(self.client, fence)
        for change in done.states:
            add_state_change(tx, change)
        tx.set_data(
            layout.topic_path(done.topic),
            layout.encode_assignment(
                assignment.topic_id, assignment.replicas, assignment.adding, assignment.removing
            ),
            done.expected_version,
        )
        results = await self._call(tx.commit_async())
        check_fence(results)
        if any(isinstance(r, Exception) for r in results):
            log.info("reassignment of %s raced another change; retried", done.topic)
        else:
            log.info("reassignment of %s completed: %s", done.topic, assignment.replicas)

    async def _settle_writes(self, pending: list) -> None:
        """Await the writes; ControllerMoved ends this controller, other failures are retried
        on the next change (the view they were computed from was stale)."""
        for result in await asyncio.gather(*pending, return_exceptions=True):
            if isinstance(result, ControllerMoved):
                raise result
            if isinstance(result, Exception):
                log.warning("controller write failed (retried on the next change): %r", result)

    async def _rebalance_periodically(self) -> None:
        assert self._rebalance_interval_s is not None
        while not self._stopped:
            await asyncio.sleep(self._rebalance_interval_s)
            fence = self.fence
            if fence is None:
                continue
            try:
                await self._rebalance_leaders(fence)
            except ControllerMoved as e:
                log.info("broker %d resigns as controller: %s", self.node_id, e)
                self.fence = None
            except Exception:
                log.exception("auto leader rebalance failed; retried at the next check")

    async def _rebalance_leaders(self, fence: ControllerFence) -> None:
        """One auto leader rebalance check: move leadership back to preferred replicas."""
        store = self.store
        changes = preferred_leader_changes(
            store.assignments(),
            store.partition_states(),
            store.live_broker_ids(),
            fence.epoch,
            self._imbalance_percentage,
            store.topics_to_delete(),
            store.shutting_down_broker_ids(),
        )
        if changes:
            log.info(
                "auto leader rebalance: %d partitions back to their preferred leader", len(changes)
            )
        await self._settle_writes([self._write_state(fence, change) for change in changes])

    async def _write_state(self, fence: ControllerFence, change: StateChange) -> None:
        if change.expected_version is None:
            await self._call(
                self.client.ensure_path_async(layout.partition_path(change.topic, change.partition))
            )
        tx = fenced(self.client, fence)
        add_state_change(tx, change)
        check_fence(await self._call(tx.commit_async()))

    async def _delete_topic(self, fence: ControllerFence, topic: str) -> None:
        """Remove a queued topic's znodes bottom-up in one fenced multi-op."""
        paths = []
        if await self._call(self.client.exists_async(layout.topic_path(topic))) is not None:
            try:
                partitions = await self._call(
                    self.client.get_children_async(layout.partitions_path(topic))
                )
            except NoNodeError:
                partitions = []
            for p in partitions:
                partition_path = f"{layout.partitions_path(topic)}/{p}"
                children = await self._call(self.client.get_children_async(partition_path))
                paths += [f"{partition_path}/{child}" for child in children]
                paths.append(partition_path)
            if partitions:
                paths.append(layout.partitions_path(topic))
            paths.append(layout.topic_path(topic))
        if await self._call(self.client.exists_async(layout.topic_config_path(topic))):
            paths.append(layout.topic_config_path(topic))
        paths.append(layout.delete_topic_path(topic))
        tx = fenced(self.client, fence)
        for path in paths:
            tx.delete(path)
        results = await self._call(tx.commit_async())
        check_fence(results)
        if any(isinstance(r, Exception) for r in results):
            log.info("deletion of topic %s raced another change; retried", topic)
        else:
            log.info("controller deleted topic %s", topic)

    def _call(self, async_result) -> asyncio.Future:
        """Await a kazoo IAsyncResult on the loop."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()

        def settle(result) -> None:
            try:
                value = result.get_nowait()
            except Exception as e:
                loop.call_soon_threadsafe(_settle, future, None, e)
            else:
                loop.call_soon_threadsafe(_settle, future, value, None)

        async_result.rawlink(settle)
        return future


def _settle(future: asyncio.Future, value: Any, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)
