"""ZkMetadataStore's image from watch values, without a server: the appliers are what the
watches call on the event loop, so they are driven here directly with znode stats."""

from __future__ import annotations

import asyncio
import uuid
from typing import NamedTuple

import pytest

from odradek.metadata.image import BrokerImage, IsrUpdate, TopicImage
from odradek.metadata.zk_layout import PartitionState, TopicAssignment
from odradek.metadata.zk_store import ZkMetadataStore, ZkSettings
from odradek.protocol.errors import ErrorCode


class Stat(NamedTuple):
    mzxid: int
    czxid: int
    version: int = 0


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[TopicImage | None, TopicImage | None]] = []

    def on_topic_changed(self, before, after) -> None:
        self.events.append((before, after))


@pytest.fixture
def store() -> tuple[ZkMetadataStore, Recorder]:
    s = ZkMetadataStore(ZkSettings("127.0.0.1:1"), {"PLAINTEXT": "PLAINTEXT"}, None)
    recorder = Recorder()
    s.subscribe(recorder)
    return s, recorder


def assign(store, topic_id, partitions: int, zxid: int, created: int | None = None) -> None:
    replicas = dict.fromkeys(range(partitions), (1,))
    stat = Stat(zxid, zxid if created is None else created)
    store._apply_assignment("t", TopicAssignment(topic_id, replicas, {}, {}), stat)


def state(store, p: int, leader: int, epoch: int, zxid: int, created: int | None = None) -> None:
    stat = Stat(zxid, zxid if created is None else created)
    store._apply_state("t", p, PartitionState(leader, epoch, (1,), 1), stat)


def test_a_topic_is_published_only_with_every_partition(store):
    s, recorder = store
    topic_id = uuid.uuid4()
    assign(s, topic_id, 3, zxid=10)
    state(s, 0, 1, 0, zxid=11)
    state(s, 1, 1, 0, zxid=12)
    assert s.topic("t") is None and "t" in s.pending_topics()
    state(s, 2, 1, 0, zxid=13)
    assert len(s.topic("t").partitions) == 3
    assert [(b, a is not None) for b, a in recorder.events] == [(None, True)]

    # Growth: the new partitions appear together, once all have their state.
    assign(s, topic_id, 5, zxid=20, created=10)
    state(s, 3, 1, 0, zxid=21)
    assert len(s.topic("t").partitions) == 3
    state(s, 4, 1, 0, zxid=22)
    assert len(s.topic("t").partitions) == 5


def test_stale_values_are_ignored_and_a_new_topic_id_replaces_the_topic(store):
    s, recorder = store
    first = uuid.uuid4()
    assign(s, first, 1, zxid=10)
    state(s, 0, 1, 3, zxid=30, created=11)
    state(s, 0, 1, 2, zxid=20, created=11)  # read before the one applied: ignored
    assert s.topic("t").partitions[0].leader_epoch == 3

    # Deleted and created again under a new id; the old state's deletion was never seen, and
    # it is no part of the new topic (created before it), which waits for its own state.
    second = uuid.uuid4()
    assign(s, second, 1, zxid=40)
    assert s.topic("t") is None
    state(s, 0, 2, 0, zxid=41)
    assert s.topic("t").partitions[0].leader == 2
    assert s.topic("t").topic_id == second and s.topic_by_id(first) is None
    kinds = [(b is not None, a is not None) for b, a in recorder.events]
    assert kinds[-2:] == [(True, False), (False, True)]


def test_a_broker_in_controlled_shutdown_stays_so_until_its_registration_goes(store):
    """Its /controlled_shutdown request and its registration vanish with its session, but two
    watches report them, in either order. Reported gone from the first while still registered,
    it must not look live and serving: a leader would put the exiting broker back into its
    ISRs, a controller could elect it."""
    s, _ = store
    s.node_id = 2
    brokers = {n: BrokerImage(n, (("PLAINTEXT", "127.0.0.1", 9090 + n),)) for n in (1, 2, 3)}
    epochs = {1: 101, 2: 102, 3: 103}
    s._apply_brokers(brokers, epochs)
    s._apply_shutting_down({1})
    s._apply_shutting_down(set())  # its session closed; /brokers/ids not reported yet
    assert s.shutting_down_broker_ids() == {1}
    rejoin = IsrUpdate(2, 5, 7, (1, 2, 3), (101, -1, 103))
    assert asyncio.run(s.alter_isr("t", 0, rejoin)) == ErrorCode.ineligible_replica

    s._apply_brokers({n: brokers[n] for n in (2, 3)}, {2: 102, 3: 103})  # deregistered
    s._apply_brokers(brokers, {**epochs, 1: 201})  # and back, under a new session
    assert s.shutting_down_broker_ids() == set()

    # Back under a new session before the watch saw it leave: serving again too.
    s._apply_shutting_down({1})
    s._apply_shutting_down(set())
    s._apply_brokers(brokers, {**epochs, 1: 301})
    assert s.shutting_down_broker_ids() == set()


def test_the_broker_tries_a_lost_zookeeper_again_at_least_every_second_and_a_half(store):
    """A restarted ZooKeeper server times the sessions it restored from its own start, so a
    broker keeps its session only if it is back within the session timeout. kazoo's default
    doubles the wait between attempts up to an hour: after a 7 s outage a broker's next
    attempt came 10 s later, past its 6 s session, and it had to register anew. The Java
    client Kafka uses tries again within a second."""
    s, _ = store
    retry = s.client._conn_retry  # the policy kazoo's connection loop copies
    assert retry.max_tries == -1
    assert retry.max_delay * (1 + retry.max_jitter) <= 1.5
