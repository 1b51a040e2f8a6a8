"""The sink, batch and streaming, as Spark's Kafka sink: at-least-once, or exactly-once.

Columns: value (required), key, topic, partition, headers. The `topic`
option, when set, overrides the topic column. Each task produces its rows
through an idempotent producer and flushes before reporting success, so a
committed task's records are on the broker; a task retried by Spark may
write its records again (at-least-once, exactly as Spark's Kafka sink).
The producer is odradek.spark.producer (whole Arrow batches as record
batches) when the sink's kafka.* options allow it, else librdkafka's.

With the `transactional.id.prefix` option a streaming query writes exactly once,
each micro-batch in prepared transactions its driver commits (exactly_once.py);
that needs odradek.spark.producer, so kafka.* options it does not honour are refused.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import KafkaException, Producer
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from odradek.spark import exactly_once
from odradek.spark.options import SinkOptions
from odradek.spark.producer import PRODUCE_OPTIONS, can_produce, produce_arrow

FLUSH_TIMEOUT_S = 120.0


@dataclass
class ProducedRecords(WriterCommitMessage):
    count: int


def check_sink_schema(schema: StructType, options: SinkOptions) -> None:
    """Spark's KafkaWriter.validateQuery, with its messages."""
    fields = {f.name: f.dataType for f in schema.fields}
    if options.topic is None:
        if "topic" not in fields:
            raise ValueError(
                "topic option required when no 'topic' attribute is present. Use the topic option "
                "for setting a topic."
            )
        if not isinstance(fields["topic"], StringType):
            raise ValueError(
                f"Topic type must be a StringType, got {fields['topic'].simpleString()}"
            )
    if "value" not in fields:
        raise ValueError("Required attribute 'value' not found")
    for name in ("key", "value"):
        if name in fields and not isinstance(fields[name], (StringType, BinaryType)):
            raise ValueError(
                f"{name} attribute type must be a StringType or BinaryType, got "
                f"{fields[name].simpleString()}"
            )
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        raise ValueError(
            f"partition attribute type must be an IntegerType, got {fields['partition'].simpleString()}"
        )
    if "headers" in fields:
        headers = fields["headers"]
        if not (
            isinstance(headers, ArrayType)
            and isinstance(headers.elementType, StructType)
            and [f.name for f in headers.elementType.fields] == ["key", "value"]
            and isinstance(headers.elementType.fields[0].dataType, StringType)
            and isinstance(headers.elementType.fields[1].dataType, BinaryType)
        ):
            raise ValueError(
                "headers attribute type must be an ArrayType(StructType(key:string, value:binary)), "
                f"got {headers.simpleString()}"
            )


class _CachedProducer:
    """One idempotent producer per configuration per Python worker, reused across tasks.

    Python workers run one task at a time, so delivery errors collected by the
    producer's callback belong to the task that is flushing. Only failed
    deliveries are reported (delivery.report.only.error): a Python callback per
    successful record would cost a third of the sink's time.
    """

    def __init__(self, config: dict[str, object]) -> None:
        self.errors: list[str] = []
        self.producer = Producer({**config, "on_delivery": self._delivered})

    def _delivered(self, error, message) -> None:
        if error is not None:
            self.errors.append(f"{message.topic()}-{message.partition()}: {error}")


_producers: dict[tuple, _CachedProducer] = {}
_producers_lock = threading.Lock()


def producer_config(options: SinkOptions) -> dict[str, object]:
    """librdkafka settings: the user's kafka.* options over defaults matching Spark's Java producer.

    murmur2_random is the Java client's partitioner, so a key lands in the same
    partition as when Spark's Kafka sink writes it.
    """
    config: dict[str, object] = {
        "enable.idempotence": True,
        "linger.ms": 5,
        "partitioner": "murmur2_random",
        "delivery.report.only.error": True,
    }
    config.update(options.producer_config_dict())
    return config


def _producer(options: SinkOptions) -> _CachedProducer:
    key = options.producer_config
    with _producers_lock:
        cached = _producers.get(key)
        if cached is None:
            cached = _producers[key] = _CachedProducer(producer_config(options))
        return cached


def _column(batch: pa.RecordBatch, name: str, default: object = None) -> Iterable:
    """A column as Python values (strings as UTF-8 bytes), or `default` repeated when it is absent."""
    index = batch.schema.get_field_index(name)
    if index < 0:
        return itertools.repeat(default, batch.num_rows)
    column = batch.column(index)
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        column = column.cast(pa.binary())
    if default is not None:
        column = pc.fill_null(column, default)
    return column.to_pylist()


