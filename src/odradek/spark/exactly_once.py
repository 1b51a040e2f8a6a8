"""Exactly-once streaming writes: Spark's driver as the external coordinator of KIP-939.

Spark's streaming write protocol gives a sink two phases: every task's ``write`` returns a
commit message, then the driver's ``commit(messages, batchId)`` runs once all tasks of the
micro-batch succeeded (``abort`` if they did not), and only after it does Spark record the
batch in its checkpoint's commit log. This module maps that onto two-phase commit:

1. **Prepare (task).** A task writes its partition of the micro-batch in a transaction of
   its own, transactional id ``<prefix>-<task partition>``, opened with InitProducerId v6
   Enable2Pc (so no timeout aborts it), flushes it with acks=all and returns the producer id
   and epoch in its commit message, without EndTxn. A retried task reuses the id, and its
   InitProducerId fences the failed attempt (after resolving an open transaction, below).
2. **Decide (driver).** ``commit`` takes every prepared transaction over (InitProducerId with
   KeepPreparedTxn: the transaction's own identity must be what the task reported, and the
   next epoch now fences any zombie attempt), then records the decision, batch id and the
   transactions' identities, as one OffsetCommit of the group named after the prefix
   (decision.py). That record is the micro-batch's commit point.
3. **Commit (driver).** EndTxn commit for each transaction, with the next epoch.

Recovery follows the decision, whoever finds an open transaction of the prefix: a task
starting (its id's transaction is still open), or the driver before it decides (ids no task
of the micro-batch used, found by ListTransactions), so that no decision replaces one whose
transactions are still open. A transaction the latest decision names is committed; any
other is aborted. So when the driver dies

* before the decision: the restarted query runs the micro-batch again (Spark did not record
  it) and the first write's transactions are aborted, by the tasks that take their ids over
  or by the driver's sweep;
* after the decision: its transactions are committed by whoever finds them open, and the
  micro-batch run again (Spark did not record it) finds its batch id decided, so the driver
  aborts the rerun's transactions instead of committing them.

A transaction is committed only if named by a decision, and a batch is decided once, so no
record is written twice; every decided transaction stays prepared (two-phase commit
transactions never time out) until it is committed, so none is lost. The prefix, like a
transactional id, must belong to one query at a time. Spark's speculative execution must
stay off (its default): a speculative copy of a finished task would abort the transaction
the driver is about to commit, and the commit then fails the micro-batch loudly.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import WriterCommitMessage

from odradek.spark import decision as dec
from odradek.spark.options import SinkOptions
from odradek.spark.producer import (
    ProducerState,
    ProduceSettings,
    produce_into,
    shared_metadata,
)
from odradek.spark.txn_client import ProducerIdentity, TransactionClient


@dataclass
class PreparedTransaction(WriterCommitMessage):
    """A task's commit message: its prepared transaction, or no topics when it wrote nothing."""

    task_partition: int
    producer_id: int
    producer_epoch: int
    topics: tuple[str, ...]
    count: int


class ForeignDecision(RuntimeError):
    """The prefix's decisions are ahead of the query: not this query's, or its checkpoint's."""


class PreparedTransactionLost(RuntimeError):
    """A prepared transaction was ended by someone else before the driver could commit it."""


def transactional_id(prefix: str, task_partition: int) -> str:
    return f"{prefix}-{task_partition}"


def _task_partition(prefix: str, tid: str) -> int | None:
    """The task partition of one of the prefix's transactional ids, None for anyone else's."""
    match = re.fullmatch(re.escape(prefix) + r"-(\d+)", tid)
    return int(match.group(1)) if match else None


def _client(options: SinkOptions) -> TransactionClient:
    settings = ProduceSettings.from_options(options)
    return TransactionClient(
        options.producer_config_dict()["bootstrap.servers"],
        settings.client_id,
        settings.delivery_timeout_s,
    )


def _prefix(options: SinkOptions) -> str:
    assert options.transactional_id_prefix is not None
    return options.transactional_id_prefix


