"""Measurements that write into page cache in the same state, whatever ran before them.

Why: on the virtual machines these benchmarks run on, writing a page-cache page costs far
more once the guest has used up the memory the host still backs. ``os.write`` of 400 MB
files one after another (2026-11-28, 24 GB machine, nothing else running) cost 0.34 ms/MB
of system time for the first 1.2 GB and 1.8-2.5 ms/MB after it, with or without ``sync``
between the files; pages a deleted file frees are cheap again when the next writes take
them. A long-running broker lives in that second state: retention deletes old segments and
new ones reuse their pages. A benchmark that keeps every measurement's data instead makes
whichever measurements come after the first gigabyte or so several times dearer, so a
ratio measured side by side depends on the order of the sides: an RF=3 round measured
85 MB/s after two at 159-173 MB/s, and plaintext's first gigabyte on a fresh broker went at
600-870 MB/s against 250-360 MB/s later.

So each measurement writes to a topic of its own, which ``drop_topic`` deletes once it has
been measured, waiting until its files are gone (the brokers run with
``log.segment.delete.delay.ms=0``, else the files would stay a minute), and each starts
after ``os.sync()`` so no measurement writes back another's dirty pages. What a
measurement's own bytes cost, including writeback they cause, still counts.
"""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka.admin import AdminClient

#: The broker config that lets a deleted topic's files go at once.
DELETE_AT_ONCE = {"log.segment.delete.delay.ms": "0"}


def drop_topic(admin: AdminClient, topic: str, data_dir: Path, timeout: float = 60) -> None:
    """Delete ``topic`` and wait until no partition directory of it is left under ``data_dir``
    (searched two levels deep: a broker's log dir, or a cluster's broker dirs)."""
    admin.delete_topics([topic])[topic].result(30)
    deadline = time.monotonic() + timeout
    while any(data_dir.glob(f"{topic}-*")) or any(data_dir.glob(f"*/{topic}-*")):
        if time.monotonic() > deadline:
            raise RuntimeError(f"the files of {topic} are still there after {timeout:.0f} s")
        time.sleep(0.1)
