"""The sink, batch and streaming, as Spark's Kafka sink: at-least-once.

Columns: value (required), key, topic, partition, headers. The `topic`
option, when set, overrides the topic column. Each task produces its rows
through an idempotent producer and flushes before reporting success, so a
committed task's records are on the broker; a task retried by Spark may
write its records again (at-least-once, exactly as Spark's Kafka sink).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from confluent_kafka import KafkaException, Producer
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from odradek.spark.options import SinkOptions

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
            raise ValueError(f"Topic type must be a StringType, got {fields['topic'].simpleString()}")
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
    producer's callback belong to the task that is flushing.
    """

    def __init__(self, config: dict[str, object]) -> None:
        self.errors: list[str] = []
        self.producer = Producer({**config, "on_delivery": self._delivered})

    def _delivered(self, error, message) -> None:  # noqa: ANN001 - librdkafka callback
        if error is not None:
            self.errors.append(f"{message.topic()}-{message.partition()}: {error}")


_producers: dict[tuple, _CachedProducer] = {}
_producers_lock = threading.Lock()


def producer_config(options: SinkOptions) -> dict[str, object]:
    config: dict[str, object] = {"enable.idempotence": True, "linger.ms": 5}
    config.update(options.producer_config_dict())
    return config


def _producer(options: SinkOptions) -> _CachedProducer:
    key = options.producer_config
    with _producers_lock:
        cached = _producers.get(key)
        if cached is None:
            cached = _producers[key] = _CachedProducer(producer_config(options))
        return cached


def _binary_column(batch: pa.RecordBatch, name: str) -> list | None:
    index = batch.schema.get_field_index(name)
    if index < 0:
        return None
    column = batch.column(index)
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        column = column.cast(pa.binary())
    return column.to_pylist()


def produce_batches(batches: Iterator[pa.RecordBatch], options: SinkOptions) -> int:
    """Produce every row, flush, and raise if any record was not acknowledged."""
    cached = _producer(options)
    producer = cached.producer
    cached.errors.clear()
    count = 0
    for batch in batches:
        n = batch.num_rows
        values = _binary_column(batch, "value")
        keys = _binary_column(batch, "key") or [None] * n
        topics = [options.topic] * n if options.topic else batch.column("topic").to_pylist()
        extras: list[dict] = [{} for _ in range(n)] if (
            "partition" in batch.schema.names or "headers" in batch.schema.names
        ) else []
        if "partition" in batch.schema.names:
            for extra, partition in zip(extras, batch.column("partition").to_pylist()):
                if partition is not None:
                    extra["partition"] = partition
        if "headers" in batch.schema.names:
            for extra, headers in zip(extras, batch.column("headers").to_pylist()):
                if headers:
                    extra["headers"] = [(h["key"], h["value"]) for h in headers]
        for i, (topic, key, value) in enumerate(zip(topics, keys, values)):
            if topic is None:
                raise ValueError(
                    "Null topic present in the data. Use the topic option for setting a default topic."
                )
            kwargs = extras[i] if extras else {}
            while True:
                try:
                    producer.produce(topic, value, key, **kwargs)
                    break
                except BufferError:
                    producer.poll(0.05)
        producer.poll(0)
        count += n
    remaining = producer.flush(FLUSH_TIMEOUT_S)
    if remaining:
        raise KafkaException(f"{remaining} records not delivered within {FLUSH_TIMEOUT_S} s")
    if cached.errors:
        raise KafkaException(f"Failed to deliver records: {'; '.join(cached.errors[:5])}")
    return count


class OdradekBatchWriter(DataSourceArrowWriter):
    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        check_sink_schema(schema, options)
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> ProducedRecords:
        return ProducedRecords(produce_batches(iterator, self.options))


class OdradekStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        check_sink_schema(schema, options)
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> ProducedRecords:
        return ProducedRecords(produce_batches(iterator, self.options))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Every task flushed before it reported success; nothing is left to commit."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Records already produced stay: the sink is at-least-once, as Spark's Kafka sink."""
