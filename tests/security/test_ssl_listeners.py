"""SSL listeners served to real clients over real TLS, beside a PLAINTEXT listener.

One broker for the module with three listeners: PLAINTEXT; SSL (key store from a PEM file,
client certificates requested); MTLS, an SSL listener whose own settings
(``listener.name.mtls.``) require a client certificate and give the key store as PEM text
with an encrypted key. The client certificate's subject is mapped by Kafka's documented
rule, and the principal is read from the broker's connection log (DEBUG).
"""

from __future__ import annotations

import socket
import ssl
import struct
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from aiokafka.helpers import create_ssl_context
from integration.wire_client import metadata
from kafkajs.runner import needs_kafkajs, run_kafkajs

from odradek import EmbeddedBroker
from odradek.testing.certificates import KEY_PASSWORD, Certificates
from security.clients import (
    aiokafka_round_trip,
    confluent_round_trip,
    kafka_python_round_trip,
    logged,
    new_topic,
)

RULES = "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,DEFAULT"


@pytest.fixture(scope="module")
def broker(certificates: Certificates) -> Iterator[EmbeddedBroker]:
    config = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,MTLS://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL",
        "ssl.keystore.type": "PEM",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certificates.ca),
        "ssl.client.auth": "requested",
        "ssl.principal.mapping.rules": RULES,
        "listener.name.ssl.ssl.keystore.location": str(certificates.broker),
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.mtls.ssl.keystore.certificate.chain": certificates.broker_cert.read_text(),
        "listener.name.mtls.ssl.keystore.key": certificates.broker_key_encrypted.read_text(),
        "listener.name.mtls.ssl.key.password": KEY_PASSWORD,
        # KafkaJS reads back through a group: its first join without Kafka's 3 s delay.
        "group.initial.rebalance.delay.ms": "0",
    }
    with EmbeddedBroker(config=config, log_level="DEBUG") as b:
        yield b


def client_context(certificates: Certificates, with_cert: bool = True) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(certificates.ca))
    if with_cert:
        context.load_cert_chain(str(certificates.client_cert), str(certificates.client_key))
    return context


def connect(address: str, context: ssl.SSLContext | None = None) -> socket.socket:
    host, port = address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=15)
    return sock if context is None else context.wrap_socket(sock, server_hostname=host)


def principals(broker: EmbeddedBroker, listener: str) -> list[str]:
    return [
        line.rsplit("principal ", 1)[1].strip()
        for line in list(broker.log_lines)
        if f"on listener {listener}:" in line and "principal" in line
    ]


def confluent_ssl(address: str, certificates: Certificates, with_cert: bool) -> dict[str, str]:
    config = {
        "bootstrap.servers": address,
        "security.protocol": "SSL",
        "ssl.ca.location": str(certificates.ca),
    }
    if with_cert:
        config["ssl.certificate.location"] = str(certificates.client_cert)
        config["ssl.key.location"] = str(certificates.client_key)
    return config


def test_each_listener_advertises_its_own_endpoint(
    broker: EmbeddedBroker, certificates: Certificates
) -> None:
    assert set(broker.listeners) == {"PLAINTEXT", "SSL", "MTLS"}
    topic = new_topic("advertised")
    for name, context in [
        ("PLAINTEXT", None),
        ("SSL", client_context(certificates, with_cert=False)),
        ("MTLS", client_context(certificates)),
    ]:
        response = metadata(broker.listeners[name], topic, context)
        (node,) = response.brokers
        assert f"{node.host}:{node.port}" == broker.listeners[name]


@pytest.mark.parametrize("with_cert", [False, True], ids=["anonymous", "client-cert"])
def test_confluent_kafka_over_ssl(
    broker: EmbeddedBroker, certificates: Certificates, with_cert: bool
) -> None:
    config = confluent_ssl(broker.listeners["SSL"], certificates, with_cert)
    topic = new_topic("confluent")
    values = [f"record {i}".encode() for i in range(100)]
    assert confluent_round_trip(config, topic, values) == values
    expected = "User:duke@sme" if with_cert else "User:ANONYMOUS"
    assert expected in principals(broker, "SSL")