def _produce_rows(producer: Producer, batch: pa.RecordBatch, topic: str | None) -> None:
    """Queue one Arrow batch, one C call per row: produce(topic, value, key, partition)."""
    if topic is None:
        if batch.column("topic").null_count:
            raise ValueError(
                "Null topic present in the data. Use the topic option for setting a default topic."
            )
        topics: Iterable = batch.column("topic").to_pylist()
    else:
        topics = itertools.repeat(topic, batch.num_rows)
    # Partition -1 is librdkafka's "unassigned": the partitioner chooses.
    rows = zip(
        topics, _column(batch, "value"), _column(batch, "key"), _column(batch, "partition", -1)
    )
    produce = producer.produce
    if "headers" not in batch.schema.names:
        for row in rows:
            try:
                produce(*row)
            except BufferError:
                _when_room(producer, row)
        return
    for row, headers in zip(rows, batch.column("headers").to_pylist()):
        pairs = [(h["key"], h["value"]) for h in headers] if headers else None
        try:
            produce(*row, headers=pairs)
        except BufferError:
            _when_room(producer, row, pairs)


#: produce()'s positional arguments for one row: topic, value, key, partition.
_Row = tuple[str, bytes | None, bytes | None, int]


def _when_room(
    producer: Producer, row: _Row, headers: list[tuple[str, str | bytes | None]] | None = None
) -> None:
    """The local queue is full: serve delivery reports until the record fits."""
    while True:
        producer.poll(0.05)
        try:
            producer.produce(*row, headers=headers)
            return
        except BufferError:
            continue


def produce_batches(batches: Iterator[pa.RecordBatch], options: SinkOptions) -> int:
    """Produce every row, flush, and raise if any record was not acknowledged."""
    if can_produce(options):
        return produce_arrow(batches, options)
    return produce_rows(batches, options)


def produce_rows(batches: Iterator[pa.RecordBatch], options: SinkOptions) -> int:
    """produce_batches through librdkafka, one produce() call per row."""
    cached = _producer(options)
    producer = cached.producer
    cached.errors.clear()
    count = 0
    for batch in batches:
        _produce_rows(producer, batch, options.topic)
        producer.poll(0)
        count += batch.num_rows
    remaining = producer.flush(FLUSH_TIMEOUT_S)
    if remaining:
        raise KafkaException(f"{remaining} records not delivered within {FLUSH_TIMEOUT_S} s")
    if cached.errors:
        raise KafkaException(f"Failed to deliver records: {'; '.join(cached.errors[:5])}")
    return count


def check_exactly_once(options: SinkOptions, streaming: bool) -> None:
    """Exactly-once writing needs a streaming query (a batch id to decide) and our own producer."""
    if options.transactional_id_prefix is None:
        return
    if not streaming:
        raise ValueError(
            "Option 'transactional.id.prefix' applies to streaming queries only: a batch write "
            "has no micro-batch id to record its commit under"
        )
    if not can_produce(options):
        raise ValueError(
            "Option 'transactional.id.prefix' writes through the sink's own producer, which "
            "honours acks=all, idempotence, the murmur2_random partitioner, PLAINTEXT and only "
            f"these kafka.* options: {', '.join(sorted(PRODUCE_OPTIONS))}"
        )


class OdradekBatchWriter(DataSourceArrowWriter):
    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        check_sink_schema(schema, options)
        check_exactly_once(options, streaming=False)
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> ProducedRecords:
        return ProducedRecords(produce_batches(iterator, self.options))


class OdradekStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        check_sink_schema(schema, options)
        check_exactly_once(options, streaming=True)
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        if self.options.transactional_id_prefix is not None:
            return exactly_once.prepare(iterator, self.options)
        return ProducedRecords(produce_batches(iterator, self.options))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """At-least-once: every task flushed before it reported success, nothing is left to
        commit. Exactly-once: decide and commit the micro-batch's prepared transactions."""
        if self.options.transactional_id_prefix is not None:
            exactly_once.commit_batch(self.options, batchId, messages)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """At-least-once: records already produced stay, as with Spark's Kafka sink.
        Exactly-once: the micro-batch's prepared transactions are aborted."""
        if self.options.transactional_id_prefix is not None:
            exactly_once.abort_batch(self.options, messages)
