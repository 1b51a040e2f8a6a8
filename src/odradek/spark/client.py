"""librdkafka (confluent-kafka) for metadata; Fetch requests or librdkafka for data.

The driver asks the cluster which partitions a query covers and where they
begin and end; executors read offset ranges. Both use a plain Consumer with
no consumer group membership: Spark, not the broker, owns the offsets, which
live in the query's checkpoint. Executors read a range with their own Fetch
requests (fetcher, record_columns) when the query's kafka.* options allow it,
otherwise through the Consumer's assign and consume.
"""

from __future__ import annotations

import bisect
import contextlib
import gc
import os
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from typing import cast

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from odradek.protocol.errors import ErrorCode
from odradek.spark.connection import BrokerConnection, BrokerError
from odradek.spark.fetcher import READ_COMMITTED, FetchSettings, can_fetch, fetch
from odradek.spark.offsets import OffsetRange, PartitionOffsets
from odradek.spark.options import (
    EARLIEST,
    LATEST,
    Assign,
    OffsetSpec,
    SourceOptions,
    Subscribe,
)
from odradek.spark.record_columns import decode_fetched
from odradek.spark.schema import records_to_batch

METADATA_TIMEOUT_S = 30.0
# Records per Arrow batch handed to Spark: large enough to amortise the Arrow
# and JVM hand-off, small enough to bound executor memory.
BATCH_RECORDS = 20_000
# Longest wait of one consume() call; kafkaConsumer.pollTimeoutMs bounds the wait for progress.
CONSUME_WAIT_S = 0.1


class DataLossError(RuntimeError):
    """Records the query should have read are gone (retention, deletion, truncation)."""


def data_loss_message(detail: str) -> str:
    return (
        f"{detail} Some data may have been lost because they are not available in Kafka any more; "
        "either the data was aged out by Kafka or the topic may have been deleted before all the "
        "data in the topic was processed. If you don't want your streaming query to fail on such "
        'cases, set the source option "failOnDataLoss" to "false".'
    )


def consumer_config(
    options: SourceOptions, group_prefix: str = "spark-odradek-source"
) -> dict[str, object]:
    """librdkafka settings: the user's kafka.* options over Spark-like defaults.

    isolation.level stays librdkafka's default, read_committed, so aborted
    transactions never reach a DataFrame; kafka.isolation.level overrides it.
    """
    config: dict[str, object] = {
        "group.id": f"{group_prefix}-{uuid.uuid4()}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "error",
        # A task drains its range as fast as it can; librdkafka's default 1 s pause when its
        # prefetch queue is full would idle the task for most of a large range.
        "fetch.queue.backoff.ms": 10,
    }
    config.update(options.consumer_config_dict())
    return config


