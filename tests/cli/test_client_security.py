"""--command-config: Java .properties, the Java client's security settings as librdkafka's,
and the same settings for the kio connections of `odradek transactions`."""

from __future__ import annotations

import argparse
import ssl
from pathlib import Path

import pytest

from odradek.cli.client_security import librdkafka_config, wire_security
from odradek.cli.errors import ToolError
from odradek.cli.main import build_parser
from odradek.java_properties import parse_properties
from odradek.network.client_security import SaslClientLogin
from odradek.network.oauthbearer_unsecured import UnsecuredJwsValidator, UnsecuredLogin
from odradek.network.sasl_client import SaslLogin
from odradek.network.sasl_oauthbearer import OAuthBearerSaslServer
from odradek.network.sasl_plain import PlainSaslServer
from odradek.network.scram import SCRAM_SHA_512
from odradek.network.scram_server import ScramSaslServer
from odradek.testing.certificates import Certificates, make_certificates

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certificates"))


def test_java_properties_continuations_escapes_and_separators() -> None:
    text = (
        "# comment\n"
        "  ! another\n"
        "sasl.jaas.config=org.example.Module required \\\n"
        '    username="alice" \\\n'
        '    password="a\\\\b";\n'
        "key\\ with\\ spaces : value\n"
        "bare\n"
        "spaced value with = sign\n"
        "unicode=\\u00e9t\\u00e9\n"
        "tab=a\\tb\n"
        "ends.with.backslash=c:\\\\\n"
        "last=1\n"
        "last=2\n"
    )
    assert parse_properties(text) == {
        "sasl.jaas.config": 'org.example.Module required username="alice" password="a\\b";',
        "key with spaces": "value",
        "bare": "",
        "spaced": "value with = sign",
        "unicode": "été",
        "tab": "a\tb",
        "ends.with.backslash": "c:\\",
        "last": "2",
    }


def test_pem_stores_and_scram(certificates: Certificates) -> None:
    config = librdkafka_config(
        {
            "bootstrap.servers": "b:9093",
            "security.protocol": "SASL_SSL",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(certificates.ca),
            "ssl.keystore.location": str(certificates.broker),  # PEM, type not given
            "ssl.key.password": "k",
            "ssl.endpoint.identification.algorithm": "",
            "ssl.enabled.protocols": "TLSv1.3",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": f'{SCRAM} required username="carol" password="c s";',
            "client.id": "tool",
        }
    )
    assert config == {
        "bootstrap.servers": "b:9093",
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(certificates.ca),
        "ssl.key.location": str(certificates.broker),
        "ssl.certificate.location": str(certificates.broker),
        "ssl.key.password": "k",
        "ssl.endpoint.identification.algorithm": "none",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "carol",
        "sasl.password": "c s",
        "client.id": "tool",
    }


def test_pem_text_pkcs12_and_plain_without_a_mechanism() -> None:
    config = librdkafka_config(
        {
            "ssl.truststore.type": "PEM",
            "ssl.truststore.certificates": "CA PEM",
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": "client.p12",
            "ssl.keystore.password": "secret",
            "sasl.jaas.config": f'{PLAIN} required username="alice" password="a";',
        }
    )
    assert config == {
        "ssl.ca.pem": "CA PEM",
        "ssl.keystore.location": "client.p12",
        "ssl.keystore.password": "secret",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": "a",
    }


def test_unsecured_oauthbearer_login() -> None:
    jaas = (
        f'{OAUTH} required unsecuredLoginStringClaim_sub="alice" '
        'unsecuredLoginListClaim_scope="|read|write" unsecuredLoginLifetimeSeconds="600" '
        'unsecuredLoginExtension_traceId="t1";'
    )
    config = librdkafka_config({"sasl.jaas.config": jaas})
    assert config == {
        "sasl.mechanism": "OAUTHBEARER",
        "enable.sasl.oauthbearer.unsecure.jwt": "true",
        "sasl.oauthbearer.config": (
            "principalClaimName=sub scopeClaimName=scope principal=alice scope=read,write "
            "lifeSeconds=600 extension_traceId=t1"
        ),
    }