def test_large_fetches_through_tls_arrive_whole(
    broker: EmbeddedBroker, certificates: Certificates
) -> None:
    """Fetch responses of several MB: file regions read in chunks while the transport drains."""
    config = confluent_ssl(broker.listeners["SSL"], certificates, with_cert=True)
    topic = new_topic("large")
    values = [bytes([i]) * 65536 for i in range(80)]
    assert confluent_round_trip(config, topic, values) == values


#: (listener, whether the client sends its certificate, the principal the broker gives it).
CLIENT_CASES = [("SSL", False, "User:ANONYMOUS"), ("MTLS", True, "User:duke@sme")]
CASE_IDS = ["anonymous", "client-cert"]


def kafka_python_over_ssl(
    address: str, certificates: Certificates, with_cert: bool
) -> tuple[list[bytes], list[bytes]]:
    options = {
        "bootstrap_servers": address,
        "security_protocol": "SSL",
        "ssl_cafile": str(certificates.ca),
    }
    if with_cert:
        options["ssl_certfile"] = str(certificates.client_cert)
        options["ssl_keyfile"] = str(certificates.client_key)
    values = [f"kp {i}".encode() for i in range(20)]
    return values, kafka_python_round_trip(options, new_topic("kafka-python"), values)


def aiokafka_over_ssl(
    address: str, certificates: Certificates, with_cert: bool
) -> tuple[list[bytes], list[bytes]]:
    client_files = (
        {"certfile": str(certificates.client_cert), "keyfile": str(certificates.client_key)}
        if with_cert
        else {}
    )
    options = {
        "bootstrap_servers": address,
        "security_protocol": "SSL",
        "ssl_context": create_ssl_context(cafile=str(certificates.ca), **client_files),
    }
    values = [f"aio {i}".encode() for i in range(20)]
    return values, aiokafka_round_trip(options, new_topic("aiokafka"), values)


def kafkajs_over_ssl(
    address: str, certificates: Certificates, with_cert: bool
) -> tuple[list[str], list[str]]:
    seen = run_kafkajs(
        "secured",
        address,
        new_topic("kjs"),
        new_topic("g"),
        ca=certificates.ca,
        client_cert=(certificates.client_cert, certificates.client_key) if with_cert else None,
    )
    return [f"secured-{i}" for i in range(20)], seen["values"]


@pytest.mark.parametrize(
    "round_trip",
    [
        pytest.param(kafka_python_over_ssl, id="kafka-python"),
        pytest.param(aiokafka_over_ssl, id="aiokafka"),
        pytest.param(kafkajs_over_ssl, id="kafkajs", marks=needs_kafkajs),
    ],
)
@pytest.mark.parametrize(("listener", "with_cert", "principal"), CLIENT_CASES, ids=CASE_IDS)
def test_clients_over_ssl(
    broker: EmbeddedBroker,
    certificates: Certificates,
    round_trip: Callable[[str, Certificates, bool], tuple[list, list]],
    listener: str,
    with_cert: bool,
    principal: str,
) -> None:
    written, read = round_trip(broker.listeners[listener], certificates, with_cert)
    assert read == written
    assert principal in principals(broker, listener)


def api_versions_frame() -> bytes:
    body = struct.pack(">hhih", 18, 0, 1, 4) + b"test"
    return struct.pack(">i", len(body)) + body


def refused(sock: socket.socket) -> bool:
    """Whether the broker ends this connection instead of answering an ApiVersions request."""
    try:
        sock.sendall(api_versions_frame())
        return sock.recv(4096) == b""
    except (ssl.SSLError, ConnectionError):
        return True
    finally:
        sock.close()


def handshake_refused(address: str, context: ssl.SSLContext) -> bool:
    try:
        sock = connect(address, context)
    except (ssl.SSLError, ConnectionError):
        return True  # refused within the handshake (TLS 1.2)
    return refused(sock)  # TLS 1.3: the client's handshake ends before the server's check


