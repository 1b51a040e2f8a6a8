"""The controller's election and zombie fence against a real ZooKeeper server (no brokers)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from odradek.metadata import zk_layout as layout
from odradek.metadata.controller import StateChange
from odradek.metadata.zk_controller import (
    ControllerMoved,
    add_state_change,
    check_fence,
    elect,
    fenced,
)
from odradek.metadata.zk_store import ZkMetadataStore, ZkSettings


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
