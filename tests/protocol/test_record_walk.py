"""The C record walk (``_fastpath.timestamp_delta_range``) against the Python one it speeds up.

The C walk decides regular payloads and hands anything irregular back (None) to the Python
walk, which names the error; these tests check that whatever it decides, the Python walk
decides the same, and that it does decide every well-formed payload (else the produce
path would silently run in Python)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol import records as rb
from odradek.protocol._fastpath import timestamp_delta_range as native

LONG = st.integers(-(2**63), 2**63 - 1)


def record(delta: int, key: bytes, value: bytes) -> bytes:
    """One v2 record, from the record format (length and fields as zig-zag varints)."""
    body = b"\x00" + rb.write_varint(delta) + rb.write_varint(0) + rb.write_varint(len(key)) + key
    body += rb.write_varint(len(value)) + value + rb.write_varint(0)
    return rb.write_varint(len(body)) + body


def python(payload: bytes, count: int):
    try:
        return rb.walk_timestamp_deltas(payload, count)
    except rb.InvalidBatch as exc:
        return exc.reason


records = st.lists(
    st.tuples(
        st.one_of(st.integers(-300, 300), LONG), st.binary(max_size=20), st.binary(max_size=300)
    ),
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(records)
def test_well_formed_payloads_are_decided_in_c_as_in_python(recs) -> None:
    payload = b"".join(record(*r) for r in recs)
    found = native(payload, len(recs))
    assert found is not None
    assert found == python(payload, len(recs))
    if recs:
        assert found == (min(r[0] for r in recs), max(r[0] for r in recs))


@settings(max_examples=500, deadline=None)
@given(records, st.data())
def test_damaged_payloads_are_decided_alike_or_handed_back(recs, data) -> None:
    payload = bytearray(b"".join(record(*r) for r in recs))
    count = len(recs) + data.draw(st.integers(-2, 2))
    damage = data.draw(st.sampled_from(["truncate", "overwrite", "append", "none"]))
    if damage == "truncate":
        del payload[data.draw(st.integers(0, len(payload))) :]
    elif damage == "overwrite" and payload:
        at = data.draw(st.integers(0, len(payload) - 1))
        payload[at] = data.draw(st.integers(0, 255))
    elif damage == "append":
        payload += data.draw(st.binary(min_size=1, max_size=12))
    found = native(bytes(payload), count)
    expected = python(bytes(payload), count)
    if found is not None:
        assert found == expected
    assert _public(bytes(payload), count) == expected


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64), st.integers(-1, 8))
def test_random_bytes(payload, count) -> None:
    found = native(payload, count)
    if found is not None:
        assert found == python(payload, count)


@pytest.mark.parametrize(
    "varint, in_c, answer",
    [
        (b"\xff" * 9 + b"\x01", True, (-(2**63), -(2**63))),  # 64 bits exactly: decided in C
        (
            b"\xff" * 9 + b"\x02",
            False,
            (-(2**63 + 2**62), -(2**63)),
        ),  # 65 bits: only Python holds it
        (b"\xff" * 10 + b"\x01", False, "corrupt"),  # 11 bytes: too long
    ],
)
def test_overlong_and_oversized_varints(varint, in_c, answer) -> None:
    body = b"\x00" + varint  # one record: attributes, then timestampDelta
    payload = rb.write_varint(len(body)) + body
    assert native(payload, 1) == (answer if in_c else None)
    assert _public(payload, 1) == python(payload, 1) == answer


def _public(payload: bytes, count: int):
    """What the produce path gets: the C walk's answer or the Python walk's."""
    try:
        return rb.timestamp_delta_range(payload, count)
    except rb.InvalidBatch as exc:
        return exc.reason
