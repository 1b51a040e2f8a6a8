"""The controller's election, its zombie fence and its leader elections against a real ZooKeeper
server (no brokers)."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from odradek.metadata import zk_layout as layout
from odradek.metadata.controller import StateChange
from odradek.metadata.image import BrokerImage
from odradek.metadata.store import ElectionType
from odradek.metadata.zk_controller import (
    ControllerMoved,
    add_state_change,
    check_fence,
    elect,
    fenced,
)
from odradek.metadata.zk_store import ZkMetadataStore, ZkSettings

encode_state = layout.encode_partition_state


@pytest.fixture
def sessions(zookeeper, request) -> Iterator[tuple[KazooClient, KazooClient]]:
    """Two ZooKeeper sessions under a chroot of this test's own."""
    connect = f"{zookeeper.connect_string}/{request.node.name}"
    root = KazooClient(zookeeper.connect_string)
    root.start()
    root.ensure_path(f"/{request.node.name}{layout.TOPICS}/t/partitions/0")
    root.stop()
    clients = (KazooClient(connect), KazooClient(connect))
    for c in clients:
        c.start()
    yield clients
    for c in clients:
        c.stop()
        c.close()


def _state_write(client, fence, leader: int, version: int | None) -> list:
    tx = fenced(client, fence)
    state = layout.PartitionState(leader, 0, (leader,), fence.epoch)
    add_state_change(tx, StateChange("t", 0, state, version))
    results = tx.commit()
    check_fence(results)
    return results


def test_zombie_controller_write_is_refused(sessions):
    a, b = sessions
    fence_a = elect(a, 1)
    assert fence_a is not None and fence_a.epoch == 1
    assert elect(b, 2) is None, "/controller is taken while broker 1's session lives"
    assert layout.decode_controller(a.get(layout.CONTROLLER)[0]) == 1
    _state_write(a, fence_a, leader=1, version=None)

    # Broker 1's session ends as far as ZooKeeper is concerned (its ephemeral node goes), but it
    # has not noticed: broker 2 is elected with a higher epoch.
    a.delete(layout.CONTROLLER)
    fence_b = elect(b, 2)
    assert fence_b is not None and fence_b.epoch == 2
    assert layout.decode_controller_epoch(b.get(layout.CONTROLLER_EPOCH)[0]) == 2

    _, stat = a.get(layout.state_path("t", 0))
    with pytest.raises(ControllerMoved):
        _state_write(a, fence_a, leader=3, version=stat.version)
    data, _ = b.get(layout.state_path("t", 0))
    assert layout.decode_partition_state(data).leader == 1, "the zombie's write must not land"

    _state_write(b, fence_b, leader=2, version=stat.version)
    data, _ = b.get(layout.state_path("t", 0))
    assert layout.decode_partition_state(data) == layout.PartitionState(2, 0, (2,), 2)


def test_partition_state_write_is_conditional_on_its_version(sessions):
    a, _ = sessions
    fence = elect(a, 1)
    _state_write(a, fence, leader=1, version=None)
    _state_write(a, fence, leader=2, version=0)
    results = _state_write(a, fence, leader=3, version=0)  # computed from a stale read
    assert type(results[1]).__name__ == "BadVersionError"
    assert layout.decode_partition_state(a.get(layout.state_path("t", 0))[0]).leader == 2


def test_store_connects_under_a_chroot_and_keeps_the_cluster_id(zookeeper):
    def store() -> ZkMetadataStore:
        return ZkMetadataStore(
            ZkSettings(f"{zookeeper.connect_string}/odradek/c1"), {"PLAINTEXT": "PLAINTEXT"}, None
        )

    first = store()
    try:
        cluster_id = first.connect("given-id")
        assert cluster_id == "given-id"
        assert first.client.exists(layout.BROKER_IDS) is not None
    finally:
        first.close()
    second = store()
    try:
        assert second.connect(None) == "given-id", "/cluster/id wins over a new id"
    finally:
        second.close()
    root = KazooClient(zookeeper.connect_string)
    root.start()
    try:
        assert root.exists("/odradek/c1/cluster/id") is not None
    finally:
        root.stop()
        root.close()


def test_an_election_decides_on_the_state_in_zookeeper_not_the_watched_copy(zookeeper):
    """A leader writes its ISR changes to the state znode itself, so a client can read, from
    another broker, that the preferred replica is back in the ISR before the controller's watch
    has brought that change. The preferred election then asked for must see it: deciding on the
    watched copy answered PREFERRED_LEADER_NOT_AVAILABLE (the likely cause of a CI failure of
    tests/cluster/test_transactions.py, which elects as soon as the metadata shows the replica
    back, and waited in vain for the leader to move)."""
    store = ZkMetadataStore(
        ZkSettings(f"{zookeeper.connect_string}/odradek/election"), {"PLAINTEXT": "PLAINTEXT"}, None
    )
    store.connect(None)
    try:
        client = store.client
        assignment = layout.encode_assignment(uuid.uuid4(), {0: (1, 2)})
        client.create(layout.topic_path("t"), assignment, makepath=True)
        led_by_2 = layout.PartitionState(2, 1, (2,), 1)
        client.create(layout.state_path("t", 0), encode_state(led_by_2), makepath=True)
        # The controller's copy, as its watches delivered it (no watch runs without start()).
        data, stat = client.get(layout.topic_path("t"))
        store._apply_assignment("t", layout.decode_assignment(data), stat)
        data, stat = client.get(layout.state_path("t", 0))
        store._apply_state("t", 0, layout.decode_partition_state(data), stat)
        brokers = {n: BrokerImage(n, (("PLAINTEXT", "127.0.0.1", 9000 + n),)) for n in (1, 2)}
        store._apply_brokers(brokers, {1: 10, 2: 11})
        store.controller_fence = elect(client, 1)
        # Leader 2 takes broker 1 back into its ISR; the controller's watch has not run yet.
        back = dataclasses.replace(led_by_2, isr=(2, 1))
        client.set(layout.state_path("t", 0), encode_state(back), version=stat.version)

        assert store.elect_leaders(ElectionType.PREFERRED, [("t", 0)]) == {("t", 0): None}
        elected = layout.decode_partition_state(client.get(layout.state_path("t", 0))[0])
        assert (elected.leader, elected.leader_epoch, elected.isr) == (1, 2, (2, 1))
    finally:
        store.close()
