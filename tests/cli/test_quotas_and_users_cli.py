"""`odradek quotas` and `odradek users` against a broker with a PLAINTEXT and a SCRAM
listener: quotas set and described as kafka-configs.sh does, a user added by the tool logs
in with its password, and the tools reach a SASL listener through --command-config."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from odradek import EmbeddedBroker
from tests.cluster.test_scram_credentials_in_zookeeper import logs_in
from tests.quota.quota_requests import describe_quotas, described

#: The entity of the quota tests: user alice with the default client id.
ALICE_DEFAULT = ("--entity-type", "users", "--entity-name", "alice")
ALICE_DEFAULT += ("--entity-type", "clients", "--entity-default")


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    config = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
    }
    with EmbeddedBroker(config=config) as b:
        yield b


def test_quotas_alter_and_describe(odradek, broker) -> None:
    add = ("--add-config", "producer_byte_rate=1048576,request_percentage=12.5")
    done = odradek(broker, "quotas", "alter", *ALICE_DEFAULT, *add)
    assert done.returncode == 0, done.stderr
    assert "Completed updating config for user-principal 'alice', the default client-id" in (
        done.stdout
    )
    found = described(describe_quotas(broker.bootstrap_servers, []))
    assert found == {
        (("user", "alice"), ("client-id", None)): {
            "producer_byte_rate": 1048576.0,
            "request_percentage": 12.5,
        }
    }
    shown = odradek(
        broker, "quotas", "describe", "--entity-type", "users", "--entity-type", "clients"
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == [
        "Quota configs for user-principal 'alice', the default client-id are "
        "producer_byte_rate=1048576.0, request_percentage=12.5"
    ]
    # Only user entities: none (alice's quota is of a user and a client id).
    alone = odradek(broker, "quotas", "describe", "--entity-type", "users")
    assert alone.returncode == 0 and alone.stdout == ""

    delete = ("--delete-config", "producer_byte_rate,request_percentage")
    removed = odradek(broker, "quotas", "alter", *ALICE_DEFAULT, *delete)
    assert removed.returncode == 0, removed.stderr
    assert described(describe_quotas(broker.bootstrap_servers, [])) == {}


def test_quotas_alter_refusals(odradek, broker) -> None:
    bad_key = odradek(
        broker, "quotas", "alter", "--entity-type", "clients", "--entity-name", "c",
        "--add-config", "bytes_per_fortnight=5",
    )  # fmt: skip
    assert bad_key.returncode == 1
    assert "INVALID_REQUEST" in bad_key.stderr and "bytes_per_fortnight" in bad_key.stderr
    no_name = odradek(broker, "quotas", "alter", "--entity-type", "clients", "--add-config", "x=1")
    assert no_name.returncode == 1 and "--entity-name" in no_name.stderr


def test_users_add_list_delete_and_log_in(odradek, broker, tmp_path) -> None:
    sasl = broker.listeners["SASL_PLAINTEXT"]
    added = odradek(
        broker, "users", "add", "--user", "carol", "--password", "carol-pw",
        "--mechanism", "SCRAM-SHA-512", "--iterations", "8192",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert logs_in(sasl, "SCRAM-SHA-512", "carol", "carol-pw")
    assert not logs_in(sasl, "SCRAM-SHA-512", "carol", "wrong")

    listed = odradek(broker, "users", "list")
    assert listed.returncode == 0, listed.stderr
    assert "carol: SCRAM-SHA-512 (iterations 8192)" in listed.stdout.splitlines()

    # The tools log in through --command-config, as the others do.
    properties = tmp_path / "client.properties"
    properties.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="carol" password="carol-pw";\n'
    )
    secured = type("Secured", (), {"bootstrap_servers": sasl})()
    for args in (("users", "list"), ("quotas", "describe")):
        via_sasl = odradek(secured, *args, "--command-config", str(properties))
        assert via_sasl.returncode == 0, via_sasl.stderr

    deleted = odradek(broker, "users", "delete", "--user", "carol")
    assert deleted.returncode == 0, deleted.stderr
    assert not logs_in(sasl, "SCRAM-SHA-512", "carol", "carol-pw")
    missing = odradek(broker, "users", "list", "--user", "carol")
    assert missing.returncode == 1 and "RESOURCE_NOT_FOUND" in missing.stderr
