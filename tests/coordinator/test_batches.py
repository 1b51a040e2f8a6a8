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
