"""Integration fixtures: a real `odradek serve` process per test module on a free port."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from odradek import EmbeddedBroker


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(config={"message.max.bytes": "200000"}) as b:
        yield b


@pytest.fixture
def fresh_broker(tmp_path) -> Iterator[EmbeddedBroker]:
    """A broker of its own, for tests that restart or kill it."""
    b = EmbeddedBroker(data_dir=tmp_path / "data")
    with b:
        yield b
