"""`odradek cluster up` as a user runs it: a subprocess, its printed lines, SIGTERM."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

from confluent_kafka.admin import AdminClient
from kazoo.client import KazooClient

from odradek.server.zookeeper_server import ruok

READY = re.compile(
    r"^odradek cluster ready bootstrap_servers=(127\.0\.0\.1:\d+,127\.0\.0\.1:\d+) "
    r"zookeeper=(127\.0\.0\.1:\d+)$"
)
BROKER = re.compile(r"^broker node_id=(\d) pid=(\d+) listener=(127\.0\.0\.1:\d+)$")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_cluster_up_prints_its_lines_and_stops_on_sigterm(tmp_path):
    process = subprocess.Popen(
        [sys.executable, "-m", "odradek", "cluster", "up", "--brokers", "2"]
        + ["--data-dir", str(tmp_path), "-o", "num.partitions=4"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        ready = READY.match(process.stdout.readline().rstrip("\n"))
        assert ready, "the first line is the ready line"
        brokers = [BROKER.match(process.stdout.readline().rstrip("\n")) for _ in range(2)]
        assert all(brokers)
        assert [b.group(1) for b in brokers] == ["1", "2"]  # type: ignore[union-attr]
        assert ",".join(b.group(3) for b in brokers) == ready.group(1)  # type: ignore[union-attr]
        pids = [int(b.group(2)) for b in brokers]  # type: ignore[union-attr]

        admin = AdminClient({"bootstrap.servers": ready.group(1)})
        assert sorted(b.id for b in admin.list_topics(timeout=10).brokers.values()) == [1, 2]
        zk = KazooClient(ready.group(2))
        zk.start()
        try:
            assert sorted(zk.get_children("/brokers/ids")) == ["1", "2"]
        finally:
            zk.stop()
            zk.close()
        assert (tmp_path / "broker-1").is_dir() and (tmp_path / "zookeeper").is_dir()

        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
        assert not any(_alive(pid) for pid in pids)
        host, port = ready.group(2).split(":")
        assert not ruok(host, int(port)), "ZooKeeper stopped too"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
