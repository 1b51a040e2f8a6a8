"""The exactly-once sink's protocol against a real broker without Spark: tasks' prepared
transactions, the driver's decision and commit, and recovery of what a dead driver or a
failed attempt left open, read back by read_committed and read_uncommitted consumers."""

from __future__ import annotations

import time
import uuid

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, TopicPartition

from odradek.spark import exactly_once as eo
from odradek.spark.options import parse_sink_options
from odradek.spark.txn_client import TransactionClient


@pytest.fixture
def sink(bootstrap, new_topic):
    """(options, topic) of an exactly-once sink writing to a fresh one-partition topic."""
    topic = new_topic()
    options = parse_sink_options(
        {
            "kafka.bootstrap.servers": bootstrap,
            "topic": topic,
            "transactional.id.prefix": f"eos-{uuid.uuid4().hex[:8]}",
        }
    )
    return options, topic


def rows(*values: bytes):
    return iter([pa.record_batch([pa.array(values, pa.binary())], names=["value"])])


def read(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    """Every record up to the partition's end, which a read_committed reader reaches only once
    no transaction holds the last stable offset back."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": uuid.uuid4().hex,
            "enable.partition.eof": True,
            "isolation.level": isolation,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while True:
            assert time.monotonic() < deadline, f"no end of {topic} after {values}"
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error() is not None:
                return sorted(values)
            values.append(message.value())
    finally:
        consumer.close()


def test_a_batch_commits_once_and_its_rerun_is_aborted(sink, bootstrap):
    options, topic = sink
    first = [eo.prepare_partition(rows(b"a", b"b"), options, 0)]
    first.append(eo.prepare_partition(rows(b"c"), options, 1))
    first.append(eo.prepare_partition(rows(), options, 2))  # a task with no rows
    assert first[2].topics == ()
    eo.commit_batch(options, 0, first)
    assert read(bootstrap, topic, "read_committed") == [b"a", b"b", b"c"]
    # The query restarted before Spark recorded batch 0: the rerun is decided already.
    rerun = [eo.prepare_partition(rows(b"a", b"b"), options, 0)]
    eo.commit_batch(options, 0, rerun)
    assert read(bootstrap, topic, "read_committed") == [b"a", b"b", b"c"]
    assert read(bootstrap, topic, "read_uncommitted") == [b"a", b"a", b"b", b"b", b"c"]


def test_a_query_behind_the_prefixs_decisions_fails_and_writes_nothing(sink, bootstrap):
    """The prefix of another query, or a checkpoint replaced by an older one: batch 0 after a
    decision of batch 3 would be a duplicate if committed and a loss if quietly skipped."""
    options, topic = sink
    eo.commit_batch(options, 3, [eo.prepare_partition(rows(b"x"), options, 0)])
    late = [eo.prepare_partition(rows(b"y"), options, 0)]
    with pytest.raises(eo.ForeignDecision, match="prefix of its own"):
        eo.commit_batch(options, 0, late)
    assert read(bootstrap, topic, "read_committed") == [b"x"]


def test_a_dead_drivers_transactions_are_ended_as_decided(sink, bootstrap):
    options, topic = sink
    prefix = options.transactional_id_prefix
    # Batch 0: decided, then the driver died before committing.
    decided = [eo.prepare_partition(rows(b"d0"), options, 0)]
    decided.append(eo.prepare_partition(rows(b"d3"), options, 3))
    with TransactionClient(bootstrap, "test") as client:
        eo.decide(client, prefix, 0, decided)
    # Batch 1: prepared, never decided (the driver died again).
    eo.prepare_partition(rows(b"lost"), options, 5)
    # The restarted query's task 0 finds batch 0's transaction open and commits it; the
    # driver's sweep commits task 3's and aborts task 5's, which nothing else would end.
    later = [eo.prepare_partition(rows(b"n0"), options, 0)]
    eo.commit_batch(options, 1, later)
    assert read(bootstrap, topic, "read_committed") == [b"d0", b"d3", b"n0"]
    assert read(bootstrap, topic, "read_uncommitted") == [b"d0", b"d3", b"lost", b"n0"]


def test_a_retried_task_aborts_what_its_failed_attempt_sent(sink, bootstrap):
    options, topic = sink

    def failing():
        yield from rows(b"half")
        raise RuntimeError("the attempt fails")

    with pytest.raises(RuntimeError, match="the attempt fails"):
        eo.prepare_partition(failing(), options, 0)
    retried = eo.prepare_partition(rows(b"whole"), options, 0)
    eo.commit_batch(options, 0, [retried])
    assert read(bootstrap, topic, "read_committed") == [b"whole"]
