"""The sink's own idempotent producer: Arrow batches in, Produce requests out.

librdkafka's produce() takes one Python call and one set of Python objects per
row. This producer partitions a whole Arrow batch at once (the partition
column, else Kafka's murmur2 of the key, else one sticky partition per batch
for null keys, as Kafka's default partitioner), builds one v2 record batch per
partition and up to batch.size bytes with record_builder, and sends them as
Produce requests (acks=all) stamped with its producer id, epoch and per-partition
sequence numbers from InitProducerId, so a retried request is never appended twice.

One request (one partition's batch) is in flight per broker connection: the
next is sent only after the previous one's response is in, so a request that
fails with a retriable error or a broken connection can be sent again, with the
same sequence, before anything after it.
A fatal error fails the task and forgets the producer id (the next task starts
a new one); Spark's retry makes the sink at-least-once, as Spark's Kafka sink.

Metadata (leaders, partition counts) comes from librdkafka. PLAINTEXT only,
the kafka.* options in PRODUCE_OPTIONS only: any other sends the rows through
librdkafka's Producer.
"""

from __future__ import annotations

import itertools
import os
import random
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Consumer
from kio.index import load_payload_module
from kio.static.constants import EntityType

from odradek.protocol import schemas
from odradek.protocol.errors import ErrorCode
from odradek.spark.connection import BrokerConnection, BrokerError
from odradek.spark.options import SinkOptions
from odradek.spark.record_builder import build_batch, key_partitions
from odradek.storage.compression import CODECS

PRODUCE, INIT_PRODUCER_ID = 0, 22
#: Produce v3 is the first with v2 record batches; v13 replaces topic names by ids.
MIN_PRODUCE_VERSION, MAX_PRODUCE_VERSION = 3, 12
MAX_INIT_PRODUCER_ID_VERSION = 4
ACKS_ALL = -1
#: Options this producer honours itself (librdkafka's names, which the sink passes on).
PRODUCE_OPTIONS = frozenset(
    {
        "bootstrap.servers",
        "client.id",
        "acks",
        "request.required.acks",
        "enable.idempotence",
        "compression.type",
        "compression.codec",
        "batch.size",
        "linger.ms",
        "request.timeout.ms",
        "message.timeout.ms",
        "delivery.timeout.ms",
        "security.protocol",
        "partitioner",
    }
)
METADATA_TIMEOUT_S = 30.0
_SEQUENCE_MODULUS = 1 << 31  # sequences wrap at Integer.MAX_VALUE, as Kafka's producer


def can_produce(options: SinkOptions) -> bool:
    """Whether every kafka.* option of the sink is one this producer honours with the same meaning."""
    config = {k: str(v).lower() for k, v in options.producer_config_dict().items()}
    return (
        set(config) <= PRODUCE_OPTIONS
        and config.get("security.protocol", "plaintext") == "plaintext"
        and config.get("acks", config.get("request.required.acks", "all")) in ("all", "-1")
        and config.get("enable.idempotence", "true") == "true"
        and config.get("partitioner", "murmur2_random") == "murmur2_random"
        and config.get("compression.type", config.get("compression.codec", "none"))
        in (*CODECS, "none")
    )


@dataclass(frozen=True)
class ProduceSettings:
    client_id: str
    codec: int
    batch_bytes: int
    request_timeout_s: float
    delivery_timeout_s: float

    @classmethod
    def from_options(cls, options: SinkOptions) -> ProduceSettings:
        config = {k: str(v) for k, v in options.producer_config_dict().items()}
        codec = config.get("compression.type", config.get("compression.codec", "none")).lower()
        return cls(
            client_id=config.get("client.id", "spark-odradek-sink"),
            codec=CODECS.get(codec, 0),
            # librdkafka's batch.size default; below the broker's default message.max.bytes.
            batch_bytes=int(config.get("batch.size", 1_000_000)),
            request_timeout_s=int(config.get("request.timeout.ms", 30_000)) / 1000,
            delivery_timeout_s=int(
                config.get("delivery.timeout.ms", config.get("message.timeout.ms", 300_000))
            )
            / 1000,
        )


