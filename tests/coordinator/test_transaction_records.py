"""__transaction_state records byte for byte: hand-built vectors from Kafka's
TransactionLogKey.json (v0, not flexible) and TransactionLogValue.json (v0, and v1 with
tagged fields), and round trips."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.coordinator.transaction.records import (
    TransactionLogValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)

VALUE = TransactionLogValue(
    producer_id=1000,
    producer_epoch=2,
    transaction_timeout_ms=60000,
    transaction_status=1,  # Ongoing
    transaction_partitions=(("t", (0, 1)),),
    last_update_timestamp_ms=5,
    start_timestamp_ms=4,
)
#: version, ProducerId, ProducerEpoch, TransactionTimeoutMs, TransactionStatus
HEAD = "000000000000000003e800020000ea6001"


def test_key_v0() -> None:
    assert encode_key("txn").hex() == "0000000374786e"
    assert decode_key(encode_key("txn")) == "txn"


def test_value_v0() -> None:
    expected = (
        HEAD
        + "00000001"  # one PartitionsSchema
        + "0001"
        "74"  # Topic "t"
         + "00000002"
        "00000000"
        "00000001"  # PartitionIds [0, 1]
        + "0000000000000005"  # TransactionLastUpdateTimestampMs
        + "0000000000000004"  # TransactionStartTimestampMs
    )
    assert encode_value(VALUE, 0).hex() == expected
    assert decode_value(bytes.fromhex(expected)) == VALUE


def test_value_v0_of_an_empty_transaction_has_null_partitions() -> None:
    empty = TransactionLogValue(7, 0, 100, 0, None, 1, -1)
    data = encode_value(empty, 0)
    assert data[17:21] == b"\xff\xff\xff\xff"
    assert decode_value(data) == empty


def test_value_v1_is_flexible_with_tagged_fields() -> None:
    value = TransactionLogValue(
        1000, 2, 60000, 1, (("t", (0, 1)),), 5, 4, client_transaction_version=2
    )
    expected = (
        "0001"
        + HEAD[4:]
        + "02"  # compact array of one
        + "02"
        "74"  # compact string "t"
         + "03"
        "00000000"
        "00000001"
        "00"  # compact [0, 1], no tags
         + "0000000000000005" + "0000000000000004" + "01"
        "02"
        "02"
        "0002"  # one tag: ClientTransactionVersion (2) = 2
    )
    assert encode_value(value, 1).hex() == expected
    assert decode_value(bytes.fromhex(expected)) == value
    # The producer-id tags are written only when set, in tag order.
    tagged = TransactionLogValue(1, 0, 1, 0, None, 0, -1, previous_producer_id=9)
    assert encode_value(tagged, 1).hex().endswith("0100080000000000000009")


def test_unknown_versions_are_refused() -> None:
    with pytest.raises(ValueError):
        decode_value(b"\x00\x02" + encode_value(VALUE, 0)[2:])
    with pytest.raises(ValueError):
        decode_key(b"\x00\x01\x00\x00")
    with pytest.raises(ValueError):
        decode_value(encode_value(VALUE, 0)[:20])  # truncated


@given(
    st.integers(-1, 2**63 - 1),
    st.integers(-1, 32767),
    st.integers(0, 2**31 - 1),
    st.integers(0, 7),
    st.none()
    | st.lists(
        st.tuples(st.text(min_size=1, max_size=8), st.lists(st.integers(0, 2**31 - 1))),
        max_size=3,
    ),
    st.integers(-1, 2**62),
    st.integers(-1, 2**62),
    st.integers(-1, 2**40),
    st.integers(0, 2),
    st.sampled_from([0, 1]),
)
def test_round_trip(pid, epoch, timeout, status, parts, last, start, prev, tv, version) -> None:
    value = TransactionLogValue(
        pid,
        epoch,
        timeout,
        status,
        None if parts is None else tuple((t, tuple(ids)) for t, ids in parts),
        last,
        start,
        previous_producer_id=prev if version else -1,
        client_transaction_version=tv if version else 0,
    )
    assert decode_value(encode_value(value, version)) == value
