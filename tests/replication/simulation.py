"""A deterministic simulation of one partition replicated on three brokers.

Three real ``Partition`` state machines (over ``MemoryLog``) and a controller
model talk through an in-memory network in which any message may be delivered
in any order, delayed for ever or dropped. A schedule is a list of steps, each
``(kind, a, b)`` of small integers, so hypothesis can draw and shrink it and a
seeded ``random.Random`` can generate long ones; the same schedule always runs
the same way. Steps: produce (acks=all or acks=1) to any broker, followers
sending their next request, delivering or dropping any message in flight,
time passing, the leader's ISR-expiry check, crashes (the log survives,
memory does not), restarts, ZooKeeper sessions expiring (also of live
brokers: the zombie-leader case) and brokers registering again, the controller
sending a broker the partition state (level-triggered, as a ZooKeeper watch
delivers the latest value), consumers reading up to a leader's high watermark.

The controller model is Kafka's ZooKeeper controller for one partition: on a
session expiry it elects a new leader from the live ISR members (no unclean
election), or keeps the ISR and leaves the partition leaderless; a dead
follower leaves the ISR; each change bumps the leader epoch and the partition
epoch (the znode version). It commits an AlterPartition only with the current
leader epoch and partition epoch, and refuses an ISR member that is not
registered, or registered under another broker epoch than the one the leader saw
in its fetches (INELIGIBLE_REPLICA, KIP-903).

After every step ``check`` asserts the invariants (``Violation`` on failure):
an acks=all record acknowledged with min.insync.replicas met is held at its
offset by every ISR member; each broker's high watermark never decreases while
it lives; any two brokers agree below the smaller of their high watermarks, and
the ISR holds everything below any high watermark; a record a consumer saw is
never replaced or lost.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.replication.partition import (
    NO_LEADER,
    EpochQuery,
    FetchPosition,
    Partition,
)
from odradek.replication.partition_state import AlterPartition, PartitionState
from odradek.storage import LogConfig

from .memory_log import MemoryLog

BROKERS = (0, 1, 2)
LAG_MS = 1_000
MIN_ISR = 2
START_MS = 1_000_000


class Violation(AssertionError):
    pass


@dataclass
class Message:
    """A request or response on a connection: it dies with the incarnation it was sent to."""

    dest: int  # a broker id, or CONTROLLER
    incarnation: int
    kind: str
    body: tuple


CONTROLLER = -1


@dataclass
class Node:
    node_id: int
    log: MemoryLog
    partition: Partition | None = None
    alive: bool = True
    incarnation: int = 0
    #: The highest high watermark seen in this incarnation.
    hw_seen: int = 0
    #: This incarnation's registration (ZooKeeper's czxid of /brokers/ids/<id>); None until registered.
    broker_epoch: int | None = None


@dataclass
class Controller:
    state: PartitionState
    #: broker id -> broker epoch of its live registration.
    registered: dict[int, int] = field(default_factory=dict)
    last_broker_epoch: int = 0

    def _write(self, **changes: Any) -> None:
        """A conditional write of the state znode: its version (the partition epoch) moves on."""
        self.state = replace(self.state, partition_epoch=self.state.partition_epoch + 1, **changes)

    def session_expired(self, broker: int) -> None:
        if broker not in self.registered:
            return
        del self.registered[broker]
        s = self.state
        if s.leader == broker:
            live_isr = tuple(r for r in s.isr if r in self.registered)
            if live_isr:
                self._write(leader=live_isr[0], leader_epoch=s.leader_epoch + 1, isr=live_isr)
            else:  # the ISR is kept as it was: only one of its members may lead again
                self._write(leader=NO_LEADER, leader_epoch=s.leader_epoch + 1)
        elif broker in s.isr and len(s.isr) > 1:
            self._write(leader_epoch=s.leader_epoch + 1, isr=tuple(r for r in s.isr if r != broker))

    def register(self, broker: int) -> int:
        self.last_broker_epoch += 1
        self.registered[broker] = self.last_broker_epoch
        s = self.state
        if s.leader == NO_LEADER and broker in s.isr:
            self._write(leader=broker, leader_epoch=s.leader_epoch + 1)
        return self.last_broker_epoch

    def alter_partition(self, req: AlterPartition, broker_epoch: int) -> PartitionState | ErrorCode:
        """Kafka's checks: the sender's registration (a request from an earlier life of the
        broker is stale), its leader epoch, the partition epoch, the new members' liveness."""
        s = self.state
        if self.registered.get(req.leader_id) != broker_epoch:
            return ErrorCode.stale_broker_epoch
        if req.leader_id != s.leader or req.leader_epoch != s.leader_epoch:
            return ErrorCode.fenced_leader_epoch
        if req.partition_epoch != s.partition_epoch:
            return ErrorCode.invalid_update_version
        for r, epoch in zip(req.new_isr, req.broker_epochs, strict=True):
            if r not in self.registered or epoch not in (-1, self.registered[r]):
                return ErrorCode.ineligible_replica
        self._write(isr=req.new_isr)
        return self.state


