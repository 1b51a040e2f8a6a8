"""A partition holds one file descriptor (its active .log); indexes are mapped, not kept open.

Without this a broker with thousands of partitions runs out of descriptors
(EMFILE) while creating a topic.
"""

from __future__ import annotations

import os

from spec import build_batch

from odradek.storage import LogConfig, LogManager, TopicPartition

LOGS = 200


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_each_log_keeps_at_most_one_descriptor(tmp_path):
    lm = LogManager([str(tmp_path)], LogConfig())
    lm.startup()
    before = _open_fds()
    logs = [lm.get_or_create_log(TopicPartition("wide", p)) for p in range(LOGS)]
    for lg in logs[:10]:  # writing to the mapped indexes opens nothing either
        lg.append(build_batch([(b"k", b"v", 1)] * 3), leader_epoch=0, now_ms=0)
    assert _open_fds() - before <= LOGS + 8
    lm.shutdown()
    assert _open_fds() <= before
