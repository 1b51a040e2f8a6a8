"""Dynamic key store update: a listener's certificate is replaced through AlterConfigs.

A broker of its own (the test changes its SSL listener's certificate). The new key store
is signed by the same CA with another subject, so the certificate a new TLS connection is
shown tells which key store served it.
"""

from __future__ import annotations

import shutil
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from odradek import EmbeddedBroker
from odradek.testing.certificates import Certificates

KEYSTORE = "listener.name.ssl.ssl.keystore.location"


@pytest.fixture(scope="module")
def keystore(certificates: Certificates, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The path the broker's key store is read from (a copy the test may overwrite)."""
    path = tmp_path_factory.mktemp("keystore") / "keystore.pem"
    shutil.copy(certificates.broker, path)
    return path


@pytest.fixture(scope="module")
def broker(certificates: Certificates, keystore: Path) -> Iterator[EmbeddedBroker]:
    config = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        KEYSTORE: str(keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certificates.ca),
    }
    with EmbeddedBroker(config=config) as b:
        yield b


def served_subject(broker: EmbeddedBroker, certificates: Certificates) -> str:
    """The CN of the certificate a new TLS connection to the SSL listener is shown."""
    host, port = broker.listeners["SSL"].rsplit(":", 1)
    context = ssl.create_default_context(cafile=str(certificates.ca))
    with socket.create_connection((host, int(port)), timeout=15) as raw:
        with context.wrap_socket(raw, server_hostname=host) as tls:
            subject = dict(rdn[0] for rdn in tls.getpeercert()["subject"])
    return subject["commonName"]


def alter(broker: EmbeddedBroker, name: str, value: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.listeners["PLAINTEXT"]})
    resource = ConfigResource(
        ResourceType.BROKER,
        "1",
        incremental_configs=[ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)],
    )
    admin.incremental_alter_configs([resource])[resource].result(30)


def test_a_key_store_that_does_not_load_is_refused(
    broker: EmbeddedBroker, certificates: Certificates
) -> None:
    with pytest.raises(KafkaException, match="Failed to load PEM SSL keystore /nonexistent"):
        alter(broker, KEYSTORE, "/nonexistent/keystore.pem")
    assert served_subject(broker, certificates) == "localhost"


def test_a_new_key_store_serves_new_connections_and_survives_a_restart(
    broker: EmbeddedBroker, certificates: Certificates
) -> None:
    assert served_subject(broker, certificates) == "localhost"
    alter(broker, KEYSTORE, str(certificates.rotated))
    assert served_subject(broker, certificates) == "rotated"
    broker.restart()
    assert served_subject(broker, certificates) == "rotated"


def test_a_key_store_renewed_in_place_is_reloaded_when_altered_to_the_same_path(
    broker: EmbeddedBroker, certificates: Certificates, keystore: Path
) -> None:
    alter(broker, KEYSTORE, str(keystore))
    assert served_subject(broker, certificates) == "localhost"
    shutil.copy(certificates.rotated, keystore)
    assert served_subject(broker, certificates) == "localhost"  # not reloaded by itself
    alter(broker, KEYSTORE, str(keystore))
    assert served_subject(broker, certificates) == "rotated"