class OffsetReader:
    """Driver-side questions about partitions and offsets, over one lazily opened consumer."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._consumer: Consumer | None = None

    @property
    def consumer(self) -> Consumer:
        if self._consumer is None:
            self._consumer = Consumer(consumer_config(self.options, "spark-odradek-driver"))
        return self._consumer

    def __getstate__(self) -> dict:
        # Readers are pickled to executors and planner processes; a connection is not.
        return {**self.__dict__, "_consumer": None}

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def partitions(self) -> list[tuple[str, int]]:
        """The query's partitions now: new ones matching a pattern appear, deleted ones vanish."""
        strategy = self.options.strategy
        if isinstance(strategy, Assign):
            return list(strategy.partitions)
        metadata = self.consumer.list_topics(timeout=METADATA_TIMEOUT_S)
        result: list[tuple[str, int]] = []
        for name, topic in metadata.topics.items():
            if topic.error is not None:
                continue
            if isinstance(strategy, Subscribe):
                wanted = name in strategy.topics
            else:
                wanted = not name.startswith("__") and strategy.matches(name)
            if wanted:
                result.extend((name, p) for p in topic.partitions)
        return sorted(result)

    def watermarks(self, tps: Iterable[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, int]]:
        """(log start offset, end offset) per partition; the end is the LSO under read_committed."""
        return {
            (t, p): self.consumer.get_watermark_offsets(
                TopicPartition(t, p), timeout=METADATA_TIMEOUT_S, cached=False
            )
            for t, p in tps
        }

    def latest(self, tps: Iterable[tuple[str, int]]) -> PartitionOffsets:
        return {tp: high for tp, (_, high) in self.watermarks(tps).items()}

    def offsets_for_timestamps(
        self, wanted: Mapping[tuple[str, int], int]
    ) -> dict[tuple[str, int], int]:
        """First offset with timestamp >= T per partition, -1 where there is none."""
        if not wanted:
            return {}
        found = self.consumer.offsets_for_times(
            [TopicPartition(t, p, ts) for (t, p), ts in wanted.items()], timeout=METADATA_TIMEOUT_S
        )
        for tp in found:
            if tp.error is not None:
                raise KafkaException(tp.error)
        return {(tp.topic, tp.partition): tp.offset for tp in found}

    def resolve(
        self, spec: OffsetSpec, tps: list[tuple[str, int]], *, starting: bool
    ) -> PartitionOffsets:
        """Concrete offsets for an OffsetSpec over the given partitions."""
        marks = self.watermarks(tps)
        if spec.kind == "earliest":
            return {tp: low for tp, (low, _) in marks.items()}
        if spec.kind == "latest":
            return {tp: high for tp, (_, high) in marks.items()}
        if spec.kind == "offsets":
            given = {(t, p): o for t, p, o in spec.per_partition}
            if set(given) != set(tps):
                option = "startingOffsets" if starting else "endingOffsets"
                raise ValueError(
                    f"{option} must specify all TopicPartitions of the query: expected "
                    f"{sorted(tps)}, got {sorted(given)}. Use -1 for latest, -2 for earliest."
                )
            resolved = {}
            for tp, offset in given.items():
                low, high = marks[tp]
                resolved[tp] = low if offset == EARLIEST else high if offset == LATEST else offset
            return resolved
        if spec.kind == "timestamp":
            wanted = dict.fromkeys(tps, spec.timestamp)
        else:
            wanted = {(t, p): ts for t, p, ts in spec.per_partition}
            if set(wanted) != set(tps):
                raise ValueError(
                    f"offsets by timestamp must specify all TopicPartitions of the query: expected "
                    f"{sorted(tps)}, got {sorted(wanted)}"
                )
        resolved = {}
        for tp, offset in self.offsets_for_timestamps(wanted).items():
            if offset >= 0:
                resolved[tp] = offset
            elif starting and self.options.timestamp_strategy == "error":
                raise ValueError(
                    f"No offset matched from request of topic-partition {tp[0]}-{tp[1]} and timestamp "
                    f"{wanted[tp]}. Set startingOffsetsByTimestampStrategy to 'latest' to start "
                    "from the latest offset in that case."
                )
            else:
                resolved[tp] = marks[tp][1]
        return resolved


_consumers: dict[tuple, Consumer] = {}
_consumers_lock = threading.Lock()


def _cached_consumer(config: dict[str, object]) -> Consumer:
    """One consumer per configuration per Python worker, reused by every task it runs.

    Spark pickles readers to executors; the connection is opened here, on first
    use, and Python worker reuse keeps it across tasks and micro-batches.
    """
    key = (os.getpid(), tuple(sorted((k, str(v)) for k, v in config.items() if k != "group.id")))
    with _consumers_lock:
        consumer = _consumers.get(key)
        if consumer is None:
            consumer = _consumers[key] = Consumer(config)
        return consumer


def read_range(
    offset_range: OffsetRange, options: SourceOptions, config: dict[str, object]
) -> Iterator[pa.RecordBatch]:
    """The records of one offset range as Arrow batches: Fetch requests where the options allow."""
    if can_fetch(options):
        return fetch_range(offset_range, options, config)
    return consume_range(offset_range, options, config)


_connections: dict[tuple, BrokerConnection] = {}


def _leader(
    consumer: Consumer, topic: str, partition: int, settings: FetchSettings
) -> BrokerConnection | None:
    """A connection to the partition's leader, opened once per Python worker; None while it has none."""
    metadata = consumer.list_topics(topic, timeout=METADATA_TIMEOUT_S)
    found = metadata.topics.get(topic)
    info = found.partitions.get(partition) if found is not None and found.error is None else None
    broker = metadata.brokers.get(info.leader) if info is not None else None
    if broker is None:
        return None
    key = (os.getpid(), broker.host, broker.port, settings)
    with _consumers_lock:
        connection = _connections.get(key)
        if connection is None:
            connection = _connections[key] = BrokerConnection(
                broker.host,
                broker.port,
                settings.client_id,
                settings.timeout_s + settings.max_wait_ms / 1000,
            )
        return connection


