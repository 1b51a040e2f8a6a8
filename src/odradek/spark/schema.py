"""The source schema, identical to Spark's built-in Kafka source, and its Arrow twin.

Executors hand Spark Arrow RecordBatches, so the conversion from consumed
records to columns lives here, in one place, column by column.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

_BASE_DDL = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
HEADERS_DDL = "headers array<struct<key:string,value:binary>>"

HEADERS_ARROW_TYPE = pa.list_(
    pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
)
_BASE_ARROW_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("timestampType", pa.int32()),
]

# confluent-kafka reports TIMESTAMP_NOT_AVAILABLE=0, CREATE_TIME=1, LOG_APPEND_TIME=2;
# Spark shows Kafka's TimestampType ids: NO_TIMESTAMP_TYPE=-1, CREATE_TIME=0, LOG_APPEND_TIME=1.
_ONE = pa.scalar(1, pa.int32())
_MS_TO_US = pa.scalar(1000, pa.int64())


def source_ddl(include_headers: bool) -> str:
    """The DDL string Spark sees for the source, as in Spark's Kafka source."""
    return f"{_BASE_DDL}, {HEADERS_DDL}" if include_headers else _BASE_DDL


def arrow_schema(include_headers: bool) -> pa.Schema:
    fields = list(_BASE_ARROW_FIELDS)
    if include_headers:
        fields.append(pa.field("headers", HEADERS_ARROW_TYPE))
    return pa.schema(fields)


def records_to_batch(
    topic: str,
    partition: int,
    messages: Sequence[Any],
    offsets: Sequence[int],
    include_headers: bool,
) -> pa.RecordBatch:
    """Columns from confluent-kafka Message objects of one topic partition and their offsets.

    One list comprehension per Message accessor and vectorised Arrow arithmetic
    for the rest keep the per-record Python work to a few C calls; topic and
    partition are constant per range; the caller has read the offsets already.
    """
    n = len(messages)
    types, millis = zip(*[m.timestamp() for m in messages]) if n else ((), ())
    columns: list[pa.Array] = [
        pa.array([m.key() for m in messages], pa.binary()),
        pa.array([m.value() for m in messages], pa.binary()),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.array(offsets, pa.int64()),
        pc.multiply(pa.array(millis, pa.int64()), _MS_TO_US).cast(pa.timestamp("us", tz="UTC")),
        pc.subtract(pa.array(types, pa.int32()), _ONE),
    ]
    if include_headers:
        columns.append(
            pa.array(
                [[{"key": k, "value": v} for k, v in (m.headers() or ())] for m in messages],
                HEADERS_ARROW_TYPE,
            )
        )
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema(include_headers))