@dataclass
class _InFlight:
    """A Produce request of one partition's batch, sent and not yet answered."""

    leader: int
    connection: BrokerConnection
    request: Any
    correlation_id: int
    tp: tuple[str, int]
    batch: bytes


@dataclass
class ProducerState:
    """A worker's producer: its id, epoch, next sequence per partition and broker connections."""

    options: SinkOptions
    settings: ProduceSettings
    metadata: Consumer
    producer_id: int = -1
    producer_epoch: int = -1
    sequences: dict[tuple[str, int], int] = field(default_factory=dict)
    connections: dict[int, BrokerConnection] = field(default_factory=dict)
    leaders: dict[tuple[str, int], int] = field(default_factory=dict)
    partition_counts: dict[str, int] = field(default_factory=dict)
    in_flight: dict[int, _InFlight] = field(default_factory=dict)
    #: Set by the exactly-once sink's subclass: Produce requests and batches carry it.
    transactional_id: str | None = None

    def close(self) -> None:
        for connection in self.connections.values():
            connection.close()
        self.connections.clear()
        self.in_flight.clear()

    # -- metadata ------------------------------------------------------------
    def refresh(self, topic: str) -> None:
        """Partition count and leaders of ``topic``, waiting while it has none (a topic being created)."""
        deadline = time.monotonic() + self.settings.delivery_timeout_s
        while True:
            metadata = self.metadata.list_topics(topic, timeout=METADATA_TIMEOUT_S)
            found = metadata.topics.get(topic)
            if (
                found is not None
                and found.error is None
                and found.partitions
                and all(p.leader >= 0 for p in found.partitions.values())
            ):
                break
            if time.monotonic() > deadline:
                raise BrokerError(
                    ErrorCode.unknown_topic_or_partition,
                    f"Metadata of {topic}",
                    str(found.error) if found is not None and found.error else None,
                )
            time.sleep(0.1)
        self.partition_counts[topic] = len(found.partitions)
        for partition, info in found.partitions.items():
            self.leaders[(topic, partition)] = info.leader
            broker = metadata.brokers[info.leader]
            if info.leader not in self.connections:
                self.connections[info.leader] = BrokerConnection(
                    broker.host,
                    broker.port,
                    self.settings.client_id,
                    self.settings.request_timeout_s,
                )

    def partitions(self, topic: str) -> int:
        if topic not in self.partition_counts:
            self.refresh(topic)
        return self.partition_counts[topic]

    def _ensure_producer_id(self) -> None:
        if self.producer_id >= 0:
            return
        connection = next(iter(self.connections.values()))
        version = connection.version(INIT_PRODUCER_ID, 0, MAX_INIT_PRODUCER_ID_VERSION)
        request = schemas.build(
            schemas.request_schema(INIT_PRODUCER_ID, version),
            transactional_id=None,
            transaction_timeout=60_000,
            producer_id=-1,
            producer_epoch=-1,
        )
        response = connection.request(request)
        if response.error_code != ErrorCode.none:
            raise BrokerError(response.error_code, "InitProducerId")
        self.producer_id, self.producer_epoch = (
            int(response.producer_id),
            int(response.producer_epoch),
        )

    # -- producing -------------------------------------------------------------
    def produce(
        self, topic: str, partition: int, keys: pa.Array, values: pa.Array, headers: pa.Array | None
    ) -> None:
        """Queue the rows of one partition as batches of at most batch.size bytes each."""
        self._ensure_producer_id()
        sizes = (
            pc.binary_length(values).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        )
        sizes += (
            pc.binary_length(keys).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64) + 16
        )
        bounds = _chunk_bounds(sizes, self.settings.batch_bytes)
        for start, stop in itertools.pairwise(bounds):
            tp = (topic, partition)
            sequence = self.sequences.get(tp, 0)
            batch = build_batch(
                keys[start:stop],
                values[start:stop],
                headers[start:stop] if headers is not None else None,
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                base_sequence=sequence,
                codec=self.settings.codec,
                transactional=self.transactional_id is not None,
            )
            self.sequences[tp] = (sequence + stop - start) % _SEQUENCE_MODULUS
            self._send(tp, batch)

    def _send(self, tp: tuple[str, int], batch: bytes, deadline: float | None = None) -> None:
        """Send one partition's batch to its leader once the request before it there is answered."""
        if deadline is None:
            deadline = time.monotonic() + self.settings.delivery_timeout_s
        while True:
            leader = self.leaders[tp]
            self._complete(leader, deadline)
            connection = self.connections.get(leader)
            try:
                if connection is None:
                    raise ConnectionError(f"no connection to broker {leader}")
                version = connection.version(PRODUCE, MIN_PRODUCE_VERSION, MAX_PRODUCE_VERSION)
                module = load_payload_module(PRODUCE, version, EntityType.request)
                request = schemas.build(
                    module.ProduceRequest,
                    transactional_id=self.transactional_id,
                    acks=ACKS_ALL,
                    timeout=int(self.settings.request_timeout_s * 1000),
                    topic_data=(
                        schemas.build(
                            module.TopicProduceData,
                            name=tp[0],
                            partition_data=(
                                schemas.build(
                                    module.PartitionProduceData, index=tp[1], records=batch
                                ),
                            ),
                        ),
                    ),
                )
                self.in_flight[leader] = _InFlight(
                    leader, connection, request, connection.send(request), tp, batch
                )
                return
            except (OSError, ConnectionError):  # a connection closed while idle, a broker gone
                if time.monotonic() > deadline:
                    raise
                self._drop(leader)
                time.sleep(0.1)
                self.refresh(tp[0])

    def _drop(self, leader: int) -> None:
        connection = self.connections.pop(leader, None)
        if connection is not None:
            connection.close()

    def _complete(self, leader: int, deadline: float | None = None) -> None:
        """Wait for the request in flight to ``leader``; send it again (same sequence numbers) after a
        retriable error or a broken connection, until it succeeds or delivery.timeout.ms passes."""
        pending = self.in_flight.pop(leader, None)
        if deadline is None:
            deadline = time.monotonic() + self.settings.delivery_timeout_s
        while pending is not None:
            try:
                response = pending.connection.receive(pending.request, pending.correlation_id)
            except (OSError, ConnectionError):
                if time.monotonic() > deadline:
                    raise
                # Whether the broker appended it is unknown: the same sequence makes a resend safe.
                self._drop(pending.leader)
            else:
                p = response.responses[0].partition_responses[0]
                # A duplicate sequence is a batch the broker already has: a resend's success.
                if p.error_code in (ErrorCode.none, ErrorCode.duplicate_sequence_number):
                    return
                if not p.error_code.retriable or time.monotonic() > deadline:
                    raise BrokerError(
                        p.error_code,
                        f"Produce to {pending.tp[0]}-{pending.tp[1]}",
                        getattr(p, "error_message", None),
                    )
            time.sleep(0.1)
            self.refresh(pending.tp[0])
            self._send(pending.tp, pending.batch, deadline)
            pending = self.in_flight.pop(self.leaders[pending.tp])

    def flush(self) -> None:
        for leader in list(self.in_flight):
            self._complete(leader)


