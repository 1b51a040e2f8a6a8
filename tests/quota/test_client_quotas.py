"""DescribeClientQuotas and AlterClientQuotas on a real broker process, as raw kio requests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from odradek import EmbeddedBroker
from odradek.protocol.errors import ErrorCode
from tests.quota.quota_requests import alter_quotas, describe_quotas, described

EXACT, DEFAULT, ANY = 0, 1, 2


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        yield b


def test_alter_and_describe_with_kafkas_matching(broker):
    bootstrap = broker.bootstrap_servers
    entries = [
        ({"user": "alice"}, {"producer_byte_rate": 1024.0}),
        ({"user": "alice", "client-id": "app"}, {"consumer_byte_rate": 2048.0}),
        ({"user": None}, {"request_percentage": 50.0}),
        ({"client-id": None}, {"controller_mutation_rate": 2.5}),
        ({"client-id": "app"}, {"producer_byte_rate": 4096.0}),
    ]
    assert alter_quotas(bootstrap, entries) == [(0, None)] * 5

    everything = described(describe_quotas(bootstrap, []))
    assert everything[(("user", "alice"),)] == {"producer_byte_rate": 1024.0}
    assert everything[(("user", "alice"), ("client-id", "app"))] == {"consumer_byte_rate": 2048.0}
    assert everything[(("user", None),)] == {"request_percentage": 50.0}
    assert everything[(("client-id", None),)] == {"controller_mutation_rate": 2.5}

    exact = described(describe_quotas(bootstrap, [("user", EXACT, "alice")]))
    assert set(exact) == {(("user", "alice"),), (("user", "alice"), ("client-id", "app"))}
    strict = described(describe_quotas(bootstrap, [("user", EXACT, "alice")], strict=True))
    assert set(strict) == {(("user", "alice"),)}
    defaults = described(describe_quotas(bootstrap, [("user", DEFAULT, None)]))
    assert set(defaults) == {(("user", None),)}
    any_client = described(describe_quotas(bootstrap, [("client-id", ANY, None)], strict=True))
    assert set(any_client) == {(("client-id", None),), (("client-id", "app"),)}

    # Removing the last key removes the entity.
    assert alter_quotas(bootstrap, [({"client-id": "app"}, {"producer_byte_rate": None})]) == [
        (0, None)
    ]
    left = described(describe_quotas(bootstrap, [("client-id", EXACT, "app")], strict=True))
    assert left == {}
    # The defaults would apply to the other tests' clients (a default user's quota comes
    # before any client id's): gone again.
    removed = [(entity, dict.fromkeys(ops)) for entity, ops in entries[:4]]
    assert alter_quotas(bootstrap, removed) == [(0, None)] * 4
    assert described(describe_quotas(bootstrap, [])) == {}


def test_validate_only_and_invalid_requests(broker):
    bootstrap = broker.bootstrap_servers
    ok = alter_quotas(bootstrap, [({"user": "v"}, {"producer_byte_rate": 10.0})], True)
    assert ok == [(0, None)]
    assert described(describe_quotas(bootstrap, [("user", EXACT, "v")])) == {}

    bad = alter_quotas(
        bootstrap,
        [
            ({"user": "v"}, {"no_such_quota": 1.0}),
            ({"user": "v"}, {"producer_byte_rate": 10.5}),
            ({"user": "v"}, {"request_percentage": -1.0}),
            ({"group": "g"}, {"producer_byte_rate": 10.0}),
            ({"user": "v"}, {"consumer_byte_rate": 100.0}),
        ],
    )
    assert [code for code, _ in bad] == [ErrorCode.invalid_request] * 4 + [0]
    assert "no_such_quota" in (bad[0][1] or "")

    for components in (
        [("user", EXACT, "a"), ("user", EXACT, "b")],
        [("", ANY, None)],
        [("user", EXACT, None)],
        [("user", 7, None)],
        [("ip", ANY, None), ("user", ANY, None)],
    ):
        response = describe_quotas(bootstrap, components)
        assert response.error_code == ErrorCode.invalid_request, components
        assert response.entries is None
    assert describe_quotas(bootstrap, [("ip", ANY, None)]).entries == ()


def test_quotas_survive_a_restart(tmp_path):
    """A single node keeps client quotas in its metadata file, beside SCRAM credentials."""
    with EmbeddedBroker(data_dir=tmp_path / "data") as broker:
        entity = {"user": "kept", "client-id": None}
        ops = [(entity, {"request_percentage": 5.0})]
        assert alter_quotas(broker.bootstrap_servers, ops) == [(0, None)]
        broker.restart()
        found = described(describe_quotas(broker.bootstrap_servers, []))
    assert found == {(("user", "kept"), ("client-id", None)): {"request_percentage": 5.0}}