def test_oidc_client_credentials_login() -> None:
    config = librdkafka_config(
        {
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.login.callback.handler.class": "org.example.Handler",
            "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
            "sasl.jaas.config": f'{OAUTH} required clientId="app" clientSecret="s" scope="k";',
        }
    )
    assert config == {
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": "app",
        "sasl.oauthbearer.client.secret": "s",
        "sasl.oauthbearer.scope": "k",
    }


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        ({"ssl.truststore.location": "ca.jks", "ssl.truststore.type": "JKS"}, "reads PEM trust"),
        ({"ssl.keystore.location": "k.jks", "ssl.keystore.type": "JKS"}, "cannot read Java Key"),
        (
            {
                "ssl.truststore.location": "ca.pem",
                "ssl.truststore.type": "PEM",
                "ssl.truststore.password": "x",
            },
            "ssl.truststore.password cannot be specified for a PEM",
        ),
        ({"sasl.jaas.config": f'{SCRAM} required username="a" password="b";'}, "SCRAM-SHA-256 or"),
        ({"sasl.jaas.config": f'{PLAIN} required username="a";'}, "needs password"),
        ({"sasl.jaas.config": "com.example.Krb5 required;"}, "cannot be translated"),
        ({"sasl.jaas.config": f"{OAUTH} required;"}, "unsecuredLogin* options or"),
        (
            {"sasl.jaas.config": f'{OAUTH} required unsecuredLoginStringClaim_iss="x";'},
            "needs unsecuredLoginStringClaim_sub",
        ),
        ({"sasl.jaas.config": f"{PLAIN} required"}, "Expected ';'"),
    ],
)
def test_what_cannot_be_translated_says_so(properties: dict[str, str], message: str) -> None:
    with pytest.raises(ToolError, match=message.replace("*", r"\*")):
        librdkafka_config(properties)


def test_a_store_of_unknown_type_is_pem_when_its_file_is(tmp_path: Path) -> None:
    binary = tmp_path / "truststore.jks"
    binary.write_bytes(b"\xfe\xed\xfe\xed binary key store")
    with pytest.raises(ToolError, match="ssl.truststore.type JKS"):
        librdkafka_config({"ssl.truststore.location": str(binary)})


def test_every_client_tool_takes_command_config() -> None:
    """Every subcommand with --bootstrap-server(s) (a client of a broker) takes --command-config."""
    leaves: list[tuple[str, argparse.ArgumentParser]] = []

    def walk(name: str, parser: argparse.ArgumentParser) -> None:
        subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subparsers:
            leaves.append((name, parser))
        for action in subparsers:
            for child, sub in action.choices.items():
                walk(f"{name} {child}".strip(), sub)

    walk("", build_parser())
    clients = [
        name
        for name, parser in leaves
        if any(
            {"--bootstrap-server", "--bootstrap-servers"} & set(a.option_strings)
            for a in parser._actions
        )
    ]
    assert {
        "topics list",
        "console",
        "transactions list",
        "perf produce",
        "groups list",
        "pipeline aggregate",
    } <= set(clients)
    missing = [
        name
        for name, parser in leaves
        if name in clients
        and not any("--command-config" in a.option_strings for a in parser._actions)
    ]
    assert missing == []


# ---- the kio connections' side ---------------------------------------------------------------


def exchange(login: SaslLogin, server) -> None:
    """Drive a new client of the login against a server mechanism until the client is done."""
    client = login.new_client()
    message: bytes | None = client.initial_response()
    while message is not None:
        message = client.evaluate_challenge(server.evaluate(message))
    assert client.complete and server.complete


def test_wire_security_sasl_ssl_with_scram(certificates: Certificates) -> None:
    security = wire_security(
        {
            "security.protocol": "sasl_ssl",
            "ssl.ca.location": str(certificates.ca),
            "ssl.certificate.location": str(certificates.client_cert),
            "ssl.key.location": str(certificates.client_key),
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "carol",
            "sasl.password": "carol-secret",
        }
    )
    assert isinstance(security.ssl_context, ssl.SSLContext)
    assert security.sasl == SaslClientLogin("SCRAM-SHA-512", "carol", "carol-secret")
    salt = b"salt-of-carol"
    credential = SCRAM_SHA_512.credential(
        SCRAM_SHA_512.salted_password("carol-secret", salt, 4096), salt, 4096
    )
    exchange(security.sasl, ScramSaslServer(SCRAM_SHA_512, lambda m, u: credential))


def test_wire_security_plain_and_unsecured_oauthbearer() -> None:
    plain = wire_security(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": "a",
        }
    )
    assert plain.ssl_context is None
    assert plain.sasl == SaslClientLogin("PLAIN", "alice", "a")
    exchange(plain.sasl, PlainSaslServer({"alice": "a"}))
    oauth = wire_security(
        librdkafka_config(
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.jaas.config": (
                    f'{OAUTH} required unsecuredLoginStringClaim_sub="alice" '
                    'unsecuredLoginListClaim_scope=",kafka";'
                ),
            }
        )
    )
    assert oauth.sasl == UnsecuredLogin("alice", ("kafka",))
    server = OAuthBearerSaslServer(
        UnsecuredJwsValidator({"unsecuredValidatorRequiredScope": "kafka"})
    )
    exchange(oauth.sasl, server)
    assert server.authorization_id == "alice"


def test_wire_security_refuses_what_it_cannot_do() -> None:
    with pytest.raises(ToolError, match="makes unsecured tokens only"):
        wire_security({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER"})
    with pytest.raises(ToolError, match="needs a user name and password"):
        wire_security({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"})
    with pytest.raises(ToolError, match="GSSAPI cannot be used"):
        wire_security({"security.protocol": "SASL_PLAINTEXT"})
