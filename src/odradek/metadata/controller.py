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
- every change bumps the leader epoch and carries the controller epoch.
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
                new = _next(current[0], replicas, live, controller_epoch, unclean_allowed(topic))
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
    epoch: int,
    unclean: bool,
) -> PartitionState | None:
    live_isr = tuple(r for r in state.isr if r in live)
    if state.leader != NO_LEADER and state.leader in live:
        if live_isr == state.isr:
            return None
        return PartitionState(state.leader, state.leader_epoch + 1, live_isr, epoch)
    leader = next((r for r in replicas if r in live and r in state.isr), None)
    if leader is not None:
        return PartitionState(leader, state.leader_epoch + 1, live_isr, epoch)
    if unclean:
        leader = next((r for r in replicas if r in live), None)
        if leader is not None:
            return PartitionState(leader, state.leader_epoch + 1, (leader,), epoch)
    if state.leader == NO_LEADER and not live_isr:
        return None
    # Nobody can lead: keep the last replica that was in sync (the old leader if it was).
    last = state.leader if state.leader in state.isr else (state.isr[-1] if state.isr else None)
    isr = (last,) if last is not None else ()
    if state.leader == NO_LEADER and isr == state.isr:
        return None
    return PartitionState(NO_LEADER, state.leader_epoch + 1, isr, epoch)
