"""SASL listeners served to real clients: PLAIN and SCRAM-SHA-256/512, SASL_PLAINTEXT and SASL_SSL.

One broker for the module with four listeners: PLAINTEXT (for the admin calls that create
SCRAM users, as an operator's tools would), SASL_PLAINTEXT with PLAIN (alice, from the JAAS
config) and both SCRAM mechanisms, SASL_SSL with SCRAM-SHA-512 only, and REAUTH, a
SASL_PLAINTEXT listener whose PLAIN sessions last a second (KIP-368 re-authentication). The SCRAM users are
created through AlterUserScramCredentials by confluent-kafka's admin client; the principal
each client gets is read from the broker's DEBUG log.
"""

from __future__ import annotations

import asyncio
import ssl
import struct
import time
from collections.abc import Iterator
from dataclasses import replace

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError as AioKafkaError
from aiokafka.helpers import create_ssl_context
from confluent_kafka import KafkaError
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    UserScramCredentialUpsertion,
)
from confluent_kafka.admin import ScramMechanism as ConfluentScramMechanism
from integration.wire_client import WireClient
from kafka import KafkaAdminClient
from kafka.admin import ScramMechanism as KafkaPythonScramMechanism
from kafka.admin import UserScramCredentialDeletion
from kafka.admin import UserScramCredentialUpsertion as KpUpsertion
from kafkajs.runner import kafkajs_error, needs_kafkajs, run_kafkajs
from kio.schema.alter_user_scram_credentials.v0 import request as alter_v0
from kio.schema.describe_user_scram_credentials.v0 import request as describe_v0
from kio.schema.metadata.v12 import request as metadata_v12
from kio.schema.sasl_authenticate.v2 import request as authenticate_v2
from kio.schema.sasl_handshake.v1 import request as handshake_v1

from odradek import EmbeddedBroker
from odradek.network.client import (
    AsyncBrokerConnection,
    BrokerConnectionError,
    SaslAuthenticationFailed,
)
from odradek.network.client_security import ClientSecurity, SaslClientLogin
from odradek.network.ssl_engine_factory import SslConfig, create_client_context
from odradek.protocol.errors import ErrorCode
from odradek.testing.certificates import Certificates
from security.clients import (
    aiokafka_round_trip,
    closed,
    confluent_consume,
    confluent_login_error,
    confluent_round_trip,
    kafka_python_round_trip,
    logged,
    new_topic,
    produce_until_logged,
)

PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'user_alice="alice-secret" user_admin="admin \\"quoted\\" secret";'
)
#: (mechanism, user, password) of each login the clients are tried with.
LOGINS = [
    ("PLAIN", "alice", "alice-secret"),
    ("SCRAM-SHA-256", "bob", "bob-secret"),
    ("SCRAM-SHA-512", "carol", "carol-secret"),
]
LOGIN_IDS = [mechanism for mechanism, _, _ in LOGINS]
REAUTH_MS = 1000


@pytest.fixture(scope="module")
def broker(certificates: Certificates) -> Iterator[EmbeddedBroker]:
    config = {
        "listeners": (
            "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,"
            "REAUTH://127.0.0.1:0"
        ),
        "listener.security.protocol.map": (
            "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,"
            "REAUTH:SASL_PLAINTEXT"
        ),
        # KIP-368: sessions of a second on REAUTH, for PLAIN (the mechanism-prefixed form).
        "listener.name.reauth.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.reauth.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.reauth.plain.connections.max.reauth.ms": str(REAUTH_MS),
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certificates.broker),
        # KafkaJS reads back through a group: its first join without Kafka's 3 s delay.
        "group.initial.rebalance.delay.ms": "0",
    }
    with EmbeddedBroker(config=config, log_level="DEBUG") as b:
        admin = AdminClient({"bootstrap.servers": b.listeners["PLAINTEXT"]})
        upsertions = [
            UserScramCredentialUpsertion(
                "bob",
                ScramCredentialInfo(ConfluentScramMechanism.SCRAM_SHA_256, 8192),
                b"bob-secret",
            ),
            UserScramCredentialUpsertion(
                "carol",
                ScramCredentialInfo(ConfluentScramMechanism.SCRAM_SHA_512, 4096),
                b"carol-secret",
            ),
        ]
        for future in admin.alter_user_scram_credentials(upsertions).values():
            assert future.result(30) is None
        yield b


def authenticated_as(broker: EmbeddedBroker, principal: str) -> bool:
    return logged(broker, f"authenticated as {principal}")


