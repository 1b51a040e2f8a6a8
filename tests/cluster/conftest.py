"""Cluster fixtures: one real ZooKeeper server per test module (never per test), and a
kazoo session on the module's ``odradek_cluster`` for reading what the cluster wrote."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from odradek.server.embedded_cluster import EmbeddedCluster
from odradek.server.zookeeper_server import ZooKeeperServer


@pytest.fixture(scope="module")
def zookeeper() -> Iterator[ZooKeeperServer]:
    with ZooKeeperServer() as zk:
        yield zk


@pytest.fixture(scope="module")
def zk(odradek_cluster: EmbeddedCluster) -> Iterator[KazooClient]:
    client = KazooClient(odradek_cluster.zookeeper)
    client.start()
    yield client
    client.stop()
    client.close()
