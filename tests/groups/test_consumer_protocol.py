"""KIP-848: librdkafka with group.protocol=consumer, assigned by the broker."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, TopicPartition

from .conftest import create_topic
from .members import Member
from .test_mixed_clients import PARTITIONS, Flow, wait_for


class NextGenMember(Member):
    def consume(self) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
                "auto.commit.interval.ms": 100,
                **self.options,
            }
        )
        consumer.subscribe([self.topic])
        try:
            while not self.stopping.is_set():
                msg = consumer.poll(0.1)
                self.assignment = {p.partition for p in consumer.assignment()}
                if msg is not None and not msg.error():
                    self.seen.append(msg.value())
        finally:
            consumer.close()


def disjoint_cover(members) -> bool:
    parts = [m.assignment for m in members]
    return (
        all(parts)
        and sum(len(p) for p in parts) == PARTITIONS
        and set().union(*parts) == set(range(PARTITIONS))
    )


@pytest.mark.timeout(120)
def test_consumer_protocol_members_share_partitions_while_records_flow(broker):
    bs = broker.bootstrap_servers
    topic = create_topic(bs, PARTITIONS)
    flow = Flow(bs, topic)
    flow.start()
    a = NextGenMember(bs, "kip848", topic, **{"group.remote.assignor": "range"})
    b = NextGenMember(bs, "kip848", topic)
    c = NextGenMember(bs, "kip848", topic)
    try:
        a.start()
        wait_for(lambda: disjoint_cover([a]))
        b.start()
        wait_for(lambda: disjoint_cover([a, b]))
        c.start()
        # Reconciliation is incremental: a member gives up a partition before the newcomer gets it,
        # so uneven disjoint covers (3/2/1) pass by on the way to the uniform target of 2 each.
        wait_for(
            lambda: (
                disjoint_cover([a, b, c])
                and sorted(len(m.assignment) for m in (a, b, c)) == [2, 2, 2]
            )
        )
        b.stop()  # leaves with member epoch -1: a and c take over its partitions
        wait_for(lambda: disjoint_cover([a, c]))
    finally:
        flow.stop()
    sent = set(flow.sent)
    wait_for(lambda: sent <= set(a.seen) | set(b.seen) | set(c.seen))
    a.stop()
    c.stop()
    # Auto-commits were made with member epochs; the group's offsets reach the end of each partition.
    check = Consumer({"bootstrap.servers": bs, "group.id": "kip848"})
    try:
        committed = check.committed(
            [TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10
        )
        assert sum(tp.offset for tp in committed) == len(sent)
    finally:
        check.close()