@dataclass
class PendingProduce:
    node: int
    incarnation: int
    leader_epoch: int
    first_offset: int
    values: tuple[int, ...]


class Simulation:
    def __init__(self, *, trace: bool = False) -> None:
        self.config = LogConfig(min_insync_replicas=MIN_ISR)
        self.now = START_MS
        initial = PartitionState(0, 0, BROKERS, BROKERS, 0)
        self.controller = Controller(initial)
        self.nodes = {b: Node(b, MemoryLog(self.config)) for b in BROKERS}
        for node in self.nodes.values():
            node.broker_epoch = self.controller.register(node.node_id)
            node.partition = Partition(node.log, node.node_id, initial, self.now, LAG_MS)
        self.network: list[Message] = []
        self.pending: list[PendingProduce] = []
        self.acked: dict[int, int] = {}  # offset -> value, acks=all with min ISR met
        self.consumed: dict[int, int] = {}
        self.next_value = 1
        self.trace = trace
        self.log: list[str] = []

    # -- steps -------------------------------------------------------------------------
    KINDS = (  # (step, weight): faults rare enough that the cluster also gets work done
        ("deliver", 14),
        ("follower_request", 10),
        ("produce_all", 4),
        ("produce_one", 1),
        ("tick", 2),
        ("shrink_isr", 1),
        ("send_alter", 2),
        ("broadcast", 4),
        ("consume", 2),
        ("drop", 1),
        ("crash", 1),
        ("restart", 2),
        ("expire", 1),
        ("register", 3),
        ("heal", 1),
    )
    _TABLE = tuple(name for name, weight in KINDS for _ in range(weight))

    def step(self, kind: int, a: int, b: int) -> None:
        name = self._TABLE[kind % len(self._TABLE)]
        if self.trace:
            self.log.append(f"{name}({a}, {b})")
        getattr(self, "_" + name)(a, b)
        self._complete_produces()
        self.check()

    def run(self, steps: Iterable[tuple[int, int, int]]) -> None:
        for kind, a, b in steps:
            self.step(kind, a, b)

    def _live(self, a: int) -> tuple[Node, Partition] | None:
        node = self.nodes[BROKERS[a % len(BROKERS)]]
        if not node.alive or node.partition is None:
            return None
        return node, node.partition

    def _send(self, dest: int, kind: str, *body: Any) -> None:
        incarnation = self.nodes[dest].incarnation if dest in self.nodes else 0
        self.network.append(Message(dest, incarnation, kind, body))

    def _deliver(self, a: int, b: int) -> None:
        if not self.network:
            return
        msg = self.network.pop(a % len(self.network))
        if msg.dest == CONTROLLER:
            req, broker_epoch = msg.body
            result = self.controller.alter_partition(req, broker_epoch)
            self._send(req.leader_id, "alter_response", req, result)
            return
        node = self.nodes[msg.dest]
        if not node.alive or node.incarnation != msg.incarnation:
            return
        if msg.kind == "state":
            (state,) = msg.body
            if node.partition is None:
                node.partition = Partition(node.log, node.node_id, state, self.now, LAG_MS)
            else:
                node.partition.apply_state(state, self.now)
            return
        p = node.partition
        if p is None:
            return
        getattr(self, "_on_" + msg.kind)(node, p, *msg.body)

    def _on_fetch(
        self, node: Node, p: Partition, follower: int, epoch: int, req: FetchPosition
    ) -> None:
        try:
            records = p.fetch_for_follower(
                follower, req.fetch_offset, req.current_leader_epoch, 3, self.now, epoch
            )
        except KafkaError as exc:
            self._send(follower, "fetch_error", req, exc.error_code)
            return
        self._send(follower, "fetch_response", req, records, p.high_watermark)

    def _on_fetch_response(
        self, node: Node, p: Partition, req: FetchPosition, records: tuple, hw: int
    ) -> None:
        p.on_fetch_response(req, records, hw, self.now)

    def _on_fetch_error(self, node: Node, p: Partition, req: FetchPosition, error: Any) -> None:
        p.on_fetch_error(req, error)

    def _on_epoch_query(self, node: Node, p: Partition, follower: int, req: EpochQuery) -> None:
        try:
            epoch, end = p.last_offset_for_leader_epoch(req.current_leader_epoch, req.leader_epoch)
        except KafkaError:
            return  # the follower asks again once its metadata or the leader's catches up
        self._send(follower, "epoch_response", req, epoch, end)

    def _on_epoch_response(
        self, node: Node, p: Partition, req: EpochQuery, epoch: int, end: int
    ) -> None:
        p.on_epoch_end_offset(req, epoch, end)

    def _on_alter_response(
        self, node: Node, p: Partition, req: AlterPartition, result: Any
    ) -> None:
        p.on_alter_partition_response(req, result, self.now)

    def _follower_request(self, a: int, b: int) -> None:
        live = self._live(a)
        if live is None:
            return
        node, p = live
        req = p.next_follower_request()
        if isinstance(req, EpochQuery):
            self._send(req.leader_id, "epoch_query", node.node_id, req)
        elif isinstance(req, FetchPosition):
            epoch = -1 if node.broker_epoch is None else node.broker_epoch
            self._send(req.leader_id, "fetch", node.node_id, epoch, req)

    def _produce(self, a: int, acks: int) -> None:
        live = self._live(a)
        if live is None:
            return
        node, p = live
        values = tuple(range(self.next_value, self.next_value + 1 + a % 2))
        self.next_value += len(values)
        try:
            batch = p.append_records_to_leader(values, acks, self.now)
        except KafkaError:
            return
        if acks == -1:
            self.pending.append(
                PendingProduce(
                    node.node_id, node.incarnation, p.leader_epoch, batch.base_offset, values
                )
            )

    def _produce_all(self, a: int, b: int) -> None:
        self._produce(a, -1)

    def _produce_one(self, a: int, b: int) -> None:
        self._produce(a, 1)

    def _tick(self, a: int, b: int) -> None:
        self.now += (a % 4) * LAG_MS // 2 + b % 100

    def _shrink_isr(self, a: int, b: int) -> None:
        live = self._live(a)
        if live is not None:
            live[1].maybe_shrink_isr(self.now)

    def _send_alter(self, a: int, b: int) -> None:
        live = self._live(a)
        if live is not None and live[1].alter_partition_in_flight is not None:
            node, p = live
            self._send(CONTROLLER, "alter", p.alter_partition_in_flight, node.broker_epoch)

    def _broadcast(self, a: int, b: int) -> None:
        """The controller tells a registered broker the partition state (LeaderAndIsr)."""
        node = self.nodes[BROKERS[a % len(BROKERS)]]
        if node.broker_epoch is not None and self.controller.registered.get(node.node_id) == (
            node.broker_epoch
        ):
            self._send(node.node_id, "state", self.controller.state)

    def _consume(self, a: int, b: int) -> None:
        live = self._live(a)
        if live is None or not live[1].is_leader:
            return
        p = live[1]
        for batch in p.read(0, 1 << 30, 0, True):
            for i, value in enumerate(batch.values):
                offset = batch.base_offset + i
                if offset >= p.high_watermark:
                    raise Violation(f"consumer read offset {offset} >= HW {p.high_watermark}")
                seen = self.consumed.setdefault(offset, value)
                if seen != value:
                    raise Violation(f"offset {offset} was consumed as {seen}, now reads {value}")

    def _drop(self, a: int, b: int) -> None:
        if self.network:
            self.network.pop(a % len(self.network))

    def _crash(self, a: int, b: int) -> None:
        node = self.nodes[BROKERS[a % len(BROKERS)]]
        if node.alive:
            node.alive = False
            node.partition = None

    def _restart(self, a: int, b: int) -> None:
        node = self.nodes[BROKERS[a % len(BROKERS)]]
        if not node.alive:
            node.alive = True
            node.incarnation += 1
            node.hw_seen = 0
            node.broker_epoch = None

    def _expire(self, a: int, b: int) -> None:
        self.controller.session_expired(BROKERS[a % len(BROKERS)])

    def _register(self, a: int, b: int) -> None:
        """A live broker without a registration registers (a restarted one only once the
        session of its previous life has expired, as ZooKeeper's ephemeral node is in the way)."""
        node = self.nodes[BROKERS[a % len(BROKERS)]]
        if node.alive and node.node_id not in self.controller.registered:
            node.broker_epoch = self.controller.register(node.node_id)

    def _heal(self, a: int, b: int) -> None:
        heal(self, rounds=1 + a % 3)

    def _complete_produces(self) -> None:
        still = []
        for w in self.pending:
            node = self.nodes[w.node]
            p = node.partition
            if not node.alive or node.incarnation != w.incarnation or p is None:
                continue
            required = w.first_offset + len(w.values)
            done, error = p.check_enough_replicas_reach_offset(required, w.leader_epoch)
            if not done:
                still.append(w)
            elif error == ErrorCode.none:
                for i, value in enumerate(w.values):
                    self.acked[w.first_offset + i] = value
        self.pending = still

    # -- invariants ----------------------------------------------------------------------
    def check(self) -> None:
        isr = self.controller.state.isr
        contents = {b: node.log.values() for b, node in self.nodes.items()}
        for offset, value in self.acked.items():
            for r in isr:
                if contents[r].get(offset) != value:
                    raise Violation(
                        f"acknowledged record {value} at offset {offset} is missing on ISR member {r}"
                    )
        for offset, value in self.consumed.items():
            for r in isr:
                if contents[r].get(offset) != value:
                    raise Violation(
                        f"consumed record {value} at offset {offset} is missing on ISR member {r}"
                    )
        hws = {}
        for b, node in self.nodes.items():
            if node.partition is None:
                continue
            hw = node.partition.high_watermark
            if hw < node.hw_seen:
                raise Violation(f"broker {b}: high watermark went back from {node.hw_seen} to {hw}")
            if hw > node.log.log_end_offset:
                raise Violation(f"broker {b}: high watermark {hw} above its log end offset")
            node.hw_seen = hw
            hws[b] = hw
        for b, hw in hws.items():
            for r in isr:
                for offset in range(hw):
                    if contents[r].get(offset) != contents[b].get(offset):
                        raise Violation(
                            f"offset {offset} below broker {b}'s high watermark {hw} differs "
                            f"on ISR member {r}"
                        )
            for other, other_hw in hws.items():
                for offset in range(min(hw, other_hw)):
                    if contents[other].get(offset) != contents[b].get(offset):
                        raise Violation(f"brokers {b} and {other} differ at offset {offset}")