def test_required_client_auth_refuses_a_client_without_a_certificate(
    broker: EmbeddedBroker, certificates: Certificates
) -> None:
    context = client_context(certificates, with_cert=False)
    assert handshake_refused(broker.listeners["MTLS"], context)
    assert logged(broker, "Failed authentication with 127.0.0.1")
    # Requested rather than required: the same client is served on SSL, anonymously.
    response = metadata(broker.listeners["SSL"], new_topic("requested"), context)
    assert len(response.brokers) == 1


def test_a_certificate_from_an_untrusted_ca_is_refused_on_both(
    broker: EmbeddedBroker, certificates: Certificates
) -> None:
    context = client_context(certificates, with_cert=False)
    context.load_cert_chain(str(certificates.stranger_cert), str(certificates.stranger_key))
    assert handshake_refused(broker.listeners["MTLS"], context)
    assert handshake_refused(broker.listeners["SSL"], context)


def test_wrong_protocol_on_each_port_closes_only_that_connection(
    broker: EmbeddedBroker, certificates: Certificates
) -> None:
    # Plaintext Kafka bytes on the TLS port: the handshake fails, the connection closes.
    assert refused(connect(broker.listeners["SSL"]))
    # A TLS handshake on the plaintext port: its ClientHello is no Kafka frame.
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        connect(broker.listeners["PLAINTEXT"], client_context(certificates)).recv(1)
    # Everyone else is still served, on both listeners.
    topic = new_topic("still")
    assert metadata(broker.listeners["PLAINTEXT"], topic).brokers
    context = client_context(certificates)
    assert metadata(broker.listeners["SSL"], topic, context).brokers


def serve(tmp_path: Path, *overrides: str) -> subprocess.CompletedProcess:
    args = [sys.executable, "-m", "odradek", "serve", "--data-dir", str(tmp_path)]
    for override in overrides:
        args += ["-o", override]
    return subprocess.run(args, capture_output=True, text=True, timeout=60)


SSL_LISTENER = ("listeners=SSL://127.0.0.1:0", "security.inter.broker.protocol=SSL")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (("ssl.keystore.location=/etc/broker.jks",), "only PEM key stores are"),
        (
            ("ssl.keystore.type=PKCS12", "ssl.keystore.location=/etc/broker.p12"),
            "ssl.keystore.type PKCS12 is not supported",
        ),
        ((), "an SSL listener needs a key store"),
        (
            ("ssl.keystore.type=PEM", "ssl.keystore.location=/nonexistent/broker.pem"),
            "Failed to load PEM SSL keystore /nonexistent/broker.pem",
        ),
        (
            ("ssl.keystore.type=PEM", "ssl.keystore.location={broker}", "ssl.keystore.password=x"),
            "SSL key store password cannot be specified with PEM format",
        ),
        (
            ("ssl.keystore.type=PEM", "ssl.keystore.location={encrypted}"),
            "is encrypted: set ssl.key.password",
        ),
        (
            (
                "ssl.keystore.type=PEM",
                "ssl.keystore.location={encrypted}",
                "ssl.key.password=wrong",
            ),
            "a wrong ssl.key.password?",
        ),
        (
            (
                "ssl.keystore.type=PEM",
                "ssl.keystore.location={broker}",
                "ssl.principal.mapping.rules=RULE:x/y/Z",
            ),
            "ssl.principal.mapping.rules",
        ),
    ],
)
def test_bad_ssl_configs_stop_start_up(
    tmp_path: Path, certificates: Certificates, overrides: tuple[str, ...], message: str
) -> None:
    paths = {"broker": certificates.broker, "encrypted": certificates.broker_encrypted}
    result = serve(tmp_path, *SSL_LISTENER, *(o.format(**paths) for o in overrides))
    assert result.returncode == 2, result.stderr
    assert "listener SSL (SSL)" in result.stderr and message in result.stderr
    assert "odradek ready" not in result.stdout
