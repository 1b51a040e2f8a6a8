"""record_builder: Arrow columns to v2 record batches, read back by kio and by record_columns;
the vectorised murmur2 against the scalar reference written from Kafka's definition."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.records.readers import read_batch

from odradek.protocol import records as rb
from odradek.spark.options import SinkOptions
from odradek.spark.producer import can_produce
from odradek.spark.record_builder import build_batch, key_partitions, murmur2
from odradek.spark.record_columns import decode_fetched
from odradek.spark.schema import HEADERS_ARROW_TYPE
from tests.spark.test_sink import murmur2 as reference_murmur2

rows_st = st.lists(
    st.tuples(
        st.none() | st.binary(max_size=40),
        st.none() | st.binary(max_size=400),
        st.lists(st.tuples(st.text(max_size=6), st.none() | st.binary(max_size=8)), max_size=3),
    ),
    min_size=1,
    max_size=200,
)


@settings(max_examples=60, deadline=None)
@given(
    rows=rows_st,
    codec=st.integers(0, 4),
    with_headers=st.booleans(),
    sequence=st.integers(0, 2**31 - 1),
)
def test_batches_read_back_by_kio_and_record_columns(rows, codec, with_headers, sequence) -> None:
    keys = pa.array([k for k, _, _ in rows], pa.binary())
    values = pa.array([v for _, v, _ in rows], pa.binary())
    headers = pa.array(
        [[{"key": k, "value": v} for k, v in h] for _, _, h in rows], HEADERS_ARROW_TYPE
    )
    batch = build_batch(
        keys,
        values,
        headers if with_headers else None,
        producer_id=42,
        producer_epoch=3,
        base_sequence=sequence,
        codec=codec,
        timestamp_ms=1_700_000_000_000,
    )
    view = rb.RecordBatch(batch)
    assert (
        view.records_count,
        view.producer_id,
        view.producer_epoch,
        view.base_sequence,
        view.compression_type,
        view.last_offset_delta,
    ) == (len(rows), 42, 3, sequence, codec, len(rows) - 1)
    rb.check_batch(batch, 0, len(batch))  # sizes and CRC32C, as the broker checks them
    want_headers = [[(k, v) for k, v in h] if with_headers else [] for _, _, h in rows]
    if codec == 0:
        kio_records = read_batch(memoryview(batch), 0)[0].records
        assert [
            (r.offset, r.key, r.value, [(h.key.decode(), h.value) for h in r.headers])
            for r in kio_records
        ] == [(i, k, v, hs) for i, ((k, v, _), hs) in enumerate(zip(rows, want_headers))]
    got = decode_fetched(batch, "t", 0, 0, len(rows), include_headers=True).batch.to_pylist()
    assert [
        (r["offset"], r["key"], r["value"], [(h["key"], h["value"]) for h in r["headers"]])
        for r in got
    ] == [(i, k, v, hs) for i, ((k, v, _), hs) in enumerate(zip(rows, want_headers))]


@settings(max_examples=100, deadline=None)
@given(keys=st.lists(st.binary(max_size=30), min_size=1, max_size=50))
def test_vectorised_murmur2_is_kafkas(keys) -> None:
    column = pa.array(keys, pa.binary())
    assert murmur2(column).astype(np.int32).tolist() == [reference_murmur2(k) for k in keys]
    assert murmur2(column.slice(1)).astype(np.int32).tolist() == [
        reference_murmur2(k) for k in keys[1:]
    ]
    assert key_partitions(column, 7).tolist() == [
        (reference_murmur2(k) & 0x7FFFFFFF) % 7 for k in keys
    ]


def test_only_options_the_arrow_producer_honours_keep_it() -> None:
    def sink(**kafka: str) -> SinkOptions:
        return SinkOptions(
            topic="t",
            producer_config=tuple(
                sorted({"bootstrap.servers": "h:1", **dict(kafka.items())}.items())
            ),
        )

    assert can_produce(sink())
    assert can_produce(sink(**{"compression.type": "zstd", "acks": "all", "linger.ms": "5"}))
    assert not can_produce(sink(acks="1"))
    assert not can_produce(sink(**{"enable.idempotence": "false"}))
    assert not can_produce(sink(**{"security.protocol": "SASL_SSL"}))
    assert not can_produce(sink(**{"queue.buffering.max.messages": "10"}))
