from hypothesis import given
from hypothesis import strategies as st

from odradek.coordinator.batches import decode_records, encode_batch
from odradek.protocol.records import iter_batches


@given(
    st.lists(
        st.tuples(st.binary(min_size=1, max_size=40), st.one_of(st.none(), st.binary(max_size=80))),
        min_size=1,
        max_size=10,
    )
)
def test_batch_round_trip_with_valid_crc(records):
    data = encode_batch(records, 1234)
    (batch,) = list(iter_batches(data))  # verifies the CRC32C
    assert batch.records_count == len(records) and batch.max_timestamp == 1234
    assert [(k, v) for _, k, v in decode_records(data)] == records
    assert [o for o, _, _ in decode_records(data)] == list(range(len(records)))


def test_transactional_batches_and_markers_read_back_in_log_order():
    """TxnOffsetCommit's records carry their producer; a marker says which way they went."""
    from odradek.coordinator.batches import LoadedMarker, LoadedRecord, decode_log
    from odradek.protocol.records import HEADER, control_batch

    def at(batch: bytes, base_offset: int) -> bytes:
        return base_offset.to_bytes(8, "big") + batch[8:]  # baseOffset is outside the CRC

    plain = encode_batch([(b"k0", b"v0")], 1)
    txn = encode_batch([(b"k1", b"v1"), (b"k2", None)], 2, producer_id=42, producer_epoch=3)
    (header,) = list(iter_batches(txn))
    assert header.is_transactional and header.producer_id == 42 and header.producer_epoch == 3
    marker = control_batch(42, 3, True, 7, 3)
    abort = control_batch(43, 0, False, 7, 4)
    data = at(plain, 0) + at(txn, 1) + at(marker, 3) + at(abort, 4)
    # Kafka's marker: a 61-byte header and one 17-byte record (length, attributes, deltas,
    # 4-byte ControlRecordType key, 6-byte EndTransactionMarker value, no headers).
    assert len(marker) == HEADER.size + 17 == 78
    assert list(decode_log(data)) == [
        LoadedRecord(0, b"k0", b"v0", -1),
        LoadedRecord(1, b"k1", b"v1", 42),
        LoadedRecord(2, b"k2", None, 42),
        LoadedMarker(3, 42, True),
        LoadedMarker(4, 43, False),
    ]
    # decode_records keeps to the records.
    assert [o for o, _, _ in decode_records(data)] == [0, 1, 2]
