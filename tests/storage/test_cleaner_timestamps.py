"""message.timestamp.before.max.ms against records whose timestamp delta is negative: the batch
header's base and max timestamps do not bound such a record from below, so it must be checked
itself (Kafka's LogValidator checks every record)."""

from __future__ import annotations

import pytest
from codec_spec import CODECS, build

from odradek.storage import Log, LogConfig, errors

NOW = 10**12


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_a_record_below_the_window_through_a_negative_delta_is_rejected(tmp_path, codec):
    log = Log(tmp_path / "t-0", LogConfig(message_timestamp_before_max_ms=1000), now_ms=NOW)
    sneaky = build([(b"k", b"v", NOW), (b"k", b"v", NOW - 10**6)], codec=CODECS[codec])
    with pytest.raises(errors.RecordValidationError) as info:
        log.append(sneaky, leader_epoch=0, now_ms=NOW)
    assert [index for index, _ in info.value.record_errors] == [1]
    assert log.log_end_offset == 0
    log.append(
        build([(b"k", b"v", NOW), (b"k", b"v", NOW - 500)], codec=CODECS[codec]),
        leader_epoch=0,
        now_ms=NOW,
    )
    assert log.log_end_offset == 2
    log.close()


def test_without_a_before_limit_old_records_pass(tmp_path):
    log = Log(tmp_path / "t-0", LogConfig(), now_ms=NOW)
    log.append(build([(b"k", b"v", NOW), (b"k", b"v", 0)]), leader_epoch=0, now_ms=NOW)
    assert log.log_end_offset == 2
    log.close()
