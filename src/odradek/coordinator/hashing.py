"""Which __consumer_offsets partition holds a group.

Kafka places a group by ``Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions``
with Java's String.hashCode over UTF-16 code units; using the same function keeps
a group on the partition Kafka tooling expects.
"""

from __future__ import annotations

_INT_MIN = -(1 << 31)


def java_string_hash(s: str) -> int:
    """Java's String.hashCode: s[0]*31^(n-1) + ... over UTF-16 code units, as a signed int32."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def java_abs(n: int) -> int:
    """Kafka's Utils.abs: Math.abs, except Integer.MIN_VALUE maps to 0 rather than itself."""
    return 0 if n == _INT_MIN else abs(n)


def partition_for(group_id: str, num_partitions: int) -> int:
    """The __consumer_offsets partition of ``group_id``."""
    return java_abs(java_string_hash(group_id)) % num_partitions
