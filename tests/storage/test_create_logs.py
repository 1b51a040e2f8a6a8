"""LogManager.get_or_create_logs: many partitions at once, one dir fsync per log dir."""

from __future__ import annotations

from odradek.storage import LogConfig, LogManager, TopicPartition


def test_creates_in_order_spreads_over_dirs_and_returns_existing(tmp_path):
    dirs = [tmp_path / "a", tmp_path / "b"]
    lm = LogManager([str(d) for d in dirs], LogConfig())
    lm.startup()
    first = lm.get_or_create_log(TopicPartition("t", 0))
    tps = [TopicPartition("t", p) for p in range(6)]
    logs = lm.get_or_create_logs(tps)
    assert [lg.topic_partition for lg in logs] == tps
    assert logs[0] is first
    assert {lg.dir.parent.name for lg in logs} == {"a", "b"}
    assert all(lg.dir.is_dir() for lg in logs)
    assert lm.get_or_create_logs(tps[2:4]) == logs[2:4]
    lm.shutdown()
