"""The exactly-once sink through crashes: a streaming query whose driver dies after deciding a
micro-batch, then one whose task fails mid-batch after its driver can no longer abort, each
restarted from its checkpoint; a read_committed consumer sees every input row exactly once.

A dying driver is played by a data source that is the odradek sink with a different
``commit`` and ``abort``: the real decision step, then an exception instead of the commits
(batch 1), and no abort at all, since a dead driver aborts nothing. Everything else (tasks,
transactions, recovery, the broker) is the real thing.
"""

from __future__ import annotations

import os
import sys
import time
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition
from pyspark import cloudpickle
from pyspark.errors import StreamingQueryException

from odradek.spark import exactly_once
from odradek.spark.options import parse_sink_options
from odradek.spark.sink import OdradekStreamWriter
from odradek.spark.source import OdradekDataSource

# Spark's workers cannot import this test module: send its classes and functions by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

ROWS = 60
PER_BATCH = 20  # maxOffsetsPerTrigger: batches 0, 1 and 2
WAIT_S = 120


class DyingDriverWriter(OdradekStreamWriter):
    def __init__(self, options, schema, poison: bytes, marker: str) -> None:
        super().__init__(options, schema)
        self.poison, self.marker = poison, marker

    def write(self, iterator):
        return super().write(fail_first_time(iterator, self.poison, self.marker + ".task"))

    def commit(self, messages, batchId: int) -> None:
        died = self.marker + ".driver"
        if batchId != 1 or os.path.exists(died):
            super().commit(messages, batchId)
            return
        open(died, "w").close()
        prefix = self.options.transactional_id_prefix
        with exactly_once._client(self.options) as client:
            exactly_once.decide(client, prefix, batchId, exactly_once._prepared(messages))
        raise RuntimeError("the driver dies after deciding batch 1, before committing it")

    def abort(self, messages, batchId: int) -> None:
        """A dead driver aborts nothing: what it prepared is left to recovery."""


class DyingDriverSource(OdradekDataSource):
    @classmethod
    def name(cls) -> str:
        return "odradek_dying_driver"

    def streamWriter(self, schema, overwrite):
        options = dict(self.options)
        poison, marker = options.pop("poison").encode(), options.pop("marker")
        return DyingDriverWriter(parse_sink_options(options), schema, poison, marker)


def fail_first_time(batches, poison: bytes, marker: str):
    """The task's rows, failing the task holding ``poison`` the first time, after passing on the
    rows before it (the sink has sent them in its transaction by then)."""
    for batch in batches:
        values = batch.column("value").to_pylist()
        if poison in values and not os.path.exists(marker):
            open(marker, "w").close()
            cut = values.index(poison)
            if cut:
                yield batch.slice(0, cut)
            raise RuntimeError("a task fails mid-batch on its first attempt")
        yield batch


def read(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": uuid.uuid4().hex,
            "enable.partition.eof": True,
            "isolation.level": isolation,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values, eof = [], set()
    deadline = time.monotonic() + 30
    try:
        while len(eof) < partitions:
            assert time.monotonic() < deadline, f"{topic}: no end after {len(values)} records"
            for message in consumer.consume(1000, timeout=0.2):
                if message.error() is None:
                    values.append(message.value())
                else:
                    eof.add(message.partition())
    finally:
        consumer.close()
    return values


def test_every_row_exactly_once_through_a_dying_driver_and_a_failing_task(
    spark, bootstrap, new_topic, produce, tmp_path
):
    if os.environ.get("ODRADEK_SPARK_TEST_BOOTSTRAP_SERVERS"):
        pytest.skip("needs KIP-939 KeepPreparedTxn, which only Odradek's broker serves")
    spark.dataSource.register(DyingDriverSource)
    source, sink = new_topic(partitions=2), new_topic(partitions=3)
    rows = [b"r%02d" % i for i in range(ROWS)]
    produce(source, [{"value": v, "key": v, "partition": i % 2} for i, v in enumerate(rows)])
    checkpoint, prefix = str(tmp_path / "ckpt"), f"eos-{uuid.uuid4().hex[:8]}"

    def run(fmt: str, **extra: str):
        stream = (
            spark.readStream.format("odradek")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", str(PER_BATCH))
            .load()
            .select("key", "value")
        )
        query = (
            stream.writeStream.format(fmt)
            .options(**extra)
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", sink)
            .option("transactional.id.prefix", prefix)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        try:
            assert query.awaitTermination(WAIT_S), "query did not finish"
        except StreamingQueryException as failure:
            return failure
        return None

    # Batch 0 commits; the driver dies once it decided batch 1.
    dying = {"poison": rows[2 * PER_BATCH + 5].decode(), "marker": str(tmp_path / "crashed")}
    assert "dies after deciding batch 1" in str(run("odradek_dying_driver", **dying))
    # Restarted: batch 1 runs again (its tasks commit the decided transactions they find and
    # the driver aborts the rerun's), then a task of batch 2 fails and the driver dies with it.
    assert "fails mid-batch" in str(run("odradek_dying_driver", **dying))
    # Restarted again with the plain sink: batch 2's prepared leftovers are aborted, it is
    # written again and the query drains the topic.
    assert run("odradek") is None

    committed = read(bootstrap, sink, 3, "read_committed")
    assert sorted(committed) == rows
    # The crashes did write rows twice; read_committed never sees the aborted copies.
    everything = read(bootstrap, sink, 3, "read_uncommitted")
    assert len(everything) > ROWS and set(everything) == set(rows)