def random_steps(seed: int, count: int) -> list[tuple[int, int, int]]:
    """A long schedule from a seed, for runs far beyond what hypothesis explores."""
    rng = random.Random(seed)
    kinds = len(Simulation._TABLE)
    return [(rng.randrange(kinds), rng.randrange(1000), rng.randrange(1000)) for _ in range(count)]


def heal(sim: Simulation, rounds: int) -> None:
    """A quiet spell: every broker up and registered, every message delivered in order."""
    for b in BROKERS:
        sim._restart(b, 0)
        if sim.nodes[b].broker_epoch is None:
            sim._expire(b, 0)  # the session of its previous life ends
        sim._register(b, 0)
    for _ in range(rounds):
        for b in BROKERS:
            sim._broadcast(b, 0)
            sim._follower_request(b, 0)
            sim._send_alter(b, 0)
        while sim.network:
            sim._deliver(0, 0)
            sim._complete_produces()
            sim.check()
        sim._tick(1, 0)


def assert_converged(sim: Simulation) -> None:
    """After enough quiet rounds the cluster is whole again: one leader, the full ISR,
    identical logs and every high watermark at the log end offset (no stuck state)."""
    heal(sim, rounds=12)
    state = sim.controller.state
    logs = {b: node.log.values() for b, node in sim.nodes.items()}
    ends = {b: node.log.log_end_offset for b, node in sim.nodes.items()}
    hws = {b: node.partition.high_watermark for b, node in sim.nodes.items() if node.partition}
    if state.leader == NO_LEADER or set(state.isr) != set(BROKERS):
        raise Violation(f"not converged: {state}")
    if len({tuple(sorted(v.items())) for v in logs.values()}) != 1:
        raise Violation(f"logs differ after healing: {logs}")
    if set(hws.values()) != set(ends.values()) or len(set(hws.values())) != 1:
        raise Violation(f"high watermarks {hws} not at the log end offsets {ends}")
