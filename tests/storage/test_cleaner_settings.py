"""The broker's log.cleaner.* settings as the storage layer takes them."""

from __future__ import annotations

import asyncio

import pytest
from spec import build_batch
from test_cleaner import CFG, NOW, clean, roll, served

from odradek.storage import Log, LogManager, TopicPartition
from odradek.storage.cleaner import LogCleaner


def duplicates(log: Log, count: int = 40) -> None:
    for i in range(count):
        log.append(
            build_batch([(b"key%d" % (i % 3), b"value-%d" % i + b"x" * 40, NOW)]),
            leader_epoch=0,
            now_ms=NOW,
        )


@pytest.mark.parametrize("enable", [True, False])
def test_log_cleaner_enable(tmp_path, enable: bool) -> None:
    lm = LogManager([str(tmp_path)], CFG, cleaner_enable=enable)
    lm.startup()
    try:
        log = lm.get_or_create_log(TopicPartition("t", 0), CFG)
        duplicates(log)
        before = log.size_in_bytes
        asyncio.run(asyncio.wait_for(lm.clean_logs(NOW), timeout=30))
        assert (log.size_in_bytes < before) is enable
    finally:
        lm.shutdown()


def test_an_io_buffer_below_a_batch_header_still_cleans(tmp_path) -> None:
    """log.cleaner.io.buffer.size accepts 0, as Kafka's: the read buffer grows to what a batch needs."""
    log = Log(tmp_path / "t-0", CFG, now_ms=NOW)
    duplicates(log)
    roll(log)
    assert clean(log, NOW, LogCleaner(io_buffer_size=0))
    values = {r.key: r.value for b in served(log) for r in b.records}
    assert values == {
        b"key%d" % k: b"value-%d" % i + b"x" * 40 for i, k in ((39, 0), (37, 1), (38, 2))
    }
    log.close()
