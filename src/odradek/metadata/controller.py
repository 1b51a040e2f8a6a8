"""The controller's decisions, sans-I/O: which partition states to write, given the cluster as seen.

Level-triggered: ``partition_state_changes`` looks at the whole view (live
brokers, assignments, current states with their znode versions) and returns the
writes that bring every partition to where Kafka's controller would put it, no
matter which events led there or how many were missed. The ZooKeeper shell
(``zk_controller``) calls it after any change and writes the result, each write
conditional on the znode version it was computed from, so a decision made from a
stale view fails instead of overwriting something newer.

The rules are Kafka's partition and replica state machines (ZooKeeper mode):

- a partition without state (new topic or partition): leader = first live
  replica in assignment order, ISR = live replicas, leader epoch 0; with no live
  replica it waits (Kafka leaves it a NewPartition);
- leader not live: the first replica in assignment order that is live and in
  the ISR leads, the ISR keeps its live members (OfflinePartitionLeaderElection);
  with none, and ``unclean.leader.election.enable``, the first live replica leads
  with ISR = [it]; otherwise leader -1 (NoLeader) and the ISR loses its dead
  members except the last one, which keeps the partition electable when that
  replica returns (Kafka never empties the ISR);
- leader live: ISR members that are not live are removed
  (ReplicaStateMachine's OfflineReplica transition);
- a broker in controlled shutdown (``shutting_down``) is live but serves no
  more: a partition it leads gets the first other live ISR member in assignment
  order as leader and an ISR without it (Kafka's
  ControlledShutdownPartitionLeaderElection); with no such member it keeps the
  leadership and the broker asks again; it leaves the ISR of the partitions it
  follows; offline elections do not pick it;
- an ISR member or leader that is no longer a replica (a reassignment cancelled
  or replaced) is dropped, and such a leader replaced as if it were offline;
- every change bumps the leader epoch and carries the controller epoch.

``preferred_leader_changes`` is the periodic auto leader rebalance, apart from
the reconciliation because it is a policy run on a timer, not a repair.

``completed_reassignments`` is the last step of Kafka's partition reassignment
(ZooKeeper mode, KIP-455): while the topic znode lists ``adding_replicas`` or
``removing_replicas`` for a partition, its replicas are the target plus the
original ones and the new replicas catch up like any follower; once every target
replica is in the ISR, one multi-op moves the leadership into the target if it
is outside it, drops the removed replicas from the ISR, bumps the leader epoch and
writes the target as the assignment. The removed brokers then stop hosting the partition and delete
its log (``ReplicaManager``), Kafka's StopReplica with deletion.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from odradek.metadata.zk_layout import NO_LEADER, PartitionState, TopicAssignment


@dataclass(frozen=True, slots=True)
class StateChange:
    """Write ``state`` to a partition's state znode; ``expected_version`` None means create it."""

    topic: str
    partition: int
    state: PartitionState
    expected_version: int | None


def partition_state_changes(
    assignments: Mapping[str, TopicAssignment],
    states: Mapping[tuple[str, int], tuple[PartitionState, int]],
    live: set[int],
    controller_epoch: int,
    unclean_allowed: Callable[[str], bool],
    deleting: set[str] = frozenset(),  # type: ignore[assignment]
    shutting_down: set[int] = frozenset(),  # type: ignore[assignment]
) -> list[StateChange]:
    """Every partition state write needed now (``states`` holds (state, znode version))."""
    changes = []
    for topic, assignment in assignments.items():
        if topic in deleting:
            continue
        for partition, replicas in sorted(assignment.replicas.items()):
            current = states.get((topic, partition))
            if current is None:
                new = _initial(replicas, live, controller_epoch)
                version = None
            else:
                new = _next(
                    current[0],
                    replicas,
                    live,
                    shutting_down,
                    controller_epoch,
                    unclean_allowed(topic),
                )
                version = current[1]
            if new is not None:
                changes.append(StateChange(topic, partition, new, version))
    return changes


def _initial(replicas: tuple[int, ...], live: set[int], epoch: int) -> PartitionState | None:
    live_replicas = tuple(r for r in replicas if r in live)
    if not live_replicas:
        return None
    return PartitionState(live_replicas[0], 0, live_replicas, epoch)


def _next(
    state: PartitionState,
    replicas: tuple[int, ...],
    live: set[int],
    shutting_down: set[int],
    epoch: int,
    unclean: bool,
) -> PartitionState | None:
    serving = (live - shutting_down) & set(replicas)
    live_isr = tuple(r for r in state.isr if r in live and r in replicas)
    if state.leader != NO_LEADER and state.leader in serving:
        isr = tuple(r for r in live_isr if r not in shutting_down)
        if isr == state.isr:
            return None
        return PartitionState(state.leader, state.leader_epoch + 1, isr, epoch)
    if state.leader in shutting_down and state.leader in live and state.leader in replicas:
        leader = next((r for r in replicas if r in serving and r in state.isr), None)
        if leader is None:
            return None  # nobody else in sync: it keeps leading until it exits
        isr = tuple(r for r in live_isr if r not in shutting_down)
        return PartitionState(leader, state.leader_epoch + 1, isr, epoch)
    leader = next((r for r in replicas if r in serving and r in state.isr), None)
    if leader is not None:
        isr = tuple(r for r in live_isr if r not in shutting_down)
        return PartitionState(leader, state.leader_epoch + 1, isr, epoch)
    if unclean:
        leader = next((r for r in replicas if r in serving), None)
        if leader is not None:
            return PartitionState(leader, state.leader_epoch + 1, (leader,), epoch)
    if state.leader == NO_LEADER and not live_isr:
        return None
    # Nobody can lead: keep the last replica that was in sync (the old leader if it was).
    in_sync = [r for r in state.isr if r in replicas]
    last = state.leader if state.leader in in_sync else (in_sync[-1] if in_sync else None)
    isr = (last,) if last is not None else ()
    if state.leader == NO_LEADER and isr == state.isr:
        return None
    return PartitionState(NO_LEADER, state.leader_epoch + 1, isr, epoch)