def _forget(connection: BrokerConnection) -> None:
    with _consumers_lock:
        for key, cached in list(_connections.items()):
            if cached is connection:
                del _connections[key]
    connection.close()


def fetch_range(
    offset_range: OffsetRange, options: SourceOptions, config: dict[str, object]
) -> Iterator[pa.RecordBatch]:
    """The records of one offset range as Arrow batches, one Fetch request at a time.

    The range's semantics are consume_range's: holes in the offsets are skipped, it ends
    at its until offset or where the partition ends past it, deleted records are data loss.
    A leader change or a broken connection is retried until kafkaConsumer.pollTimeoutMs passes.
    """
    consumer = _cached_consumer(config)
    settings = FetchSettings.from_options(options)
    r = offset_range
    position = r.from_offset
    patience_s = options.poll_timeout_ms / 1000.0
    deadline = time.monotonic() + patience_s
    connection: BrokerConnection | None = None
    while position < r.until_offset:
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"Cannot fetch records in [{position}, {r.until_offset}) of {r.topic}-{r.partition} "
                f"within {options.poll_timeout_ms} ms (kafkaConsumer.pollTimeoutMs)"
            )
        try:
            if connection is None:
                connection = _leader(consumer, r.topic, r.partition, settings)
            data = (
                fetch(connection, settings, r.topic, r.partition, position)
                if connection is not None
                else None
            )
        except (OSError, ConnectionError, BrokerError):
            if connection is not None:
                _forget(connection)
            connection = data = None
        if data is not None and data.error_code == ErrorCode.offset_out_of_range:
            restart = _after_data_loss(consumer, r, position, options)
            if restart <= position:
                # Past the partition's end: the log was truncated below the range's records.
                _lost_tail(r, position, options)
                return
            position = restart
            continue
        if data is None or data.error_code.retriable:
            connection = None
            time.sleep(CONSUME_WAIT_S)
            continue
        if data.error_code != ErrorCode.none:
            raise BrokerError(data.error_code, f"Fetch of {r.topic}-{r.partition}")
        committed = settings.isolation_level == READ_COMMITTED
        aborted = (
            [(a.producer_id, a.first_offset) for a in data.aborted_transactions or ()]
            if committed
            else None
        )
        decoded = decode_fetched(
            data.records or b"",
            r.topic,
            r.partition,
            position,
            r.until_offset,
            include_headers=options.include_headers,
            aborted=aborted,
            verify_crc=settings.verify_crc,
        )
        if decoded.batch is not None:
            first = decoded.batch.column(4)[0].as_py()
            if first > position and options.fail_on_data_loss:
                low = getattr(data, "log_start_offset", -1)
                _check_gap(consumer, r, position, options, low if low >= 0 else None)
            yield decoded.batch
        if decoded.reached_end:
            return
        if decoded.next_offset > position:
            position = decoded.next_offset
            deadline = time.monotonic() + patience_s
            continue
        # No complete batch from here: the rest up to the partition's end is a hole.
        end = (
            data.last_stable_offset
            if committed and data.last_stable_offset >= 0
            else data.high_watermark
        )
        if end >= r.until_offset:
            return
        position = max(position, end)


def _lost_tail(r: OffsetRange, position: int, options: SourceOptions) -> None:
    if options.fail_on_data_loss:
        raise DataLossError(
            data_loss_message(
                f"Cannot fetch offset {position} of {r.topic}-{r.partition}: the partition ends before it."
            )
        )


