"""CreateTime timestamps on append are checked record by record, as Kafka's LogValidator does:
a batch header's maxTimestamp is the producer's word, not the records'."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st
from spec import build_batch, parse_batches
from test_record_validation import compressed

from odradek.protocol.errors import ErrorCode
from odradek.storage import Log, LogConfig, errors
from odradek.storage.config import LONG_MAX

NOW = 10_000_000_000
HOUR = 3_600_000


def with_max_timestamp(batch: bytes, max_timestamp: int) -> bytes:
    """The batch with its header's maxTimestamp replaced (and the CRC redone to match)."""
    after_crc = batch[21:35] + struct.pack(">q", max_timestamp) + batch[43:]
    return batch[:17] + struct.pack(">I", crc32c(after_crc)) + after_crc


def stored(log: Log) -> bytes:
    return b"".join(r.read_bytes() for r in log.read(0, 1 << 30).regions)


def test_kafka4_defaults_bound_only_timestamps_ahead_of_the_broker() -> None:
    config = LogConfig()
    assert (config.message_timestamp_after_max_ms, config.message_timestamp_before_max_ms) == (
        HOUR,
        LONG_MAX,
    )


@pytest.mark.parametrize("codec", [0, 1, 4])
def test_a_record_beyond_after_max_ms_is_rejected_though_the_header_understates_it(
    tmp_path: Path, codec
) -> None:
    """The header claims NOW, a record carries NOW + 1 h + 1 ms: Kafka 4's default window refuses it."""
    batch = with_max_timestamp(build_batch([(b"k", b"v", NOW), (b"k", b"v", NOW + HOUR + 1)]), NOW)
    log = Log(tmp_path / "t-0", LogConfig())
    with pytest.raises(errors.RecordValidationError) as raised:
        log.append(compressed(batch, codec) if codec else batch, leader_epoch=0, now_ms=NOW)
    assert raised.value.error_code == ErrorCode.invalid_timestamp
    assert [i for i, _ in raised.value.record_errors] == [1]
    assert log.log_end_offset == 0 and log.size_in_bytes == 0


def test_a_record_below_before_max_ms_is_rejected_though_the_header_range_is_inside(
    tmp_path: Path,
) -> None:
    batch = build_batch([(b"k", b"v", NOW), (b"k", b"v", NOW - 2000), (b"k", b"v", NOW)])
    log = Log(tmp_path / "t-0", LogConfig(message_timestamp_before_max_ms=1000))
    with pytest.raises(errors.RecordValidationError) as raised:
        log.append(batch, leader_epoch=0, now_ms=NOW)
    assert [i for i, _ in raised.value.record_errors] == [1]


@pytest.mark.parametrize("codec", [0, 4])
def test_a_wrong_header_max_timestamp_is_set_to_the_records_largest(tmp_path: Path, codec) -> None:
    """As Kafka's batch.setMaxTimestamp: the stored header carries the real maximum, with a valid CRC,
    and the time index and ListOffsets(max timestamp) follow it."""
    records = [(b"k", b"v", NOW), (b"k", b"v", NOW + 5000), (b"k", b"v", NOW + 10)]
    batch = with_max_timestamp(build_batch(records), NOW)
    log = Log(tmp_path / "t-0", LogConfig())
    info = log.append(compressed(batch, codec) if codec else batch, leader_epoch=0, now_ms=NOW)
    assert info.max_timestamp == NOW + 5000
    data = stored(log)
    assert crc32c(data[21:]) == struct.unpack_from(">I", data, 17)[0]
    assert struct.unpack_from(">q", data, 35)[0] == NOW + 5000
    assert log.fetch_offset_by_timestamp(-3)[1] == NOW + 5000


def test_unbounded_limits_accept_any_timestamp(tmp_path: Path) -> None:
    batch = with_max_timestamp(
        build_batch([(b"k", b"v", NOW), (b"k", b"v", NOW + 100 * HOUR)]), NOW
    )
    log = Log(tmp_path / "t-0", LogConfig(message_timestamp_after_max_ms=LONG_MAX))
    assert log.append(batch, leader_epoch=0, now_ms=NOW).record_count == 2


def test_log_append_time_topics_do_not_check_create_times(tmp_path: Path) -> None:
    batch = build_batch([(b"k", b"v", NOW + 100 * HOUR)])
    log = Log(tmp_path / "t-0", LogConfig(message_timestamp_type="LogAppendTime"))
    assert log.append(batch, leader_epoch=0, now_ms=NOW).log_append_time_ms == NOW


