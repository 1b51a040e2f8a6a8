"""A client's append checked in C (``protocol/_fastpath.c``) against the Python checks it speeds up.

Log.append gives a client's records to the C scan and, when the scan returns None, to
``_check_batches``. These tests append the same requests to two logs, one with the scan and
one with the Python checks only, and require the same outcome: the same LogAppendInfo or the
same error (type, message and record errors), the same bytes in the segment and the same
producer state. They also check that the scan does decide every regular request; otherwise
the produce path would silently run in Python.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from spec import build_batch, parse_batches
from test_record_validation import compressed

from odradek.protocol import records as rb
from odradek.storage import Log, LogConfig, errors
from odradek.storage.config import LONG_MAX

NOW = 10_000_000_000
HOUR = 3_600_000


def stored(log: Log) -> bytes:
    return b"".join(r.read_bytes() for r in log.read(0, 1 << 30).regions)


def outcome(log: Log, request: bytes) -> tuple:
    try:
        return ("appended", log.append(request, leader_epoch=3, now_ms=NOW))
    except errors.KafkaError as exc:
        return (type(exc).__name__, str(exc), getattr(exc, "record_errors", None))


def twin_logs(tmp_path: Path, config: LogConfig) -> tuple[Log, Log]:
    fast = Log(tmp_path / "fast-0", config)
    checked = Log(tmp_path / "checked-0", config)
    checked._client_scan = None  # the Python checks only
    assert fast._client_scan is not None
    return fast, checked


def with_header(
    batch: bytes, *, max_timestamp: int | None = None, attributes: int | None = None
) -> bytes:
    """The batch with maxTimestamp or attributes replaced in its header, CRC redone."""
    after_crc = bytearray(batch[21:])
    if max_timestamp is not None:
        struct.pack_into(">q", after_crc, 35 - 21, max_timestamp)
    if attributes is not None:
        struct.pack_into(">h", after_crc, 0, attributes)
    return batch[:17] + struct.pack(">I", crc32c(after_crc)) + bytes(after_crc)


# Far timestamps, but every timestampDelta within a long, as a producer can encode it.
timestamps = st.one_of(
    st.integers(NOW - 2 * HOUR, NOW + 2 * HOUR),
    st.just(-1),
    st.integers(-(2**62), 2**62),
    st.sampled_from([NOW - HOUR - 1, NOW - HOUR, NOW - 1, NOW, NOW + HOUR, NOW + HOUR + 1]),
)
records = st.lists(
    st.tuples(st.one_of(st.none(), st.binary(max_size=8)), st.binary(max_size=40), timestamps),
    min_size=1,
    max_size=5,
)


@st.composite
def batches(draw) -> bytes:
    recs = draw(records)
    producer = draw(st.sampled_from(["none", "idempotent", "no sequence"]))
    pid, epoch, seq = {
        "none": (-1, -1, -1),
        "idempotent": (7, 0, draw(st.integers(0, 3))),
        "no sequence": (7, 0, -1),
    }[producer]
    batch = build_batch(recs, producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    change = draw(
        st.sampled_from(
            [
                "none",
                "none",
                "compress",
                "control",
                "log append time",
                "max timestamp",
                "flip",
                "truncate",
            ]
        )
    )
    if change == "compress":
        batch = compressed(batch, draw(st.sampled_from([1, 3, 4])))
    elif change == "control":
        batch = with_header(batch, attributes=rb.CONTROL_MASK)
    elif change == "log append time":
        batch = with_header(batch, attributes=rb.TIMESTAMP_TYPE_MASK)
    elif change == "max timestamp":
        batch = with_header(batch, max_timestamp=draw(timestamps))
    elif change == "flip":  # mostly in the records, which only the CRC covers
        at = draw(
            st.one_of(st.integers(0, len(batch) - 1), st.integers(rb.HEADER_SIZE, len(batch) - 1))
        )
        batch = batch[:at] + bytes([batch[at] ^ draw(st.integers(1, 255))]) + batch[at + 1 :]
    elif change == "truncate":
        batch = batch[: draw(st.integers(0, len(batch) - 1))]
    return batch


configs = st.builds(
    LogConfig,
    max_message_bytes=st.sampled_from([1 << 20, 120]),
    message_timestamp_after_max_ms=st.sampled_from([HOUR, LONG_MAX]),
    message_timestamp_before_max_ms=st.sampled_from([LONG_MAX, HOUR, 0]),
)


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    config=configs,
    requests=st.lists(st.lists(batches(), min_size=1, max_size=3), min_size=1, max_size=4),
    data=st.data(),
)
def test_the_scan_and_the_python_checks_append_alike(
    tmp_path_factory, config, requests, data
) -> None:
    fast, checked = twin_logs(tmp_path_factory.mktemp("twins"), config)
    for request in requests:
        blob = b"".join(request)
        repeat = data.draw(st.booleans())  # a producer's retry: the same request again
        for _ in range(2 if repeat else 1):
            assert outcome(fast, blob) == outcome(checked, blob)
    assert stored(fast) == stored(checked)
    assert fast.log_end_offset == checked.log_end_offset
    assert [
        (e.epoch, list(e.recent), e.last_timestamp) for e in fast.producer_state.producers.values()
    ] == [
        (e.epoch, list(e.recent), e.last_timestamp)
        for e in checked.producer_state.producers.values()
    ]
    fast.close()
    checked.close()


def regular_request(batch_count: int, *, producer_id: int = -1) -> bytes:
    return b"".join(
        build_batch(
            [(b"k", b"v" * 100, NOW + i), (None, b"w", NOW - 5), (b"k", b"", NOW + 10)],
            producer_id=producer_id,
            producer_epoch=0 if producer_id >= 0 else -1,
            base_sequence=3 * i if producer_id >= 0 else -1,
        )
        for i in range(batch_count)
    )


@pytest.mark.parametrize(("batch_count", "producer_id"), [(1, -1), (3, -1), (1, 9)])
@pytest.mark.parametrize("window", [(LONG_MAX, HOUR), (LONG_MAX, LONG_MAX), (HOUR, HOUR)])
def test_regular_requests_are_decided_by_the_scan(batch_count, producer_id, window) -> None:
    """Uncompressed CreateTime batches inside the window, idempotent or not: what clients send."""
    request = regular_request(batch_count, producer_id=producer_id)
    scanned = rb.scan_for_append(request, 40, 3, 1 << 20, NOW, *window)
    assert scanned is not None
    pieces, batch_list, next_offset, max_ts, record_count, producer_batch = scanned
    assert (next_offset, max_ts, record_count) == (40 + 3 * batch_count, NOW + 10, 3 * batch_count)
    size, left = divmod(len(request), batch_count)
    assert left == 0
    # Per batch: a new baseOffset, batchLength and partitionLeaderEpoch, then the batch's own bytes.
    assert [bytes(p) for p in pieces] == [
        piece
        for i in range(batch_count)
        for piece in (
            struct.pack(">qii", 40 + 3 * i, size - 12, 3),
            request[i * size + 16 : (i + 1) * size],
        )
    ]
    assert batch_list == [
        (i * size, size, 40 + 3 * i, 42 + 3 * i, NOW + 10) for i in range(batch_count)
    ]
    assert producer_batch == (None if producer_id < 0 else (9, 0, 0, 2, 40, 42, NOW + 10))
    written = parse_batches(b"".join(bytes(p) for p in pieces))
    assert [(b.base_offset, b.leader_epoch) for b in written] == [
        (40 + 3 * i, 3) for i in range(batch_count)
    ]


@pytest.mark.parametrize(
    "irregular",
    [
        pytest.param(lambda: regular_request(2, producer_id=9), id="several idempotent batches"),
        pytest.param(lambda: compressed(regular_request(1), 1), id="compressed records to read"),
        pytest.param(
            lambda: with_header(regular_request(1), max_timestamp=NOW), id="maxTimestamp to correct"
        ),
        pytest.param(
            lambda: with_header(regular_request(1), attributes=rb.CONTROL_MASK), id="control batch"
        ),
        pytest.param(lambda: regular_request(1)[:-1], id="truncated"),
        pytest.param(lambda: b"", id="empty"),
    ],
)
def test_what_the_scan_leaves_to_python(irregular) -> None:
    assert rb.scan_for_append(irregular(), 0, 0, 1 << 20, NOW, LONG_MAX, HOUR) is None


def test_a_batch_tail_keeps_the_records_alive_and_read_only() -> None:
    request = bytearray(regular_request(1))
    view = memoryview(request)
    pieces = rb.scan_for_append(view, 0, 0, 1 << 20, NOW, LONG_MAX, HOUR)[0]
    tail = memoryview(pieces[1])
    assert tail.readonly and bytes(tail) == bytes(request[16:])
    with pytest.raises(BufferError):
        request.append(0)  # exported: cannot be resized under the pieces
    with pytest.raises(BufferError):
        view.release()
    del tail, pieces
    view.release()
    request.append(0)


def edge_cases() -> list:
    batch = build_batch([(b"k", b"v" * 50, NOW), (b"k", b"w", NOW + 1)])
    flipped = bytearray(batch)
    flipped[rb.HEADER_SIZE + 5] ^= 0x40
    window = {"message_timestamp_before_max_ms": HOUR, "message_timestamp_after_max_ms": HOUR}
    cases = [
        pytest.param(LogConfig(), [bytes(flipped)], id="records damaged"),
        pytest.param(LogConfig(max_message_bytes=len(batch)), [batch], id="at max.message.bytes"),
        pytest.param(
            LogConfig(max_message_bytes=len(batch) - 1), [batch], id="over max.message.bytes"
        ),
    ]
    for ts in (NOW - HOUR - 1, NOW - HOUR, NOW + HOUR, NOW + HOUR + 1):
        for position in (0, 1):
            recs = [(b"k", b"v", NOW), (b"k", b"v", NOW)]
            recs[position] = (b"k", b"v", ts)
            cases.append(
                pytest.param(
                    LogConfig(**window), [build_batch(recs)], id=f"record {position} at {ts - NOW}"
                )
            )
        stamped = with_header(
            build_batch([(b"k", b"v", NOW)]), attributes=rb.TIMESTAMP_TYPE_MASK, max_timestamp=ts
        )
        cases.append(
            pytest.param(
                LogConfig(**window), [stamped], id=f"producer's LogAppendTime at {ts - NOW}"
            )
        )
    return cases


@pytest.mark.parametrize(("config", "requests"), edge_cases())
def test_edges_append_alike(tmp_path: Path, config: LogConfig, requests: list[bytes]) -> None:
    fast, checked = twin_logs(tmp_path, config)
    for request in requests:
        assert outcome(fast, request) == outcome(checked, request)
    assert stored(fast) == stored(checked)
