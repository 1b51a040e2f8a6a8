"""Several members from different client libraries in one group, while records flow."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from confluent_kafka import Producer

from .conftest import create_topic
from .members import AiokafkaMember, ConfluentMember, KafkaPythonMember

PARTITIONS = 6


def wait_for(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def shares_all_partitions(members) -> bool:
    parts = [m.assignment for m in members]
    return (
        all(parts)
        and sum(len(p) for p in parts) == PARTITIONS
        and set().union(*parts) == set(range(PARTITIONS))
    )


class Flow(threading.Thread):
    """A producer writing numbered records until stopped."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.topic = topic
        self.sent: list[bytes] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        i = 0
        while not self.stopping.is_set():
            value = b"r%d" % i
            self.producer.produce(self.topic, value, partition=i % PARTITIONS)
            self.sent.append(value)
            i += 1
            self.producer.poll(0)
            time.sleep(0.005)
        assert self.producer.flush(10) == 0

    def stop(self) -> None:
        self.stopping.set()
        self.join(30)


KILLED_MEMBER = """
import sys
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "auto.offset.reset": "earliest",
              "partition.assignment.strategy": "range", "session.timeout.ms": 1000, "heartbeat.interval.ms": 100,
              "enable.auto.commit": False})
c.subscribe([sys.argv[3]])
while True:
    m = c.poll(0.1)
    if m is not None and not m.error():
        print(m.value().decode(), flush=True)
"""


@pytest.mark.timeout(150)
def test_mixed_members_join_leave_and_die_while_records_flow(broker):
    bs = broker.bootstrap_servers
    topic = create_topic(bs, PARTITIONS)
    group = "mixed"
    flow = Flow(bs, topic)
    flow.start()
    members = [
        ConfluentMember(bs, group, topic),
        KafkaPythonMember(bs, group, topic),
        AiokafkaMember(bs, group, topic),
    ]
    killed = None
    try:
        for m in members:
            m.start()
        # Three libraries share the range assignor: between them they hold every partition once.
        wait_for(lambda: shares_all_partitions(members))
        assert sorted(len(m.assignment) for m in members) == [2, 2, 2]
        # A fourth member joins from another process, reads, and is killed (SIGKILL): its
        # partitions come back after the session timeout and nothing it held is lost.
        killed = subprocess.Popen(
            [sys.executable, "-c", KILLED_MEMBER, bs, group, topic],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert killed.stdout is not None
        killed.stdout.readline()  # it has partitions and consumed a record
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait(10)
        wait_for(lambda: shares_all_partitions(members))
        # One member leaves cleanly; the others take over its partitions.
        members[1].stop()
        remaining = [members[0], members[2]]
        wait_for(lambda: shares_all_partitions(remaining))
    finally:
        flow.stop()
        if killed is not None and killed.poll() is None:
            killed.kill()
    sent = set(flow.sent)
    wait_for(
        lambda: sent <= set(members[0].seen) | set(members[2].seen) | set(members[1].seen),
        timeout=30,
    )
    for m in (members[0], members[2]):
        m.stop()
    assert len(sent) > 100