def read_decision(client: TransactionClient, prefix: str) -> dec.Decision | None:
    return dec.decode(client.fetch_offsets(prefix))


def resolve(
    client: TransactionClient, prefix: str, tid: str, decision: dec.Decision | None
) -> None:
    """End the transaction open on ``tid``, if any, as the latest decision says: committed when
    it names it, else aborted."""
    identity = client.init_producer_id(tid, keep_prepared=True)
    if identity.kept is None:
        return
    task = _task_partition(prefix, tid)
    decided = decision is not None and task is not None and decision.identity(task) == identity.kept
    client.end_txn(tid, identity.producer_id, identity.producer_epoch, decided)


# ---- task side -----------------------------------------------------------------------------


@dataclass
class TransactionalProducerState(ProducerState):
    """The sink's producer inside one transaction: partitions join it before their first batch."""

    client: TransactionClient | None = None
    #: The partitions in the transaction.
    added: set[tuple[str, int]] = field(default_factory=set)

    def produce(
        self, topic: str, partition: int, keys: pa.Array, values: pa.Array, headers: pa.Array | None
    ) -> None:
        if (topic, partition) not in self.added:
            assert self.transactional_id is not None and self.client is not None
            self.client.add_partitions(
                self.transactional_id, self.producer_id, self.producer_epoch, topic, [partition]
            )
            self.added.add((topic, partition))
        super().produce(topic, partition, keys, values, headers)


def _begin(client: TransactionClient, prefix: str, tid: str) -> ProducerIdentity:
    """A fresh epoch for ``tid``, after ending what an earlier attempt or run left open there."""
    identity = client.init_producer_id(tid, keep_prepared=True)
    if identity.kept is None:
        return identity
    resolve(client, prefix, tid, read_decision(client, prefix))
    identity = client.init_producer_id(tid, keep_prepared=True)
    if identity.kept is not None:
        raise PreparedTransactionLost(f"{tid}: another writer opened a transaction meanwhile")
    return identity


def prepare(batches: Iterator[pa.RecordBatch], options: SinkOptions) -> PreparedTransaction:
    """Write this Spark task's rows in a transaction of its own and leave it prepared."""
    context = TaskContext.get()
    if context is None:
        raise RuntimeError("exactly-once writes run in Spark tasks")
    return prepare_partition(batches, options, context.partitionId())


def prepare_partition(
    batches: Iterator[pa.RecordBatch], options: SinkOptions, task: int
) -> PreparedTransaction:
    """Write task partition ``task``'s rows in its transaction, flushed and not ended."""
    prefix = _prefix(options)
    tid = transactional_id(prefix, task)
    client = _client(options)
    state = TransactionalProducerState(
        options,
        ProduceSettings.from_options(options),
        shared_metadata(options),
        transactional_id=tid,
        client=client,
    )
    try:
        identity = _begin(client, prefix, tid)
        state.producer_id, state.producer_epoch = identity.producer_id, identity.producer_epoch
        count = produce_into(state, batches, options)
    except BaseException:
        # Abort now rather than leave a transaction that no timeout ends open until a retry.
        if state.producer_id >= 0 and state.added:
            with contextlib.suppress(Exception):  # the task's own error is the one to report
                client.end_txn(tid, state.producer_id, state.producer_epoch, commit=False)
        raise
    finally:
        state.close()
        client.close()
    topics = tuple(sorted({topic for topic, _ in state.added}))
    return PreparedTransaction(task, identity.producer_id, identity.producer_epoch, topics, count)


# ---- driver side ---------------------------------------------------------------------------


def _prepared(messages: list[WriterCommitMessage | None]) -> list[PreparedTransaction]:
    return [m for m in messages if isinstance(m, PreparedTransaction) and m.topics]


def commit_batch(
    options: SinkOptions, batch_id: int, messages: list[WriterCommitMessage | None]
) -> None:
    """Decide and commit micro-batch ``batch_id`` (see the module docstring)."""
    prefix = _prefix(options)
    prepared = _prepared(messages)
    with _client(options) as client:
        taken = decide(client, prefix, batch_id, prepared)
        for m in prepared:
            if m.task_partition in taken:
                identity = taken[m.task_partition]
                tid = transactional_id(prefix, m.task_partition)
                client.end_txn(tid, identity.producer_id, identity.producer_epoch, commit=True)