def led_partitions_to_move(
    assignments: Mapping[str, TopicAssignment],
    states: Mapping[tuple[str, int], tuple[PartitionState, int]],
    node_id: int,
) -> set[tuple[str, int]]:
    """The partitions with other replicas that ``node_id`` still leads: what a controlled
    shutdown must move before the broker exits (Kafka answers the same set as
    ``partitionsRemaining``; a partition with one replica cannot move and is not counted)."""
    moving = set()
    for (topic, partition), (state, _version) in states.items():
        assignment = assignments.get(topic)
        if (
            state.leader == node_id
            and assignment is not None
            and len(assignment.replicas.get(partition, ())) > 1
        ):
            moving.add((topic, partition))
    return moving


def preferred_leader_changes(
    assignments: Mapping[str, TopicAssignment],
    states: Mapping[tuple[str, int], tuple[PartitionState, int]],
    live: set[int],
    controller_epoch: int,
    imbalance_percentage: int,
    deleting: set[str] = frozenset(),  # type: ignore[assignment]
    shutting_down: set[int] = frozenset(),  # type: ignore[assignment]
) -> list[StateChange]:
    """Kafka's auto leader rebalance (``checkAndTriggerAutoLeaderRebalance``).

    For each broker, the partitions whose preferred replica (the first of the
    assignment) it is but which another broker leads: when their share of all the
    partitions it is preferred for exceeds ``leader.imbalance.per.broker.percentage``,
    each of them whose preferred replica is live, serving and in the ISR moves back
    to it. Not while a partition is being reassigned (Kafka waits for reassignments
    to finish) nor for a topic queued for deletion.
    """
    serving = live - shutting_down
    preferred_for: dict[int, list[tuple[str, int]]] = {}
    for topic, assignment in assignments.items():
        if topic in deleting:
            continue
        if assignment.adding or assignment.removing:
            return []
        for partition, replicas in assignment.replicas.items():
            if replicas and (topic, partition) in states:
                preferred_for.setdefault(replicas[0], []).append((topic, partition))
    changes = []
    for broker, keys in sorted(preferred_for.items()):
        elsewhere = [k for k in sorted(keys) if states[k][0].leader != broker]
        if len(elsewhere) * 100 <= imbalance_percentage * len(keys) or broker not in serving:
            continue
        for topic, partition in elsewhere:
            state, version = states[(topic, partition)]
            if broker in state.isr:
                new = PartitionState(broker, state.leader_epoch + 1, state.isr, controller_epoch)
                changes.append(StateChange(topic, partition, new, version))
    return changes


@dataclass(frozen=True, slots=True)
class ReassignmentCompletion:
    """One topic's finished reassignments: its new assignment (written conditional on
    ``expected_version`` of the topic znode) and the partition states that go with it."""

    topic: str
    assignment: TopicAssignment
    expected_version: int
    states: tuple[StateChange, ...]


def completed_reassignments(
    assignments: Mapping[str, tuple[TopicAssignment, int]],
    states: Mapping[tuple[str, int], tuple[PartitionState, int]],
    live: set[int],
    controller_epoch: int,
    shutting_down: set[int] = frozenset(),  # type: ignore[assignment]
) -> list[ReassignmentCompletion]:
    """The reassignments whose target replicas are all in sync, finished (``assignments``
    holds (assignment, znode version)). A partition whose target has no live, serving ISR
    member to lead waits."""
    serving = live - shutting_down
    done = []
    for topic, (assignment, version) in assignments.items():
        replicas, adding, removing = (
            dict(assignment.replicas),
            dict(assignment.adding),
            dict(assignment.removing),
        )
        changes, finished_any = [], False
        for partition in sorted(set(adding) | set(removing)):
            held = states.get((topic, partition))
            removed = set(removing.get(partition, ()))
            target = tuple(r for r in replicas.get(partition, ()) if r not in removed)
            if held is None or not target or not set(target) <= set(held[0].isr):
                continue
            state, state_version = held
            isr = tuple(r for r in state.isr if r in target)
            leader = state.leader
            if leader not in target or leader not in serving:
                leader = next((r for r in target if r in serving and r in isr), NO_LEADER)
                if leader == NO_LEADER:
                    continue
            # Always a new leader epoch: the replicas learn of the smaller replica set.
            new = PartitionState(leader, state.leader_epoch + 1, isr, controller_epoch)
            changes.append(StateChange(topic, partition, new, state_version))
            replicas[partition] = target
            adding.pop(partition, None)
            removing.pop(partition, None)
            finished_any = True
        if finished_any:
            finished = TopicAssignment(assignment.topic_id, replicas, adding, removing)
            done.append(ReassignmentCompletion(topic, finished, version, tuple(changes)))
    return done
