"""A listener's SSLContext from Kafka's ssl.* configs, without a broker: the version range,
cipher suites by Java or OpenSSL name, inline PEM stores, and Kafka's refusals."""

from __future__ import annotations

import ssl
from dataclasses import replace

import pytest

from odradek.network.ssl_engine_factory import (
    SslConfig,
    SslConfigError,
    create_client_context,
    create_server_context,
)
from odradek.server.config import BrokerConfig, ConfigError
from odradek.testing.certificates import KEY_PASSWORD, Certificates


@pytest.fixture
def pem(certificates: Certificates) -> SslConfig:
    return SslConfig(keystore_type="PEM", keystore_location=str(certificates.broker))


def test_kafka_4_defaults_serve_tls_1_2_and_1_3(pem: SslConfig) -> None:
    context = create_server_context(pem)
    assert (context.minimum_version, context.maximum_version) == (
        ssl.TLSVersion.TLSv1_2,
        ssl.TLSVersion.TLSv1_3,
    )
    assert context.verify_mode == ssl.CERT_NONE


@pytest.mark.parametrize(
    ("auth", "mode"),
    [("none", ssl.CERT_NONE), ("requested", ssl.CERT_OPTIONAL), ("required", ssl.CERT_REQUIRED)],
)
def test_client_auth(pem: SslConfig, auth: str, mode: ssl.VerifyMode) -> None:
    assert create_server_context(replace(pem, client_auth=auth)).verify_mode == mode


@pytest.mark.parametrize(
    ("protocols", "message"),
    [
        (("TLSv1.1", "TLSv1.3"), "leaves out a version"),
        (("TLSv1.4",), "Unsupported ssl.enabled.protocols TLSv1.4"),
        ((), "Unsupported ssl.enabled.protocols"),
    ],
)
def test_enabled_protocols_that_cannot_be_served(
    pem: SslConfig, protocols: tuple[str, ...], message: str
) -> None:
    with pytest.raises(SslConfigError, match=message):
        create_server_context(replace(pem, enabled_protocols=protocols))


def test_java_cipher_suite_names_select_openssl_suites_and_leave_out_tls_1_3(
    pem: SslConfig,
) -> None:
    suites = ("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "ECDHE-ECDSA-AES256-GCM-SHA384")
    context = create_server_context(replace(pem, cipher_suites=suites))
    names = {c["name"] for c in context.get_ciphers() if c["protocol"] == "TLSv1.2"}
    assert names == {"ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-ECDSA-AES256-GCM-SHA384"}
    assert context.maximum_version == ssl.TLSVersion.TLSv1_2


def test_only_tls_1_3_suites_leave_out_tls_1_2(pem: SslConfig) -> None:
    context = create_server_context(replace(pem, cipher_suites=("TLS_AES_128_GCM_SHA256",)))
    assert context.minimum_version == ssl.TLSVersion.TLSv1_3


def test_unknown_cipher_suites_are_refused(pem: SslConfig) -> None:
    with pytest.raises(SslConfigError, match="no TLS 1.2 cipher suite OpenSSL knows"):
        create_server_context(replace(pem, cipher_suites=("TLS_NO_SUCH_SUITE",)))


def test_inline_pem_stores_with_an_encrypted_key(certificates: Certificates) -> None:
    config = SslConfig(
        keystore_type="PEM",
        keystore_certificate_chain=certificates.broker_cert.read_text(),
        keystore_key=certificates.broker_key_encrypted.read_text(),
        key_password=KEY_PASSWORD,
        truststore_type="PEM",
        truststore_certificates=certificates.ca.read_text(),
        client_auth="required",
    )
    context = create_server_context(config)
    assert [c["subject"] for c in context.get_ca_certs()] == [
        ((("commonName", "Odradek Test CA"),),)
    ]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"keystore_key": "KEY"}, "SSL private key is specified, but certificate chain is not"),
        (
            {"keystore_certificate_chain": "CHAIN"},
            "certificate chain is specified, but private key",
        ),
        (
            {"keystore_key": "KEY", "keystore_certificate_chain": "CHAIN"},
            "Both SSL key store location and separate private key are specified.",
        ),
        ({"truststore_location": "/ca.jks"}, "ssl.truststore.type JKS is not supported"),
        ({"truststore_password": "x"}, "trust store is not specified, but trust store password"),
        (
            {"truststore_type": "PEM", "truststore_certificates": "not PEM"},
            "Invalid PEM truststore configs",
        ),
        ({"protocol": "QUIC"}, "Unsupported ssl.protocol QUIC"),
    ],
)
def test_kafkas_refusals(pem: SslConfig, changes: dict[str, str], message: str) -> None:
    with pytest.raises(SslConfigError, match=message):
        create_server_context(replace(pem, **changes))


def test_a_client_context_verifies_the_server_and_presents_a_key_store_when_given(
    certificates: Certificates,
) -> None:
    trust = SslConfig(truststore_type="PEM", truststore_location=str(certificates.ca))
    context = create_client_context(trust)  # no key store: a client may have none
    assert context.check_hostname and context.verify_mode == ssl.CERT_REQUIRED
    assert context.get_ca_certs()[0]["subject"] == ((("commonName", "Odradek Test CA"),),)
    unchecked = create_client_context(replace(trust, endpoint_identification_algorithm=""))
    assert not unchecked.check_hostname and unchecked.verify_mode == ssl.CERT_REQUIRED
    with pytest.raises(SslConfigError, match="SSL certificate chain is specified, but private"):
        create_client_context(replace(trust, keystore_certificate_chain="x"))


def test_the_inter_broker_tls_client_uses_the_listeners_ssl_configs(
    certificates: Certificates,
) -> None:
    props = {
        "listeners": "PLAINTEXT://:9092,BROKER://:9093",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,BROKER:SSL",
        "inter.broker.listener.name": "BROKER",
        "listener.name.broker.ssl.keystore.type": "PEM",
        "listener.name.broker.ssl.keystore.location": str(certificates.broker),
        "listener.name.broker.ssl.truststore.type": "PEM",
        "listener.name.broker.ssl.truststore.location": str(certificates.ca),
    }
    context = BrokerConfig(props).inter_broker_client_security().ssl_context
    assert context is not None
    assert context.check_hostname and context.verify_mode == ssl.CERT_REQUIRED
    unchecked = BrokerConfig(
        {**props, "listener.name.broker.ssl.endpoint.identification.algorithm": ""}
    )
    context = unchecked.inter_broker_client_security().ssl_context
    assert context is not None and not context.check_hostname
    with pytest.raises(ConfigError, match="client side: Invalid value HTTPS2 for configuration"):
        BrokerConfig(
            {**props, "ssl.endpoint.identification.algorithm": "HTTPS2"}
        ).inter_broker_client_security()