def decide(
    client: TransactionClient, prefix: str, batch_id: int, prepared: list[PreparedTransaction]
) -> dict[int, ProducerIdentity]:
    """Take the prepared transactions over and record the decision to commit them: the
    identities to commit each with, by task partition (none when an earlier run of the query
    decided this batch already, whose rerun's transactions are then aborted)."""
    decision = read_decision(client, prefix)
    # What the latest decision left open on ids no task of this batch used (a dead driver's,
    # a run with more tasks) ends as it says before a newer decision replaces it.
    _sweep(client, prefix, decision, {m.task_partition for m in prepared})
    if decision is not None and decision.batch_id >= batch_id:
        _abort(client, prefix, prepared, decision)
        if decision.batch_id > batch_id:
            # Batches are decided in order: a later one means another query's prefix, or a
            # checkpoint older than the decisions. Committing could duplicate, skipping lose.
            raise ForeignDecision(
                f"transactional.id.prefix {prefix!r} has decided batch {decision.batch_id}, "
                f"after this query's batch {batch_id}: the prefix belongs to another query or "
                "the checkpoint was replaced; give this query a prefix of its own"
            )
        return {}
    if not prepared:
        return {}
    taken = _take_over(client, prefix, prepared)
    decision = dec.Decision.of(
        batch_id, {m.task_partition: (m.producer_id, m.producer_epoch) for m in prepared}
    )
    topic = prepared[0].topics[0]
    client.commit_offsets(prefix, topic, dec.encode(decision, client.cluster(topic)[1]))
    return taken


def abort_batch(options: SinkOptions, messages: list[WriterCommitMessage | None]) -> None:
    """Spark gave the micro-batch up (a task failed, or ``commit`` raised): end the transactions
    its tasks prepared as the latest decision says. A commit that raised after its decision
    was written is thus completed, not undone; anything else is aborted."""
    prefix = _prefix(options)
    with _client(options) as client:
        _abort(client, prefix, _prepared(messages), read_decision(client, prefix))


def _take_over(
    client: TransactionClient, prefix: str, prepared: list[PreparedTransaction]
) -> dict[int, ProducerIdentity]:
    """KeepPreparedTxn on every prepared transaction, checking each is still the task's; if one
    is not, abort those taken and fail the micro-batch (Spark runs it again)."""
    taken: dict[int, ProducerIdentity] = {}
    try:
        for m in prepared:
            tid = transactional_id(prefix, m.task_partition)
            identity = client.init_producer_id(tid, keep_prepared=True)
            taken[m.task_partition] = identity
            if identity.kept != (m.producer_id, m.producer_epoch):
                raise PreparedTransactionLost(
                    f"{tid}: the transaction prepared as {m.producer_id}/{m.producer_epoch} is no "
                    f"longer open (found {identity.kept}); the micro-batch is written again"
                )
    except BaseException:
        for task, identity in taken.items():
            if identity.kept is not None:
                tid = transactional_id(prefix, task)
                client.end_txn(tid, identity.producer_id, identity.producer_epoch, commit=False)
        raise
    return taken


def _abort(
    client: TransactionClient,
    prefix: str,
    prepared: list[PreparedTransaction],
    decision: dec.Decision | None,
) -> None:
    """End what is open on the tasks' ids as ``decision`` says: aborted unless it names it."""
    for m in prepared:
        resolve(client, prefix, transactional_id(prefix, m.task_partition), decision)


def _sweep(
    client: TransactionClient,
    prefix: str,
    decision: dec.Decision | None,
    done: set[int],
) -> None:
    """Resolve the prefix's open transactions on ids not in ``done``."""
    for tid in client.ongoing_transactions(client.cluster(None)[0]):
        task = _task_partition(prefix, tid)
        if task is not None and task not in done:
            resolve(client, prefix, tid, decision)
