"""pytest plugin: the ``odradek_broker`` fixture, a real broker for a test session.

Registered through the ``pytest11`` entry point, so installing odradek makes the
fixture available everywhere, replacing a Docker/testcontainers Kafka. Broker
configs can be set with the ``odradek_broker_config`` fixture, overridable per
test module or conftest.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from odradek.server.embedded import EmbeddedBroker


@pytest.fixture(scope="session")
def odradek_broker_config() -> dict[str, str]:
    """Broker config overrides (Kafka names) for ``odradek_broker``; override to change."""
    return {}


@pytest.fixture(scope="session")
def odradek_broker(odradek_broker_config: dict[str, str]) -> Iterator[EmbeddedBroker]:
    """A running broker shared by the session; use ``.bootstrap_servers``."""
    with EmbeddedBroker(config=odradek_broker_config) as broker:
        yield broker
