"""Server-side assignors of the consumer protocol (KIP-848): uniform and range.

An assignor maps each member to the partitions (topic id -> partition numbers)
it should own, given what every member subscribes to and the current owners.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

#: topic id -> partitions.
Assignment = dict[uuid.UUID, set[int]]


def _eligible(subscriptions: Mapping[str, set[uuid.UUID]], topic_id: uuid.UUID) -> list[str]:
    return sorted(m for m, topics in subscriptions.items() if topic_id in topics)


def range_assign(
    subscriptions: Mapping[str, set[uuid.UUID]],
    partitions: Mapping[uuid.UUID, int],
    current: Mapping[str, Assignment],
) -> dict[str, Assignment]:
    """Per topic, contiguous ranges to the subscribed members in member id order (as the classic range)."""
    out: dict[str, Assignment] = {m: {} for m in subscriptions}
    for topic_id, count in partitions.items():
        members = _eligible(subscriptions, topic_id)
        if not members:
            continue
        per, extra = divmod(count, len(members))
        start = 0
        for i, member in enumerate(members):
            n = per + (1 if i < extra else 0)
            if n:
                out[member][topic_id] = set(range(start, start + n))
            start += n
    return out


def uniform_assign(
    subscriptions: Mapping[str, set[uuid.UUID]],
    partitions: Mapping[uuid.UUID, int],
    current: Mapping[str, Assignment],
) -> dict[str, Assignment]:
    """Spread all partitions evenly, keeping each member's current partitions where balance allows."""
    out: dict[str, Assignment] = {m: {} for m in subscriptions}
    counts = dict.fromkeys(subscriptions, 0)
    total = sum(n for t, n in partitions.items() if _eligible(subscriptions, t))
    quota = -(-total // len(subscriptions)) if subscriptions else 0
    taken: set[tuple[uuid.UUID, int]] = set()
    for member in sorted(subscriptions):
        for topic_id, parts in current.get(member, {}).items():
            if topic_id not in partitions or topic_id not in subscriptions[member]:
                continue
            for p in sorted(parts):
                if (
                    p < partitions[topic_id]
                    and counts[member] < quota
                    and (topic_id, p) not in taken
                ):
                    out[member].setdefault(topic_id, set()).add(p)
                    counts[member] += 1
                    taken.add((topic_id, p))
    for topic_id in sorted(partitions, key=str):
        members = _eligible(subscriptions, topic_id)
        for p in range(partitions[topic_id]):
            if (topic_id, p) in taken or not members:
                continue
            member = min(members, key=lambda m: (counts[m], m))
            out[member].setdefault(topic_id, set()).add(p)
            counts[member] += 1
    return out


ASSIGNORS = {"uniform": uniform_assign, "range": range_assign}
DEFAULT_ASSIGNOR = "uniform"
