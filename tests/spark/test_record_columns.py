"""record_columns: Fetch response bytes to Arrow columns, checked against kio's record-batch codec.

kio writes the batches and reads back keys, values and headers as the oracle;
protocol.records reads the timestamps (kio's reader rounds milliseconds through
a float); the storage layer's codecs compress them, so every codec a broker may
return is decoded here.
"""

from __future__ import annotations

import io
import struct
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch, Record, RecordHeader
from kio.records.writers import write_new_batch

from odradek.protocol import records as rb
from odradek.spark.record_columns import CorruptBatch, decode_fetched
from odradek.storage import compression
from odradek.storage.records_builder import rewrap

EPOCH = datetime(2020, 1, 1, tzinfo=UTC)
EPOCH_MS = 1_577_836_800_000
ABORT, COMMIT = 0, 1


def batch_bytes(
    records: list[Record],
    *,
    codec: int = 0,
    attributes: int = 0,
    producer_id: int = -1,
    log_append_ms: int | None = None,
) -> bytes:
    """A v2 batch written by kio, its records then compressed with the storage layer's codec."""
    out = io.BytesIO()
    write_new_batch(
        out,
        NewRecordBatch(
            producer_id=producer_id,
            producer_epoch=0 if producer_id >= 0 else -1,
            base_sequence=-1,
            records=tuple(records),
            attributes=attributes,
        ),
    )
    plain = out.getvalue()
    if not codec and log_append_ms is None:
        return plain
    batch = rb.RecordBatch(plain)
    payload = (
        compression.compress(codec, batch.records_payload())
        if codec
        else bytes(batch.records_payload())
    )
    if log_append_ms is not None:
        attributes |= rb.TIMESTAMP_TYPE_MASK
    return rewrap(batch, payload, attributes=attributes | codec, max_timestamp=log_append_ms)


def record(
    offset: int,
    key: bytes | None = None,
    value: bytes | None = b"v",
    ms: int = 0,
    headers: tuple[RecordHeader, ...] = (),
) -> Record:
    return Record(
        attributes=0,
        timestamp=EPOCH + timedelta(milliseconds=ms),
        offset=offset,
        key=key,
        value=value,
        headers=headers,
    )


def marker(offset: int, producer_id: int, kind: int) -> bytes:
    control = Record(
        attributes=0,
        timestamp=EPOCH,
        offset=offset,
        key=struct.pack(">hh", 0, kind),
        value=struct.pack(">hi", 0, 0),
        headers=(),
    )
    return batch_bytes(
        [control], attributes=rb.CONTROL_MASK | rb.TRANSACTIONAL_MASK, producer_id=producer_id
    )


def rows(records: bytes, start: int = 0, until: int = 1 << 40, **kwargs) -> list[dict]:
    decoded = decode_fetched(records, "t", 3, start, until, include_headers=True, **kwargs)
    return decoded.batch.to_pylist() if decoded.batch is not None else []


headers_st = st.lists(
    st.builds(
        RecordHeader,
        key=st.text(max_size=8).map(str.encode),
        value=st.none() | st.binary(max_size=20),
    ),
    max_size=3,
).map(tuple)
record_st = st.tuples(
    st.integers(1, 3),
    st.none() | st.binary(max_size=30),
    st.none() | st.binary(max_size=300),
    st.integers(-(10**6), 10**6),
    headers_st,
)
batches_st = st.lists(
    st.tuples(st.lists(record_st, min_size=1, max_size=30), st.integers(0, 4)),
    min_size=1,
    max_size=5,
)


