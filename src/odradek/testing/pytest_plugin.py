"""pytest plugin: the ``odradek_broker`` fixture, a real broker for a test session, and
``odradek_cluster``, a real cluster (ZooKeeper and three brokers) for a test module.

Registered through the ``pytest11`` entry point, so installing odradek makes the
fixtures available everywhere, replacing a Docker/testcontainers Kafka. Broker
configs can be set with the ``odradek_broker_config`` and
``odradek_cluster_config`` fixtures, overridable per test module or conftest.
The cluster is module-scoped because tests of failover stop and kill brokers:
a module's tests share one cluster (starting one takes a second or two), and
the next module starts afresh.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from odradek.server.embedded import EmbeddedBroker
from odradek.server.embedded_cluster import EmbeddedCluster


@pytest.fixture(scope="session")
def odradek_broker_config() -> dict[str, str]:
    """Broker config overrides (Kafka names) for ``odradek_broker``; override to change."""
    return {}


@pytest.fixture(scope="session")
def odradek_broker(odradek_broker_config: dict[str, str]) -> Iterator[EmbeddedBroker]:
    """A running broker shared by the session; use ``.bootstrap_servers``."""
    with EmbeddedBroker(config=odradek_broker_config) as broker:
        yield broker


@pytest.fixture(scope="module")
def odradek_cluster_config() -> dict[str, str]:
    """Broker config overrides (Kafka names) for every broker of ``odradek_cluster``."""
    return {}


@pytest.fixture(scope="module")
def odradek_cluster(odradek_cluster_config: dict[str, str]) -> Iterator[EmbeddedCluster]:
    """Three brokers (node ids 1-3) and their ZooKeeper; use ``.bootstrap_servers``,
    ``.kill(node_id)``, ``.restart(node_id)``, ``.pause(node_id)``."""
    with EmbeddedCluster(brokers=3, config=odradek_cluster_config) as cluster:
        yield cluster
