"""The exactly-once sink's commit decision, as committed offsets of a group: encoding, sans-I/O.

Before the driver commits a micro-batch's prepared transactions it records that batch
``batch_id`` commits them: one OffsetCommit for the group named after the query's
transactional id prefix, offset = the batch id, the metadata listing each task's prepared
transaction as ``task partition:producer id:epoch`` (the identity KIP-939 calls
PreparedTxnState). One OffsetCommit is one record batch in __consumer_offsets, so the
decision is written whole or not at all; it is the commit point of the micro-batch. After
it, every prepared transaction it names is committed, by the driver or, if the driver died,
by whoever finds it open (a task of the restarted query, or its driver); a prepared
transaction it does not name is aborted. A query restarted after the decision of batch N
and before Spark recorded batch N in its checkpoint runs batch N again: the decision says
N is done, so that rerun's transactions are aborted.

Kafka bounds a commit's metadata (``offset.metadata.max.bytes``, 4096 by default), so a
long list is split into chunks, one per partition of the topic the decision is filed under,
each ``odradek-2pc/1 <i>/<n> <entries>``; all of them go in the one OffsetCommit.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

MAGIC = "odradek-2pc/1"
#: Kafka's offset.metadata.max.bytes default.
METADATA_MAX_BYTES = 4096


class DecisionError(ValueError):
    """A decision that cannot be written (too large) or read (incomplete)."""


@dataclass(frozen=True)
class Decision:
    """Micro-batch ``batch_id`` commits these transactions: task partition -> (producer id, epoch)."""

    batch_id: int
    transactions: tuple[tuple[int, tuple[int, int]], ...]

    @classmethod
    def of(cls, batch_id: int, transactions: dict[int, tuple[int, int]]) -> Decision:
        return cls(batch_id, tuple(sorted(transactions.items())))

    def identity(self, task_partition: int) -> tuple[int, int] | None:
        """The decided transaction of a task partition, None when the batch had none there."""
        return dict(self.transactions).get(task_partition)


def encode(
    decision: Decision, partitions: int, max_bytes: int = METADATA_MAX_BYTES
) -> dict[int, tuple[int, str]]:
    """The decision as committed offsets: partition -> (offset, metadata), in as few chunks as fit."""
    entries = [f"{task}:{pid}:{epoch}" for task, (pid, epoch) in decision.transactions]
    header = len(MAGIC) + 2 * len(str(partitions)) + 3  # "<magic> <i>/<n> "
    chunks: list[list[str]] = [[]]
    size = header
    for entry in entries:
        extra = len(entry) + (1 if chunks[-1] else 0)
        if chunks[-1] and size + extra > max_bytes:
            chunks.append([])
            size, extra = header, len(entry)
        if header + len(entry) > max_bytes:
            raise DecisionError(f"a decision entry does not fit in {max_bytes} bytes")
        chunks[-1].append(entry)
        size += extra
    if len(chunks) > partitions:
        raise DecisionError(
            f"the decision of batch {decision.batch_id} needs {len(chunks)} chunks of "
            f"offset metadata and its topic has {partitions} partitions: give the topic more "
            "partitions or the query fewer tasks"
        )
    n = len(chunks)
    return {
        i: (decision.batch_id, f"{MAGIC} {i}/{n} {','.join(chunk)}")
        for i, chunk in enumerate(chunks)
    }


def decode(rows: list[tuple[str, int, int, str | None]]) -> Decision | None:
    """The latest decision among a group's committed offsets (topic, partition, offset, metadata)."""
    chunks: dict[int, dict[int, tuple[int, str]]] = defaultdict(dict)
    for _topic, _partition, offset, metadata in rows:
        if not metadata or not metadata.startswith(MAGIC + " "):
            continue
        _, position, body = metadata.split(" ", 2)
        chunk, _, count = position.partition("/")
        chunks[offset][int(chunk)] = (int(count), body)
    if not chunks:
        return None
    batch_id = max(chunks)
    found = chunks[batch_id]
    counts = {count for count, _ in found.values()}
    if len(counts) != 1 or set(found) != set(range(counts.pop())):
        raise DecisionError(
            f"the decision of batch {batch_id} is incomplete: chunks {sorted(found)}"
        )
    transactions: dict[int, tuple[int, int]] = {}
    for index in sorted(found):
        body = found[index][1]
        for entry in filter(None, body.split(",")):
            task, pid, epoch = (int(x) for x in entry.split(":"))
            transactions[task] = (pid, epoch)
    return Decision.of(batch_id, transactions)