@settings(max_examples=60, deadline=None)
@given(batches=batches_st, start_skip=st.integers(0, 40), end_cut=st.integers(0, 40))
def test_columns_match_kio_for_every_codec_and_offset_window(batches, start_skip, end_cut) -> None:
    blobs, expected, offset = [], [], 100
    for spec, codec in batches:
        recs = []
        for gap, key, value, ms, headers in spec:
            recs.append(record(offset, key, value, ms, headers))
            offset += gap  # holes, as compaction leaves them
        plain = batch_bytes(recs)
        timestamps = rb.record_timestamps(rb.RecordBatch(plain))
        expected.extend(
            (r, EPOCH + timedelta(milliseconds=ms - EPOCH_MS))
            for r, (_, ms) in zip(
                read_batch(memoryview(plain), 0)[0].records, timestamps, strict=True
            )
        )
        blobs.append(batch_bytes(recs, codec=codec))
    start, until = 100 + start_skip, offset - end_cut
    want = [(r, ts) for r, ts in expected if start <= r.offset < until]
    got = rows(b"".join(blobs), start, until)
    assert [
        (r["offset"], r["key"], r["value"], r["timestamp"], r["timestampType"]) for r in got
    ] == [(r.offset, r.key, r.value, ts, 0) for r, ts in want]
    assert [[(h["key"], h["value"]) for h in r["headers"]] for r in got] == [
        [(h.key.decode(), h.value) for h in r.headers] for r, _ in want
    ]
    assert {(r["topic"], r["partition"]) for r in got} <= {("t", 3)}


def test_log_append_time_batches_carry_their_max_timestamp() -> None:
    blob = batch_bytes([record(0, ms=5), record(1, ms=9)], log_append_ms=1_700_000_000_123)
    got = rows(blob)
    assert [r["timestampType"] for r in got] == [1, 1]
    assert {r["timestamp"] for r in got} == {datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=UTC)}


def test_control_batches_are_never_data_and_advance_the_position() -> None:
    blob = batch_bytes([record(0)]) + marker(1, 7, COMMIT) + batch_bytes([record(2)])
    assert [r["offset"] for r in rows(blob)] == [0, 2]
    only_marker = decode_fetched(marker(5, 7, COMMIT), "t", 0, 5, 10, include_headers=False)
    assert only_marker.batch is None and only_marker.next_offset == 6


def test_read_committed_drops_aborted_transactions_until_their_abort_marker() -> None:
    txn = rb.TRANSACTIONAL_MASK
    blob = (
        batch_bytes([record(0), record(1)], attributes=txn, producer_id=7)
        + batch_bytes([record(2)], producer_id=8)  # another producer, not transactional
        + marker(3, 7, ABORT)
        + batch_bytes([record(4), record(5)], attributes=txn, producer_id=7)  # a later transaction
        + marker(6, 7, COMMIT)
    )
    assert [r["offset"] for r in rows(blob, aborted=[(7, 0)])] == [2, 4, 5]
    assert [r["offset"] for r in rows(blob, aborted=None)] == [0, 1, 2, 4, 5]  # read_uncommitted


def test_a_partial_batch_at_the_end_is_left_for_the_next_fetch() -> None:
    first, second = batch_bytes([record(0), record(1)]), batch_bytes([record(2)])
    decoded = decode_fetched(first + second[:-5], "t", 0, 0, 100, include_headers=False)
    assert decoded.batch.column("offset").to_pylist() == [0, 1]
    assert decoded.next_offset == 2 and not decoded.reached_end


def test_the_range_end_stops_the_read() -> None:
    blob = batch_bytes([record(0), record(1), record(2)]) + batch_bytes([record(3)])
    decoded = decode_fetched(blob, "t", 0, 1, 2, include_headers=False)
    assert decoded.batch.column("offset").to_pylist() == [1]
    assert decoded.reached_end


def test_a_batch_failing_its_crc_is_refused() -> None:
    blob = bytearray(batch_bytes([record(0, value=b"abcdef")]))
    blob[-3] ^= 0xFF
    with pytest.raises(CorruptBatch, match="CRC"):
        decode_fetched(bytes(blob), "t", 0, 0, 10, include_headers=False)


def test_long_records_take_the_slow_length_path() -> None:
    big = b"x" * 20_000  # a three-byte length varint
    assert [
        r["value"] for r in rows(batch_bytes([record(0, value=big), record(1, value=b"s")]))
    ] == [big, b"s"]