def consume_range(
    offset_range: OffsetRange, options: SourceOptions, config: dict[str, object]
) -> Iterator[pa.RecordBatch]:
    """The records of one offset range as Arrow batches, through librdkafka.

    Offsets may have holes (control records, aborted transactions, compaction);
    the range ends when a record at or past its end arrives or the partition's
    end reaches it. Records deleted before they were read are a data loss:
    an error, or skipped when failOnDataLoss is false.
    """
    consumer = _cached_consumer(config)
    topic, partition = offset_range.topic, offset_range.partition
    position = offset_range.from_offset
    consumer.assign([TopicPartition(topic, partition, position)])
    patience_s = options.poll_timeout_ms / 1000.0
    deadline = time.monotonic() + patience_s
    try:
        while position < offset_range.until_offset:
            with _cyclic_gc_paused():
                step = _consume_step(consumer, offset_range, position, options)
            if step is None:
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"Cannot fetch records in [{position}, {offset_range.until_offset}) of "
                        f"{topic}-{partition} within {options.poll_timeout_ms} ms (kafkaConsumer.pollTimeoutMs)"
                    )
                continue
            deadline = time.monotonic() + patience_s
            batch, position, done = step
            if batch is not None:
                yield batch
            if done:
                break
    finally:
        consumer.unassign()


@contextlib.contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while a consume() result is decoded.

    Each call creates up to BATCH_RECORDS GC-tracked Message objects, none in a
    reference cycle (reference counting frees them); the collections their
    allocation would trigger cost about a third of a range's CPU time.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _consume_step(
    consumer: Consumer, offset_range: OffsetRange, position: int, options: SourceOptions
) -> tuple[pa.RecordBatch | None, int, bool] | None:
    """One consume() call: (records below the range's end as a batch, next position, range done),
    or None when nothing arrived.

    consume() waits for its full count or its timeout: with holes in the offsets (control
    records, compaction) the count may never come, so it waits briefly and the caller loops.
    confluent-kafka types ``Message.offset()`` as optional (an error of no partition has
    none); every record, and a partition's end, carries one.
    """
    topic, partition, until = offset_range.topic, offset_range.partition, offset_range.until_offset
    messages = consumer.consume(
        num_messages=min(BATCH_RECORDS, until - position), timeout=CONSUME_WAIT_S
    )
    if not messages:
        return None
    errors = [m.error() for m in messages]
    done = False  # a record or the partition's end at or past `until`
    restart = None  # where to go on after records were deleted under us
    if any(errors):
        data = []
        for message, error in zip(messages, errors):
            if error is None:
                data.append(message)
            elif error.code() == KafkaError._PARTITION_EOF:
                done = done or cast(int, message.offset()) >= until
            elif error.code() in (KafkaError.OFFSET_OUT_OF_RANGE, KafkaError._AUTO_OFFSET_RESET):
                restart = _after_data_loss(consumer, offset_range, position, options)
                break
            else:
                raise KafkaException(error)
        messages = data
    offsets = cast(list[int], [m.offset() for m in messages])
    cut = bisect.bisect_left(offsets, until)
    if cut < len(offsets):
        done = True
        messages, offsets = messages[:cut], offsets[:cut]
    batch = None
    if messages:
        if offsets[0] > position:
            _check_gap(consumer, offset_range, position, options)
        position = offsets[-1] + 1
        batch = records_to_batch(topic, partition, messages, offsets, options.include_headers)
    if restart is not None and not done:
        position = max(position, restart)
        consumer.assign([TopicPartition(topic, partition, position)])
    return batch, position, done


def _after_data_loss(
    consumer: Consumer, r: OffsetRange, position: int, options: SourceOptions
) -> int:
    low, _ = consumer.get_watermark_offsets(
        TopicPartition(r.topic, r.partition), timeout=METADATA_TIMEOUT_S, cached=False
    )
    message = data_loss_message(
        f"Cannot fetch offset {position} of {r.topic}-{r.partition} (earliest available is {low})."
    )
    if options.fail_on_data_loss:
        raise DataLossError(message)
    return max(low, position)


def _check_gap(
    consumer: Consumer,
    r: OffsetRange,
    position: int,
    options: SourceOptions,
    low: int | None = None,
) -> None:
    """A hole before the first record is loss only if the log start (asked for unless known) moved past where we were."""
    if low is None:
        low, _ = consumer.get_watermark_offsets(
            TopicPartition(r.topic, r.partition), timeout=METADATA_TIMEOUT_S, cached=False
        )
    if low > position and options.fail_on_data_loss:
        raise DataLossError(
            data_loss_message(
                f"Offsets [{position}, {low}) of {r.topic}-{r.partition} were deleted."
            )
        )
