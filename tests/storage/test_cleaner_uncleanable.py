"""Uncleanable partitions (Kafka's LogCleanerManager): a log whose cleaning fails on a bad batch
is skipped from then on, until it is deleted (a new log under the same name is cleaned) or
truncated (the bad data may be gone; a new failure marks it again)."""

from __future__ import annotations

from codec_spec import build
from test_cleaner import CFG, NOW, records_of

from odradek.storage import Log
from odradek.storage.cleaner import LogCleaner


def corrupt_log(path) -> Log:
    log = Log(path, CFG, now_ms=NOW)
    for round_ in range(4):
        log.append(
            build([(b"a", b"a%d" % round_, NOW), (b"b", b"b%d" % round_, NOW)]),
            leader_epoch=0,
            now_ms=NOW,
        )
    log.roll(NOW)
    first = log.segments[0].path
    data = bytearray(first.read_bytes())
    data[-3] ^= 0xFF  # inside the last batch's records: its CRC32C no longer matches
    first.write_bytes(bytes(data))
    return log


def test_a_failed_cleaning_marks_the_log_and_later_rounds_skip_it(tmp_path):
    log = corrupt_log(tmp_path / "t-0")
    cleaner = LogCleaner()
    assert cleaner.prepare(log, NOW) is None
    assert cleaner.is_uncleanable(log)
    assert cleaner.cleanable_range(log, NOW) is None  # skipped, not read again
    assert cleaner.is_uncleanable(log)
    log.close()


def test_a_truncated_log_is_tried_again(tmp_path):
    log = corrupt_log(tmp_path / "t-0")
    cleaner = LogCleaner()
    assert cleaner.prepare(log, NOW) is None and cleaner.is_uncleanable(log)
    log.truncate_to(2)  # the corrupt batch goes
    assert not cleaner.is_uncleanable(log)
    for round_ in range(3):
        log.append(build([(b"a", b"x%d" % round_, NOW)]), leader_epoch=0, now_ms=NOW)
    log.roll(NOW)
    plan = cleaner.prepare(log, NOW)
    assert plan is not None and cleaner.install(log, plan, NOW)
    assert records_of(log) == [(1, b"b", b"b0"), (4, b"a", b"x2")]
    log.close()


def test_a_truncation_that_keeps_the_bad_batch_marks_the_log_again(tmp_path):
    log = corrupt_log(tmp_path / "t-0")
    cleaner = LogCleaner()
    assert cleaner.prepare(log, NOW) is None
    log.truncate_to(log.log_end_offset)  # a no-op truncation still counts: the next try fails again
    assert cleaner.prepare(log, NOW) is None
    assert cleaner.is_uncleanable(log)
    log.close()


def test_a_deleted_log_is_dropped_and_a_new_log_of_that_name_is_cleaned(tmp_path):
    path = tmp_path / "t-0"
    log = corrupt_log(path)
    cleaner = LogCleaner()
    assert cleaner.prepare(log, NOW) is None and cleaner.is_uncleanable(log)
    log.deleted = True  # as LogManager.delete_log marks it
    assert not cleaner.is_uncleanable(log)
    assert path not in cleaner.uncleanable
    log.close()
    for f in path.iterdir():
        f.unlink()
    again = Log(path, CFG, now_ms=NOW)
    for round_ in range(3):
        again.append(build([(b"a", b"v%d" % round_, NOW)]), leader_epoch=0, now_ms=NOW)
    again.roll(NOW)
    plan = cleaner.prepare(again, NOW)
    assert plan is not None and cleaner.install(again, plan, NOW)
    assert records_of(again) == [(2, b"a", b"v2")]
    assert not cleaner.uncleanable
    again.close()