def confluent_config(
    address: str, mechanism: str, user: str, password: str, protocol: str = "SASL_PLAINTEXT"
) -> dict:
    return {
        "bootstrap.servers": address,
        "security.protocol": protocol,
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


@pytest.mark.parametrize(("mechanism", "user", "password"), LOGINS, ids=LOGIN_IDS)
def test_confluent_kafka(broker: EmbeddedBroker, mechanism: str, user: str, password: str) -> None:
    config = confluent_config(broker.listeners["SASL_PLAINTEXT"], mechanism, user, password)
    values = [f"{mechanism} {i}".encode() for i in range(50)]
    assert confluent_round_trip(config, new_topic("confluent"), values) == values
    assert authenticated_as(broker, f"User:{user}")


def test_confluent_kafka_over_sasl_ssl(broker: EmbeddedBroker, certificates: Certificates) -> None:
    config = confluent_config(
        broker.listeners["SASL_SSL"], "SCRAM-SHA-512", "carol", "carol-secret", "SASL_SSL"
    )
    config["ssl.ca.location"] = str(certificates.ca)
    values = [bytes([i]) * 1000 for i in range(30)]
    assert confluent_round_trip(config, new_topic("sasl-ssl"), values) == values


@pytest.mark.parametrize(("mechanism", "user", "password"), LOGINS, ids=LOGIN_IDS)
def test_kafka_python(broker: EmbeddedBroker, mechanism: str, user: str, password: str) -> None:
    options = {
        "bootstrap_servers": broker.listeners["SASL_PLAINTEXT"],
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": user,
        "sasl_plain_password": password,
    }
    values = [f"kp {i}".encode() for i in range(20)]
    assert kafka_python_round_trip(options, new_topic("kafka-python"), values) == values


def aiokafka_options(broker: EmbeddedBroker, mechanism: str, user: str, password: str) -> dict:
    return {
        "bootstrap_servers": broker.listeners["SASL_PLAINTEXT"],
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": user,
        "sasl_plain_password": password,
    }


@pytest.mark.parametrize(("mechanism", "user", "password"), LOGINS, ids=LOGIN_IDS)
def test_aiokafka(broker: EmbeddedBroker, mechanism: str, user: str, password: str) -> None:
    options = aiokafka_options(broker, mechanism, user, password)
    values = [f"aio {i}".encode() for i in range(20)]
    assert aiokafka_round_trip(options, new_topic("aiokafka"), values) == values


def test_aiokafka_over_sasl_ssl(broker: EmbeddedBroker, certificates: Certificates) -> None:
    options = {
        "bootstrap_servers": broker.listeners["SASL_SSL"],
        "security_protocol": "SASL_SSL",
        "ssl_context": create_ssl_context(cafile=str(certificates.ca)),
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "carol",
        "sasl_plain_password": "carol-secret",
    }

    async def produce() -> int:
        producer = AIOKafkaProducer(**options)
        await producer.start()
        try:
            return (await producer.send_and_wait(new_topic("aio-ssl"), b"over tls")).offset
        finally:
            await producer.stop()

    assert asyncio.run(asyncio.wait_for(produce(), 60)) == 0


@needs_kafkajs
@pytest.mark.parametrize(("mechanism", "user", "password"), LOGINS, ids=LOGIN_IDS)
def test_kafkajs(broker: EmbeddedBroker, mechanism: str, user: str, password: str) -> None:
    login = (mechanism.lower(), user, password)
    seen = run_kafkajs(
        "secured", broker.listeners["SASL_PLAINTEXT"], new_topic("kjs"), new_topic("g"), sasl=login
    )
    assert seen["values"] == [f"secured-{i}" for i in range(20)]
    assert authenticated_as(broker, f"User:{user}")


@needs_kafkajs
def test_kafkajs_over_sasl_ssl(broker: EmbeddedBroker, certificates: Certificates) -> None:
    seen = run_kafkajs(
        "secured",
        broker.listeners["SASL_SSL"],
        new_topic("kjs-ssl"),
        new_topic("g"),
        ca=certificates.ca,
        sasl=("scram-sha-512", "carol", "carol-secret"),
    )
    assert seen["values"] == [f"secured-{i}" for i in range(20)]


@needs_kafkajs
def test_kafkajs_wrong_password(broker: EmbeddedBroker) -> None:
    error = kafkajs_error(
        "secured",
        broker.listeners["SASL_PLAINTEXT"],
        new_topic("kjs"),
        new_topic("g"),
        sasl=("scram-sha-256", "bob", "wrong"),
    )
    assert error.startswith("KafkaJSSASLAuthenticationError"), error
    assert "invalid credentials with SASL mechanism SCRAM-SHA-256" in error


@pytest.mark.parametrize(
    ("mechanism", "user", "password", "message"),
    [
        ("PLAIN", "alice", "wrong", "Authentication failed: Invalid username or password"),
        ("PLAIN", "mallory", "x", "Authentication failed: Invalid username or password"),
        (
            "SCRAM-SHA-256",
            "bob",
            "wrong",
            "invalid credentials with SASL mechanism SCRAM-SHA-256",
        ),
        (
            "SCRAM-SHA-512",
            "bob",  # bob has a SCRAM-SHA-256 credential only
            "bob-secret",
            "invalid credentials with SASL mechanism SCRAM-SHA-512",
        ),
    ],
    ids=["plain-password", "plain-user", "scram-password", "scram-mechanism"],
)
def test_a_failed_login_is_an_authentication_error_and_others_are_still_served(
    broker: EmbeddedBroker, mechanism: str, user: str, password: str, message: str
) -> None:
    config = confluent_config(broker.listeners["SASL_PLAINTEXT"], mechanism, user, password)
    error = confluent_login_error(config)
    assert error.code() == KafkaError._AUTHENTICATION
    assert message in error.str()
    assert logged(broker, "Failed authentication with 127.0.0.1")
    good = confluent_config(broker.listeners["SASL_PLAINTEXT"], "PLAIN", "alice", "alice-secret")
    assert confluent_round_trip(good, new_topic("after-failure"), [b"ok"]) == [b"ok"]


def test_aiokafka_wrong_password(broker: EmbeddedBroker) -> None:
    options = aiokafka_options(broker, "SCRAM-SHA-512", "carol", "wrong")

    async def start() -> None:
        producer = AIOKafkaProducer(**options, request_timeout_ms=10000)
        try:
            await producer.start()
        finally:
            await producer.stop()

    with pytest.raises(AioKafkaError):
        asyncio.run(asyncio.wait_for(start(), 60))


def test_a_request_before_authentication_closes_the_connection(broker: EmbeddedBroker) -> None:
    client = WireClient(broker.listeners["SASL_PLAINTEXT"])
    client.send(
        metadata_v12.MetadataRequest(
            topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
        )
    )
    assert closed(client)
    assert logged(broker, "Unexpected Kafka request of type METADATA during SASL handshake")


def test_a_mechanism_the_listener_does_not_enable(
    broker: EmbeddedBroker, certificates: Certificates
) -> None:
    context = ssl.create_default_context(cafile=str(certificates.ca))
    client = WireClient(broker.listeners["SASL_SSL"], ssl_context=context)
    response = client.call(handshake_v1.SaslHandshakeRequest(mechanism="PLAIN"))
    assert response.error_code == ErrorCode.unsupported_sasl_mechanism
    assert response.mechanisms == ("SCRAM-SHA-512",)
    assert closed(client)


def test_sasl_requests_after_authentication_and_on_plaintext_are_illegal(
    broker: EmbeddedBroker,
) -> None:
    client = WireClient(broker.listeners["SASL_PLAINTEXT"])
    try:
        assert client.call(handshake_v1.SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
        login = authenticate_v2.SaslAuthenticateRequest(
            auth_bytes=b'\0admin\0admin "quoted" secret'
        )
        assert client.call(login).error_code == ErrorCode.none
        again = client.call(authenticate_v2.SaslAuthenticateRequest(auth_bytes=b"x"))
        assert again.error_code == ErrorCode.illegal_sasl_state
    finally:
        client.close()
    plain = WireClient(broker.listeners["PLAINTEXT"])
    try:
        response = plain.call(handshake_v1.SaslHandshakeRequest(mechanism="PLAIN"))
        assert response.error_code == ErrorCode.illegal_sasl_state
    finally:
        plain.close()


def test_kafka_python_admin_creates_a_scram_user_who_logs_in(broker: EmbeddedBroker) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.listeners["PLAINTEXT"])
    try:
        result = admin.alter_user_scram_credentials(
            [KpUpsertion("dave", KafkaPythonScramMechanism.SCRAM_SHA_256, "dave-secret", 5000)]
        )
        assert result == {"dave": None}
        described = admin.describe_user_scram_credentials(["dave"])
        assert described["dave"]["credential_infos"] == [
            {"mechanism": KafkaPythonScramMechanism.SCRAM_SHA_256, "iterations": 5000}
        ]
        config = confluent_config(
            broker.listeners["SASL_PLAINTEXT"], "SCRAM-SHA-256", "dave", "dave-secret"
        )
        assert confluent_round_trip(config, new_topic("dave"), [b"hi"]) == [b"hi"]
        assert authenticated_as(broker, "User:dave")
        deleted = admin.alter_user_scram_credentials(
            [UserScramCredentialDeletion("dave", KafkaPythonScramMechanism.SCRAM_SHA_256)]
        )
        assert deleted == {"dave": None}
        assert confluent_login_error(config).code() == KafkaError._AUTHENTICATION
    finally:
        admin.close()


def upsertion(name: str, mechanism: int = 1, iterations: int = 4096) -> object:
    return alter_v0.ScramCredentialUpsertion(
        name=name,
        mechanism=mechanism,
        iterations=iterations,
        salt=b"salt",
        salted_password=b"x" * 32,
    )


def test_alter_user_scram_credentials_refusals(broker: EmbeddedBroker) -> None:
    client = WireClient(broker.listeners["PLAINTEXT"])
    try:
        response = client.call(
            alter_v0.AlterUserScramCredentialsRequest(
                deletions=(
                    alter_v0.ScramCredentialDeletion(name="nobody", mechanism=1),
                    alter_v0.ScramCredentialDeletion(name="twice", mechanism=1),
                ),
                upsertions=(
                    upsertion(""),
                    upsertion("few", iterations=4095),
                    upsertion("many", iterations=16385),
                    upsertion("unknown", mechanism=3),
                    upsertion("twice", mechanism=2),
                    upsertion("fine"),
                ),
            )
        )
        results = {r.user: (r.error_code, r.error_message) for r in response.results}
        assert results == {
            "nobody": (
                ErrorCode.resource_not_found,
                "Attempt to delete a user credential that does not exist",
            ),
            "twice": (
                ErrorCode.resource_not_found,
                "Attempt to delete a user credential that does not exist",
            ),
            "": (ErrorCode.unacceptable_credential, "Username must not be empty"),
            "few": (ErrorCode.unacceptable_credential, "Too few iterations"),
            "many": (ErrorCode.unacceptable_credential, "Too many iterations"),
            "unknown": (ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"),
            "fine": (ErrorCode.none, None),
        }
        duplicate = client.call(
            alter_v0.AlterUserScramCredentialsRequest(
                deletions=(), upsertions=(upsertion("dup"), upsertion("dup", mechanism=2))
            )
        )
        assert [(r.user, r.error_code) for r in duplicate.results] == [
            ("dup", ErrorCode.duplicate_resource)
        ]
        described = client.call(
            describe_v0.DescribeUserScramCredentialsRequest(
                users=tuple(describe_v0.UserName(name=n) for n in ("fine", "dup", "bob", "bob"))
            )
        )
        by_user = {r.user: r for r in described.results}
        assert by_user["fine"].error_code == ErrorCode.none
        assert [(c.mechanism, c.iterations) for c in by_user["fine"].credential_infos] == [
            (1, 4096)
        ]
        assert by_user["dup"].error_code == ErrorCode.resource_not_found
        assert by_user["bob"].error_code == ErrorCode.duplicate_resource
        everyone = client.call(describe_v0.DescribeUserScramCredentialsRequest(users=None))
        assert {"bob", "carol", "fine"} <= {r.user for r in everyone.results}
    finally:
        client.close()


def test_a_bare_api_versions_frame_is_answered_before_the_handshake(broker: EmbeddedBroker) -> None:
    client = WireClient(broker.listeners["SASL_PLAINTEXT"])
    try:
        body = struct.pack(">hhih", 18, 0, 1, 4) + b"test"
        client.sock.sendall(struct.pack(">i", len(body)) + body)
        (size,) = struct.unpack(">i", client._read(4))
        data = client._read(size)
        assert struct.unpack(">ih", data[:6]) == (1, 0)  # correlation id 1, no error
    finally:
        client.close()


def plain_login(client: WireClient, user: str = "alice", password: str = "alice-secret"):
    assert client.call(handshake_v1.SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
    token = f"\0{user}\0{password}".encode()
    return client.call(authenticate_v2.SaslAuthenticateRequest(auth_bytes=token))


def test_librdkafka_reauthenticates_on_its_connection(broker: EmbeddedBroker) -> None:
    """Producing across several session lifetimes: the connection is renewed, never refused,
    and every record arrives."""
    config = confluent_config(broker.listeners["REAUTH"], "PLAIN", "alice", "alice-secret")
    topic = new_topic("reauth")
    renewed = "on listener REAUTH re-authenticated as User:alice"
    values = produce_until_logged(config, broker, renewed, topic)
    assert confluent_consume(config, topic, len(values)) == values


def test_a_session_that_expires_without_reauthentication_is_closed(
    broker: EmbeddedBroker,
) -> None:
    client = WireClient(broker.listeners["REAUTH"])
    response = plain_login(client)
    assert response.error_code == ErrorCode.none
    assert response.session_lifetime.total_seconds() * 1000 == REAUTH_MS
    time.sleep(REAUTH_MS / 1000 + 0.2)  # past the session's end (a state, not a timing check)
    client.send(
        metadata_v12.MetadataRequest(
            topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
        )
    )
    assert closed(client)
    assert logged(broker, "expired without re-authentication")


def test_reauthentication_keeps_the_principal(broker: EmbeddedBroker) -> None:
    client = WireClient(broker.listeners["REAUTH"])
    assert plain_login(client).error_code == ErrorCode.none
    renewed = plain_login(client, "admin", 'admin "quoted" secret')
    assert renewed.error_code == ErrorCode.sasl_authentication_failed
    assert "Cannot change principals during re-authentication" in renewed.error_message
    assert closed(client)


# -- The broker's own client (inter-broker connections) against these listeners ----------


METADATA = metadata_v12.MetadataRequest(
    topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
)


def broker_client(address: str, login: SaslClientLogin) -> None:
    """Connect as a broker does to a SASL_PLAINTEXT listener (and close again)."""
    host, port = address.rsplit(":", 1)
    security = ClientSecurity("SASL_PLAINTEXT", None, login)
    connection = asyncio.run(AsyncBrokerConnection.connect(host, int(port), "b", 10, security))
    connection.close()


def test_the_broker_client_logs_in_with_scram_over_tls_and_checks_the_certificate(
    broker: EmbeddedBroker, certificates: Certificates
) -> None:
    address = broker.listeners["SASL_SSL"]
    login = SaslClientLogin("SCRAM-SHA-512", "carol", "carol-secret")
    trusted = SslConfig(truststore_type="PEM", truststore_location=str(certificates.ca))

    async def metadata_over(context: ssl.SSLContext) -> object:
        host, port = address.rsplit(":", 1)
        security = ClientSecurity("SASL_SSL", context, login)
        connection = await AsyncBrokerConnection.connect(host, int(port), "b", 10, security)
        try:
            return await connection.request(METADATA, 10)
        finally:
            connection.close()

    assert asyncio.run(metadata_over(create_client_context(trusted))).brokers
    assert authenticated_as(broker, "User:carol")
    stranger = replace(trusted, truststore_location=str(certificates.ca.parent / "other-ca.pem"))
    with pytest.raises(BrokerConnectionError, match="CERTIFICATE_VERIFY_FAILED"):
        asyncio.run(metadata_over(create_client_context(stranger)))


def test_the_broker_client_reports_a_refused_login(broker: EmbeddedBroker) -> None:
    login = SaslClientLogin("SCRAM-SHA-256", "bob", "not-bob-secret")
    with pytest.raises(SaslAuthenticationFailed, match="SASL_AUTHENTICATION_FAILED.*invalid cred"):
        broker_client(broker.listeners["SASL_PLAINTEXT"], login)
    refused = SaslClientLogin("SCRAM-SHA-512", "carol", "carol-secret")
    with pytest.raises(
        SaslAuthenticationFailed,
        match="refused SASL mechanism SCRAM-SHA-512 .UNSUPPORTED_SASL_MECHANISM.; it enables "
        "PLAIN, SCRAM-SHA-256",
    ):
        broker_client(broker.listeners["REAUTH"], refused)


def test_the_broker_client_reauthenticates_before_its_session_ends(broker: EmbeddedBroker) -> None:
    """KIP-368 on the broker's side: requests across several session lifetimes go over one
    connection, renewed on it, never closed by the server."""
    login = SaslClientLogin("PLAIN", "admin", 'admin "quoted" secret')

    async def requests_across_sessions() -> int:
        host, port = broker.listeners["REAUTH"].rsplit(":", 1)
        security = ClientSecurity("SASL_PLAINTEXT", None, login)
        connection = await AsyncBrokerConnection.connect(host, int(port), "b", 10, security)
        answered = 0
        try:
            while not logged(broker, "on listener REAUTH re-authenticated as User:admin", 0):
                assert (await connection.request(METADATA, 10)).brokers
                answered += 1
                await asyncio.sleep(0.1)
            assert (await connection.request(METADATA, 10)).brokers
        finally:
            connection.close()
        return answered + 1

    assert asyncio.run(requests_across_sessions()) >= 2
    assert not logged(broker, "SASL session (User:admin) expired", timeout=0)
