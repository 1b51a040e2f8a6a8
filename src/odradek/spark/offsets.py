"""Offset-range planning, sans-I/O: what each Spark task reads.

Offsets are kept as {topic: {partition: offset}}; in checkpoints they are
JSON objects with string partition keys, exactly as Spark's Kafka source
writes them ({"topicA":{"0":23,"1":42}}).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass

PartitionOffsets = dict[tuple[str, int], int]


@dataclass(frozen=True)
class OffsetRange:
    """Offsets [from_offset, until_offset) of one topic partition: one Spark task."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def size(self) -> int:
        return self.until_offset - self.from_offset


def to_json_dict(offsets: Mapping[tuple[str, int], int]) -> dict[str, dict[str, int]]:
    result: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        result.setdefault(topic, {})[str(partition)] = offset
    return result


def from_json_dict(data: Mapping[str, Mapping[str, int]]) -> PartitionOffsets:
    return {(topic, int(p)): int(o) for topic, parts in data.items() for p, o in parts.items()}


def plan_ranges(
    start: Mapping[tuple[str, int], int],
    end: Mapping[tuple[str, int], int],
    min_partitions: int | None = None,
) -> list[OffsetRange]:
    """Ranges between two offset maps, large ones split so there are about min_partitions tasks.

    Empty ranges are dropped. Splitting follows Spark's KafkaOffsetRangeCalculator:
    a range bigger than total/min_partitions is cut into that many equal parts.
    """
    ranges = [
        OffsetRange(topic, partition, start[(topic, partition)], until)
        for (topic, partition), until in sorted(end.items())
        if (topic, partition) in start and until > start[(topic, partition)]
    ]
    if not min_partitions or min_partitions <= len(ranges):
        return ranges
    total = sum(r.size for r in ranges)
    ideal = total / min_partitions
    split: list[OffsetRange] = []
    for r in ranges:
        parts = max(1, math.ceil(r.size / ideal)) if r.size > ideal else 1
        bounds = [r.from_offset + (r.size * i) // parts for i in range(parts + 1)]
        split.extend(
            OffsetRange(r.topic, r.partition, lo, hi)
            for lo, hi in itertools.pairwise(bounds)
            if hi > lo
        )
    return split


def rate_limit(
    start: Mapping[tuple[str, int], int], latest: Mapping[tuple[str, int], int], limit: int
) -> PartitionOffsets:
    """End offsets admitting at most `limit` records, shared in proportion to each backlog.

    As Spark's Kafka source: a partition's share below one record is rounded up so
    that small partitions are not starved, otherwise it is rounded down.
    """
    backlog = {tp: max(0, end - start.get(tp, end)) for tp, end in latest.items()}
    total = sum(backlog.values())
    if total <= limit:
        return dict(latest)
    result: PartitionOffsets = {}
    for tp, end in latest.items():
        begin = start.get(tp, end)
        share = limit * (backlog[tp] / total)
        step = math.ceil(share) if share < 1 else math.floor(share)
        result[tp] = min(end, begin + step)
    return result


def records_between(
    start: Mapping[tuple[str, int], int], end: Mapping[tuple[str, int], int]
) -> int:
    return sum(max(0, o - start.get(tp, o)) for tp, o in end.items())


def cap(
    offsets: Mapping[tuple[str, int], int], ceiling: Mapping[tuple[str, int], int]
) -> PartitionOffsets:
    """Offsets no higher than a ceiling (Trigger.AvailableNow's target); partitions it lacks are kept."""
    return {tp: min(o, ceiling[tp]) if tp in ceiling else o for tp, o in offsets.items()}