@pytest.mark.parametrize("max_timestamp, accepted", [(NOW + HOUR, True), (NOW + HOUR + 1, False)])
def test_a_producer_stamped_log_append_time_batch_is_checked_by_its_max_timestamp(
    tmp_path: Path, max_timestamp, accepted
) -> None:
    """Records of a LogAppendTime batch carry the header's maxTimestamp, whatever their deltas say;
    on a CreateTime topic that is their CreateTime, and the batch is stored as CreateTime (Kafka's
    LogValidator ends with setMaxTimestamp(CREATE_TIME, maxTimestamp))."""
    batch = with_max_timestamp(
        build_batch([(b"k", b"v", NOW), (b"k", b"v", NOW + 5)], attributes=0x08), max_timestamp
    )
    log = Log(tmp_path / "t-0", LogConfig())
    if accepted:
        assert log.append(batch, leader_epoch=0, now_ms=NOW).max_timestamp == max_timestamp
        (written,) = parse_batches(stored(log))  # the spec parser checks the CRC
        assert written.attributes & 0x08 == 0 and written.max_timestamp == max_timestamp
    else:
        with pytest.raises(errors.RecordValidationError):
            log.append(batch, leader_epoch=0, now_ms=NOW)


@pytest.mark.parametrize(
    "config, max_timestamp",
    [
        pytest.param(
            LogConfig(message_timestamp_type="LogAppendTime"), NOW, id="LogAppendTime topic"
        ),
        pytest.param(LogConfig(), -1, id="CreateTime topic, no timestamp"),
        pytest.param(
            LogConfig(message_timestamp_after_max_ms=LONG_MAX), -1, id="no window, no timestamp"
        ),
    ],
)
def test_a_producer_may_not_set_log_append_time(
    tmp_path: Path, config: LogConfig, max_timestamp: int
) -> None:
    """Kafka's LogValidator.validateTimestamp: INVALID_TIMESTAMP for every record of a batch the
    producer marked LogAppendTime, unless the topic is CreateTime and the batch has a timestamp."""
    batch = with_max_timestamp(
        build_batch([(b"k", b"v", NOW), (b"k", b"v", NOW)], attributes=0x08), max_timestamp
    )
    log = Log(tmp_path / "t-0", config)
    with pytest.raises(errors.RecordValidationError) as raised:
        log.append(batch, leader_epoch=0, now_ms=NOW)
    assert raised.value.error_code == ErrorCode.invalid_timestamp
    assert [
        (i, "Producer should not set timestamp type to LogAppendTime" in m)
        for i, m in raised.value.record_errors
    ] == [(0, True), (1, True)]
    assert log.log_end_offset == 0 and log.size_in_bytes == 0


@pytest.mark.parametrize("count_change", [-1, 1])
def test_records_that_do_not_fill_their_batch_exactly_are_invalid(
    tmp_path: Path, count_change: int
) -> None:
    """A recordsCount (and lastOffsetDelta) that disagrees with the records: Kafka's "Incorrect
    declared batch size" (INVALID_RECORD); the CRC is valid, so only reading the records tells."""
    batch = build_batch([(b"k", b"v", NOW)] * 3)
    count = 3 + count_change
    after_crc = (
        batch[21:23]
        + struct.pack(">i", count - 1)
        + batch[27:57]
        + struct.pack(">i", count)
        + batch[61:]
    )
    bad = batch[:17] + struct.pack(">I", crc32c(after_crc)) + after_crc
    log = Log(tmp_path / "t-0", LogConfig())
    with pytest.raises(errors.InvalidRecord):
        log.append(bad, leader_epoch=0, now_ms=NOW)
    assert log.log_end_offset == 0


@settings(max_examples=60, deadline=None)
@given(
    deltas=st.lists(st.integers(-3 * HOUR, 3 * HOUR), min_size=1, max_size=8),
    claimed=st.integers(-3 * HOUR, 3 * HOUR),
    before=st.sampled_from([LONG_MAX, HOUR, 0]),
    value_size=st.sampled_from([1, 200, 9000]),
)
def test_acceptance_and_stored_max_timestamp_follow_the_records(
    tmp_path_factory, deltas, claimed, before, value_size
) -> None:
    """Against a model: accepted iff every record lies in [now - before, now + 1 h]; the stored
    maxTimestamp is the records' largest whatever the header claimed. Values of 200 and 9000
    bytes make the record lengths two- and three-byte varints."""
    records = [(b"k", b"v" * value_size, NOW + d) for d in deltas]
    batch = with_max_timestamp(build_batch(records), NOW + claimed)
    log = Log(
        tmp_path_factory.mktemp("ts") / "t-0",
        LogConfig(message_timestamp_before_max_ms=before, max_message_bytes=1 << 20),
    )
    bad = [i for i, d in enumerate(deltas) if not -before <= d <= HOUR]
    if bad:
        with pytest.raises(errors.RecordValidationError) as raised:
            log.append(batch, leader_epoch=0, now_ms=NOW)
        assert [i for i, _ in raised.value.record_errors] == bad
        assert log.size_in_bytes == 0
    else:
        log.append(batch, leader_epoch=0, now_ms=NOW)
        [parsed] = parse_batches(stored(log))
        assert parsed.max_timestamp == NOW + max(deltas)
        assert [r.timestamp for r in parsed.records] == [NOW + d for d in deltas]
    log.close()
