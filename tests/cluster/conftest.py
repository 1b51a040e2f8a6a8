"""Cluster fixtures: one real ZooKeeper server per test module (never per test)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from odradek.server.zookeeper_server import ZooKeeperServer


@pytest.fixture(scope="module")
def zookeeper() -> Iterator[ZooKeeperServer]:
    with ZooKeeperServer() as zk:
        yield zk
