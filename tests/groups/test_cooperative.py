"""Cooperative (incremental) rebalancing with librdkafka's cooperative-sticky assignor."""

from __future__ import annotations

import pytest

from .conftest import create_topic
from .members import ConfluentMember
from .test_mixed_clients import PARTITIONS, Flow, shares_all_partitions, wait_for


class CooperativeMember(ConfluentMember):
    """Tracks its partitions through incremental assign/revoke callbacks."""

    def consume(self) -> None:
        from confluent_kafka import Consumer

        def on_assign(consumer, partitions):
            self.assignment = self.assignment | {p.partition for p in partitions}
            self.assignments += 1

        def on_revoke(consumer, partitions):
            self.assignment = self.assignment - {p.partition for p in partitions}

        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "auto.offset.reset": "earliest",
                "partition.assignment.strategy": "cooperative-sticky",
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 200,
                "auto.commit.interval.ms": 100,
            }
        )
        consumer.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke)
        try:
            while not self.stopping.is_set():
                msg = consumer.poll(0.1)
                if msg is not None and not msg.error():
                    self.seen.append(msg.value())
        finally:
            consumer.close()


@pytest.mark.timeout(120)
def test_cooperative_sticky_members_join_and_leave(broker):
    bs = broker.bootstrap_servers
    topic = create_topic(bs, PARTITIONS)
    flow = Flow(bs, topic)
    flow.start()
    a = CooperativeMember(bs, "coop", topic)
    b = CooperativeMember(bs, "coop", topic)
    c = CooperativeMember(bs, "coop", topic)
    try:
        a.start()
        wait_for(lambda: shares_all_partitions([a]))
        first = set(a.assignment)
        b.start()
        wait_for(lambda: shares_all_partitions([a, b]))
        # Sticky and incremental: a kept what it still owns rather than starting over.
        assert a.assignment <= first
        c.start()
        wait_for(lambda: shares_all_partitions([a, b, c]))
        b.stop()
        wait_for(lambda: shares_all_partitions([a, c]))
    finally:
        flow.stop()
    sent = set(flow.sent)
    wait_for(lambda: sent <= set(a.seen) | set(b.seen) | set(c.seen))
    a.stop()
    c.stop()