def _chunk_bounds(sizes: np.ndarray, limit: int) -> list[int]:
    """Row boundaries splitting rows of these sizes into runs of at most ``limit`` bytes (one row at least)."""
    bounds, start, total = [0], 0, np.cumsum(sizes)
    n = len(sizes)
    while start < n:
        base = total[start - 1] if start else 0
        stop = max(start + 1, int(np.searchsorted(total, base + limit, side="right")))
        bounds.append(min(stop, n))
        start = bounds[-1]
    return bounds


_states: dict[tuple, ProducerState] = {}
_states_lock = threading.Lock()


def _state(options: SinkOptions) -> ProducerState:
    key = (os.getpid(), options.producer_config)
    with _states_lock:
        state = _states.get(key)
        if state is None:
            config = options.producer_config_dict()
            metadata = Consumer(
                {
                    "bootstrap.servers": config["bootstrap.servers"],
                    "group.id": f"spark-odradek-sink-{uuid.uuid4()}",
                    "allow.auto.create.topics": True,
                }
            )
            state = _states[key] = ProducerState(
                options, ProduceSettings.from_options(options), metadata
            )
        return state


def _forget(options: SinkOptions, state: ProducerState) -> None:
    with _states_lock:
        _states.pop((os.getpid(), options.producer_config), None)
    state.close()
    state.metadata.close()


