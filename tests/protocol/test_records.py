import struct
import sys
from pathlib import Path

import pytest
from crc32c import crc32c
from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parents[1] / "storage"))
from spec import build_batch, parse_batches

from odradek.protocol import records as rb

records_st = st.lists(
    st.tuples(
        st.none() | st.binary(max_size=20),
        st.none() | st.binary(max_size=50),
        st.integers(0, 2**40),
    ),
    min_size=1,
    max_size=10,
)


@given(st.randoms(use_true_random=False), st.integers(0, 1 << 17), st.binary(max_size=300))
def test_the_crc32c_is_the_reference_one(random, size, more):
    """The project's CRC-32C (fastcrc, for its speed) against the crc32c package: whole
    buffers, views, and a checksum continued over a second buffer, as re-stamping does."""
    data = random.randbytes(size)
    assert rb.crc32c(data) == crc32c(data)
    assert rb.crc32c(memoryview(data)[size // 3 :]) == crc32c(data[size // 3 :])
    assert rb.crc32c(more, rb.crc32c(data)) == crc32c(data + more)


@given(records_st, st.integers(0, 2**40), st.integers(-1, 2**20), st.integers(-1, 2**30))
def test_header_fields_match_the_spec(records, base_offset, pid, seq):
    data = build_batch(
        records, base_offset=base_offset, producer_id=pid, producer_epoch=3, base_sequence=seq
    )
    (batch,) = list(rb.iter_batches(data))
    assert batch.base_offset == base_offset
    assert batch.size_in_bytes == len(data)
    assert batch.records_count == len(records) == batch.last_offset_delta + 1
    assert batch.last_offset == base_offset + len(records) - 1
    assert batch.max_timestamp == max(ts for _, _, ts in records)
    assert batch.producer_id == pid and batch.producer_epoch == 3 and batch.base_sequence == seq
    assert batch.is_valid()
    assert [ts for _, ts in rb.record_timestamps(batch)] == [ts for _, _, ts in records]


@given(records_st, st.integers(0, 2**50), st.integers(0, 2**31 - 1))
def test_patching_offset_and_epoch_keeps_crc_valid(records, offset, epoch):
    buf = bytearray(build_batch(records))
    batch = rb.RecordBatch(buf)
    batch.set_base_offset(offset)
    batch.set_partition_leader_epoch(epoch)
    assert batch.is_valid()
    (parsed,) = parse_batches(bytes(buf))
    assert parsed.base_offset == offset and parsed.leader_epoch == epoch


def test_log_append_time_rewrites_crc():
    buf = bytearray(build_batch([(b"k", b"v", 5)]))
    batch = rb.RecordBatch(buf)
    batch.set_log_append_time(12345)
    assert batch.timestamp_type == rb.LOG_APPEND_TIME
    assert batch.max_timestamp == 12345
    (parsed,) = parse_batches(bytes(buf))  # asserts the CRC
    assert parsed.attributes & rb.TIMESTAMP_TYPE_MASK


def test_attribute_bits():
    batch = rb.RecordBatch(build_batch([(b"k", b"v", 1)], attributes=0x10 | 0x20))
    assert batch.is_transactional and batch.is_control and batch.compression_type == 0


@pytest.mark.parametrize(
    "mutate, reason",
    [
        (lambda b: b[:-1], "corrupt"),
        (lambda b: b[:30], "corrupt"),
        (lambda b: b[:16] + b"\x01" + b[17:], "magic"),
        (lambda b: b[:-1] + bytes([b[-1] ^ 1]), "corrupt"),
    ],
)
def test_invalid_batches(mutate, reason):
    data = mutate(build_batch([(b"k", b"v", 1), (b"k2", b"v2", 2)]))
    with pytest.raises(rb.InvalidBatch) as exc:
        list(rb.iter_batches(data))
    assert exc.value.reason == reason


def test_count_mismatch_is_invalid_record():
    data = bytearray(build_batch([(b"k", b"v", 1), (b"k2", b"v2", 2)]))
    struct.pack_into(">i", data, rb.RECORDS_COUNT, 5)
    struct.pack_into(">I", data, rb.CRC, crc32c(bytes(data[21:])))
    with pytest.raises(rb.InvalidBatch) as exc:
        list(rb.iter_batches(data))
    assert exc.value.reason == "invalid"


def test_iterates_several_batches():
    blob = build_batch([(b"a", b"1", 1)]) + build_batch([(b"b", b"2", 2), (b"c", b"3", 3)])
    assert [b.records_count for b in rb.iter_batches(blob)] == [1, 2]
