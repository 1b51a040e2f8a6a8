"""log.cleaner.threads and log.cleaner.backoff.ms: Kafka's names and defaults, used by the
LogManager's cleaning schedule (how many logs are cleaned at once, how long the cleaner
rests after a pass with nothing to clean)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from odradek.protocol.records import new_batch, write_varint
from odradek.server.broker import Broker
from odradek.server.config import BrokerConfig, ConfigError
from odradek.storage import LogConfig, LogManager, TopicPartition
from odradek.storage.cleaner import LogCleaner

CFG = LogConfig(cleanup_policy=("compact",), segment_bytes=400, min_cleanable_dirty_ratio=0.01)
NOW = 1_000_000


def record(key: bytes, value: bytes) -> bytes:
    body = b"\x00" + write_varint(0) + write_varint(0) + write_varint(len(key)) + key
    body += write_varint(len(value)) + value + write_varint(0)
    return new_batch(
        write_varint(len(body)) + body,
        attributes=0,
        last_offset_delta=0,
        base_timestamp=NOW,
        max_timestamp=NOW,
        records_count=1,
    )


def make_dirty(lm: LogManager, tp: TopicPartition) -> None:
    lg = lm.get_or_create_log(tp, CFG)
    for i in range(40):
        lg.append(
            record(b"key%d" % (i % 3), b"value-%d" % i + b"x" * 40), leader_epoch=0, now_ms=NOW
        )


def manager(tmp_path: Path, **kwargs) -> LogManager:
    lm = LogManager([str(tmp_path)], CFG, **kwargs)
    lm.startup()
    return lm


def clean(lm: LogManager, now_ms: int) -> None:
    asyncio.run(asyncio.wait_for(lm.clean_logs(now_ms), timeout=60))


def test_kafkas_names_defaults_and_bounds() -> None:
    config = BrokerConfig({})
    assert (config["log.cleaner.threads"], config["log.cleaner.backoff.ms"]) == (1, 15000)
    for name in ("log.cleaner.threads", "log.cleaner.backoff.ms"):
        with pytest.raises(ConfigError, match=f"{name}: Value must be at least 0"):
            BrokerConfig({name: "-1"})


def test_after_a_pass_with_nothing_to_clean_the_cleaner_backs_off(tmp_path: Path) -> None:
    lm = manager(tmp_path, cleaner_backoff_ms=60_000)
    tp = TopicPartition("t", 0)
    lm.get_or_create_log(tp, CFG)
    clean(lm, NOW)  # nothing to clean: rest until NOW + 60 s
    make_dirty(lm, tp)
    size = lm.get_log(tp).size_in_bytes
    clean(lm, NOW + 59_999)
    assert lm.get_log(tp).size_in_bytes == size  # still resting
    clean(lm, NOW + 60_000)
    assert lm.get_log(tp).size_in_bytes < size
    lm.shutdown()


def test_a_pass_that_cleaned_does_not_back_off(tmp_path: Path) -> None:
    lm = manager(tmp_path, cleaner_backoff_ms=60_000)
    make_dirty(lm, TopicPartition("t", 0))
    clean(lm, NOW)
    make_dirty(lm, TopicPartition("t", 1))
    size = lm.get_log(TopicPartition("t", 1)).size_in_bytes
    clean(lm, NOW + 1)  # the last pass found work, so the cleaner looks again at once
    assert lm.get_log(TopicPartition("t", 1)).size_in_bytes < size
    lm.shutdown()


class OverlapCleaner(LogCleaner):
    """The real cleaner, noting how many cleanings run at once; the first two wait for each other."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()
        self.active = self.most = self.entered = 0
        self.pair = threading.Event()

    def clean(self, log, cleanable, now_ms):
        with self.lock:
            self.active += 1
            self.entered += 1
            self.most = max(self.most, self.active)
            first_two = self.entered <= 2
            if self.entered == 2:
                self.pair.set()
        try:
            if first_two:
                self.pair.wait(30)
            return super().clean(log, cleanable, now_ms)
        finally:
            with self.lock:
                self.active -= 1


@pytest.mark.parametrize("threads", [2, 3])
def test_log_cleaner_threads_logs_are_cleaned_at_once(tmp_path: Path, threads: int) -> None:
    cleaner = OverlapCleaner()
    lm = manager(tmp_path, cleaner=cleaner, cleaner_threads=threads)
    tps = [TopicPartition("t", p) for p in range(4)]
    for tp in tps:
        make_dirty(lm, tp)
    sizes = [lm.get_log(tp).size_in_bytes for tp in tps]
    clean(lm, NOW)
    assert cleaner.pair.is_set() and cleaner.most == threads  # overlapping, never more than allowed
    assert all(lm.get_log(tp).size_in_bytes < size for tp, size in zip(tps, sizes))
    lm.shutdown()


def test_one_thread_cleans_one_log_at_a_time(tmp_path: Path) -> None:
    class Counting(LogCleaner):
        def __init__(self) -> None:
            super().__init__()
            self.active = self.most = 0

        def clean(self, log, cleanable, now_ms):
            self.active += 1
            self.most = max(self.most, self.active)
            try:
                return super().clean(log, cleanable, now_ms)
            finally:
                self.active -= 1

    cleaner = Counting()
    lm = manager(tmp_path, cleaner=cleaner)  # Kafka's default: one cleaner thread
    for p in range(3):
        make_dirty(lm, TopicPartition("t", p))
    clean(lm, NOW)
    assert cleaner.most == 1
    lm.shutdown()


def test_zero_threads_clean_nothing(tmp_path: Path) -> None:
    lm = manager(tmp_path, cleaner_threads=0)
    tp = TopicPartition("t", 0)
    make_dirty(lm, tp)
    size = lm.get_log(tp).size_in_bytes
    clean(lm, NOW)
    assert lm.get_log(tp).size_in_bytes == size
    lm.shutdown()


def test_the_broker_wires_both_and_shares_the_buffers_among_threads(tmp_path: Path) -> None:
    config = BrokerConfig(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(tmp_path),
            "log.cleaner.threads": "4",
            "log.cleaner.backoff.ms": "2500",
            "log.cleaner.dedupe.buffer.size": str(64 << 20),
            "log.cleaner.io.buffer.size": "8192",
        }
    )

    async def run() -> None:
        broker = Broker(config)
        await broker.start()
        try:
            lm = broker.log_manager
            assert (lm.cleaner_threads, lm.cleaner_backoff_ms) == (4, 2500)
            # Kafka gives each cleaner thread dedupe.buffer.size / threads of offset map
            assert (lm.cleaner.dedupe_buffer_size, lm.cleaner.io_buffer_size) == (16 << 20, 2048)
        finally:
            await broker.stop()

    asyncio.run(asyncio.wait_for(run(), 60))