def _binary(batch: pa.RecordBatch, name: str) -> pa.Array:
    index = batch.schema.get_field_index(name)
    if index < 0:
        return pa.nulls(batch.num_rows, pa.binary())
    column = batch.column(index)
    return column if column.type == pa.binary() else column.cast(pa.binary())


def _rows_by_partition(
    state: ProducerState, topic: str, batch: pa.RecordBatch
) -> Iterator[tuple[int, np.ndarray | None]]:
    """(partition, row indices or None for all rows) of one topic's rows."""
    count = state.partitions(topic)
    n = batch.num_rows
    chosen = np.full(n, -1, np.int64)
    if "partition" in batch.schema.names:
        given = batch.column("partition")
        chosen = given.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
        if np.any(chosen >= count) or np.any(chosen < -1):
            bad = int(chosen[(chosen >= count) | (chosen < -1)][0])
            raise BrokerError(
                ErrorCode.unknown_topic_or_partition,
                f"Produce to {topic}-{bad}",
                f"{topic} has {count} partitions",
            )
    unset = chosen < 0
    if unset.any():
        keys = _binary(batch, "key")
        keyed = unset & ~np.asarray(keys.is_null().to_numpy(zero_copy_only=False))
        if keyed.any():
            chosen[keyed] = key_partitions(keys, count)[keyed]
        # Null keys: one partition for the whole Arrow batch, as Kafka's sticky partitioner.
        chosen[unset & ~keyed] = random.randrange(count)
    first = chosen[0]
    if (chosen == first).all():
        yield int(first), None
        return
    order = np.argsort(chosen, kind="stable")
    ordered = chosen[order]
    starts = np.flatnonzero(np.diff(ordered)) + 1
    for rows in np.split(order, starts):
        yield int(chosen[rows[0]]), rows


def produce_arrow(batches: Iterator[pa.RecordBatch], options: SinkOptions) -> int:
    """Produce every row, wait for every acknowledgement, and return the row count."""
    state = _state(options)
    state.partition_counts.clear()  # partitions added since the last task count from this one on
    try:
        return produce_into(state, batches, options)
    except BaseException:
        _forget(options, state)
        raise


def shared_metadata(options: SinkOptions) -> Consumer:
    """The librdkafka consumer this worker's producer for ``options`` asks for leaders and
    partition counts, for another producer of the same options to share (one task at a time)."""
    return _state(options).metadata


def produce_into(
    state: ProducerState, batches: Iterator[pa.RecordBatch], options: SinkOptions
) -> int:
    """Produce every row through ``state`` and wait for every acknowledgement: the row count."""
    count = 0
    for batch in batches:
        if batch.num_rows == 0:
            continue
        if options.topic is None:
            topic_column = batch.column("topic")
            if topic_column.null_count:
                raise ValueError(
                    "Null topic present in the data. Use the topic option for setting a "
                    "default topic."
                )
            topics = pc.unique(topic_column).to_pylist()
        else:
            topics = [options.topic]
        for topic in topics:
            rows = (
                batch if len(topics) == 1 else batch.filter(pc.equal(batch.column("topic"), topic))
            )
            _produce_topic(state, topic, rows)
        count += batch.num_rows
    state.flush()
    return count


def _produce_topic(state: ProducerState, topic: str, batch: pa.RecordBatch) -> None:
    keys, values = _binary(batch, "key"), _binary(batch, "value")
    headers = batch.column("headers") if "headers" in batch.schema.names else None
    for partition, rows in _rows_by_partition(state, topic, batch):
        if rows is None:
            state.produce(topic, partition, keys, values, headers)
        else:
            index = pa.array(rows)
            state.produce(
                topic,
                partition,
                keys.take(index),
                values.take(index),
                headers.take(index) if headers is not None else None,
            )
