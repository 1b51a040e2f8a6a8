"""`--command-config` end to end: the client tools and the console over a SASL_SSL listener,
configured with a Java client.properties file as Kafka's own tools take it.

One broker for the module: PLAINTEXT (to create the SCRAM user, as an operator would) and
SASL_SSL with PLAIN, SCRAM-SHA-512 and unsecured OAUTHBEARER.
"""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from console.conftest import ConsoleProcess

from odradek import EmbeddedBroker
from odradek.testing.certificates import Certificates
from security.clients import logged, new_topic

TIMEOUT = 90
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


@pytest.fixture(scope="module")
def broker(certificates: Certificates) -> Iterator[EmbeddedBroker]:
    config = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512,OAUTHBEARER",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": (
            f'{PLAIN} required user_alice="alice-secret";'
        ),
        "listener.name.sasl_ssl.oauthbearer.sasl.jaas.config": f"{OAUTH} required;",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certificates.broker),
    }
    with EmbeddedBroker(config=config, log_level="DEBUG") as b:
        admin = AdminClient({"bootstrap.servers": b.listeners["PLAINTEXT"]})
        upsertion = UserScramCredentialUpsertion(
            "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"carol-secret"
        )
        for future in admin.alter_user_scram_credentials([upsertion]).values():
            assert future.result(30) is None
        yield b


def properties(path: Path, certificates: Certificates, login: str) -> Path:
    """A client.properties as written for Kafka's tools (a multi-line JAAS entry)."""
    path.write_text(
        "security.protocol=SASL_SSL\n"
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={certificates.ca}\n"
        f"{login}\n"
    )
    return path


SCRAM_LOGIN = (
    "sasl.mechanism=SCRAM-SHA-512\n"
    f"sasl.jaas.config={SCRAM} required \\\n"
    '    username="carol" \\\n'
    '    password="carol-secret";'
)
PLAIN_LOGIN = f'sasl.jaas.config={PLAIN} required username="alice" password="alice-secret";'
OAUTH_LOGIN = f'sasl.jaas.config={OAUTH} required unsecuredLoginStringClaim_sub="olivia";'


@pytest.fixture(scope="module")
def scram_properties(certificates: Certificates, tmp_path_factory) -> Path:
    return properties(tmp_path_factory.mktemp("p") / "scram.properties", certificates, SCRAM_LOGIN)


def odradek(
    broker: EmbeddedBroker, command_config: Path, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """The CLI with the SASL_SSL listener and the file, right after the (sub)command."""
    split = 1 if args[0] in ("produce", "consume") else 2
    options = ["--bootstrap-server", broker.listeners["SASL_SSL"]]
    options += ["--command-config", str(command_config)]
    return subprocess.run(
        [sys.executable, "-m", "odradek", *args[:split], *options, *args[split:]],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


def test_topics_produce_consume_and_groups_over_sasl_ssl_with_scram(
    broker: EmbeddedBroker, scram_properties: Path
) -> None:
    topic = new_topic("cli")
    created = odradek(broker, scram_properties, "topics", "create", "--topic", topic)
    assert created.returncode == 0, created.stderr
    listed = odradek(broker, scram_properties, "topics", "list")
    assert listed.returncode == 0 and topic in listed.stdout.split()
    produced = odradek(broker, scram_properties, "produce", "--topic", topic, stdin="a\nb\n")
    assert produced.returncode == 0, produced.stderr
    consumed = odradek(
        broker,
        scram_properties,
        "consume",
        "--topic",
        topic,
        "--group",
        "cli-group",
        "--from-beginning",
        "--max-messages",
        "2",
    )
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.split() == ["a", "b"]
    groups = odradek(broker, scram_properties, "groups", "list")
    assert groups.returncode == 0 and "cli-group" in groups.stdout
    assert logged(broker, "on listener SASL_SSL authenticated as User:carol")


@pytest.mark.parametrize(
    ("login", "principal"),
    [(PLAIN_LOGIN, "alice"), (SCRAM_LOGIN, "carol"), (OAUTH_LOGIN, "olivia")],
    ids=["plain", "scram", "oauth"],
)
def test_transactions_over_sasl_ssl(
    broker: EmbeddedBroker, certificates: Certificates, tmp_path: Path, login: str, principal: str
) -> None:
    """The tool that speaks the protocol itself takes the same file, and logs in afresh on
    each of its connections (a SCRAM exchange is good for one)."""
    config = properties(tmp_path / "client.properties", certificates, login)
    listed = odradek(broker, config, "transactions", "list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split()[:4] == [
        "TransactionalId",
        "Coordinator",
        "ProducerId",
        "TransactionState",
    ]
    assert logged(broker, f"on listener SASL_SSL authenticated as User:{principal}")


def test_a_refused_login_fails_the_tool_with_the_reason(
    broker: EmbeddedBroker, certificates: Certificates, tmp_path: Path
) -> None:
    wrong = properties(
        tmp_path / "wrong.properties",
        certificates,
        f'sasl.jaas.config={PLAIN} required username="alice" password="nope";',
    )
    listed = odradek(broker, wrong, "topics", "list")
    assert listed.returncode == 1
    assert "authentication failed" in listed.stderr
    assert "Invalid username or password" in listed.stderr
    transactions = odradek(broker, wrong, "transactions", "list")
    assert transactions.returncode == 1
    assert "authentication as alice with PLAIN" in transactions.stderr
    assert "(SASL_AUTHENTICATION_FAILED): Authentication failed" in transactions.stderr


def test_console_over_sasl_ssl(broker: EmbeddedBroker, scram_properties: Path) -> None:
    topic = new_topic("console")
    assert odradek(broker, scram_properties, "topics", "create", "--topic", topic).returncode == 0
    console = ConsoleProcess(
        broker.listeners["SASL_SSL"], "--command-config", str(scram_properties)
    )
    try:
        with urllib.request.urlopen(f"{console.url}/topics?q={topic}", timeout=60) as page:
            assert topic in page.read().decode()
    finally:
        console.stop()
