"""SASL/OAUTHBEARER served to confluent-kafka (librdkafka), kafka-python and aiokafka, and to raw
SaslAuthenticate requests.

One broker for the module, with four listeners:

- UNSECURED (SASL_PLAINTEXT): Kafka's default validator, unsigned tokens, the scope ``kafka``
  required (``unsecuredValidatorRequiredScope``), sessions capped at a minute;
- JWT (SASL_SSL): Kafka's OAuthBearerValidatorCallbackHandler with a JWKS file, an expected
  audience and issuer; the tokens are signed here with a test RSA key;
- JWKSURL (SASL_PLAINTEXT): the same validator with the JWKS served over http by this module,
  and the principal taken from a ``client_id`` claim (a mechanism-prefixed config);
- PLAINTEXT, to check the broker keeps serving.
"""

from __future__ import annotations

import base64
import http.server
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import jwt
import pytest
from aiokafka.abc import AbstractTokenProvider as AioKafkaTokenProvider
from confluent_kafka import KafkaError
from cryptography.hazmat.primitives.asymmetric import rsa
from integration.wire_client import WireClient
from jwt.algorithms import RSAAlgorithm
from kafka.net.sasl.oauth import AbstractTokenProvider as KafkaPythonTokenProvider
from kio.schema.sasl_authenticate.v2 import request as authenticate_v2
from kio.schema.sasl_handshake.v1 import request as handshake_v1

from odradek import EmbeddedBroker
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

LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
ISSUER = "https://issuer.odradek.test"
AUDIENCE = "odradek"
MAX_REAUTH_MS = 60_000


def new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


SIGNING_KEY = new_key()
#: Another key: a token it signs under the signing key's id has a bad signature.
FORGING_KEY = new_key()
URL_KEY = new_key()


def jwks(key: rsa.RSAPrivateKey, kid: str) -> dict[str, Any]:
    jwk = json.loads(RSAAlgorithm.to_jwk(key.public_key()))
    return {"keys": [{**jwk, "kid": kid, "use": "sig", "alg": "RS256"}]}


def signed_token(
    key: rsa.RSAPrivateKey = SIGNING_KEY,
    kid: str = "test-key",
    lifetime_s: float = 3600,
    **claims: Any,
) -> str:
    now = time.time()
    payload = {
        "sub": "jwt-user",
        "iss": ISSUER,
        "aud": AUDIENCE,
        "iat": int(now),
        "exp": int(now + lifetime_s),
        **claims,
    }
    payload = {name: value for name, value in payload.items() if value is not None}
    return jwt.encode(payload, key, algorithm="RS256", headers={"kid": kid})


def unsecured_token(**claims: Any) -> str:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    now = int(time.time())
    return f"{part({'alg': 'none'})}.{part({'iat': now, 'exp': now + 3600, **claims})}."


class _JwksHandler(http.server.BaseHTTPRequestHandler):
    body = json.dumps(jwks(URL_KEY, "url-key")).encode()

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def jwks_server() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _JwksHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/jwks.json"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def broker(
    certificates: Certificates, tmp_path_factory: pytest.TempPathFactory, jwks_server: str
) -> Iterator[EmbeddedBroker]:
    jwks_file = tmp_path_factory.mktemp("jwks") / "jwks.json"
    jwks_file.write_text(json.dumps(jwks(SIGNING_KEY, "test-key")))
    config = {
        "listeners": (
            "PLAINTEXT://127.0.0.1:0,UNSECURED://127.0.0.1:0,JWT://127.0.0.1:0,"
            "JWKSURL://127.0.0.1:0"
        ),
        "listener.security.protocol.map": (
            "PLAINTEXT:PLAINTEXT,UNSECURED:SASL_PLAINTEXT,JWT:SASL_SSL,JWKSURL:SASL_PLAINTEXT"
        ),
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.unsecured.oauthbearer.sasl.jaas.config": (
            f'{LOGIN_MODULE} required unsecuredValidatorRequiredScope="kafka";'
        ),
        "listener.name.unsecured.oauthbearer.connections.max.reauth.ms": str(MAX_REAUTH_MS),
        "listener.name.jwt.oauthbearer.sasl.jaas.config": f"{LOGIN_MODULE} required;",
        "listener.name.jwt.oauthbearer.sasl.server.callback.handler.class": VALIDATOR,
        "listener.name.jwt.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": jwks_file.as_uri(),
        "listener.name.jwt.sasl.oauthbearer.expected.audience": f"other,{AUDIENCE}",
        "sasl.oauthbearer.expected.issuer": ISSUER,
        "listener.name.jwksurl.oauthbearer.sasl.jaas.config": f"{LOGIN_MODULE} required;",
        "listener.name.jwksurl.oauthbearer.sasl.server.callback.handler.class": VALIDATOR,
        "listener.name.jwksurl.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": jwks_server,
        "listener.name.jwksurl.oauthbearer.sasl.oauthbearer.sub.claim.name": "client_id",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certificates.broker),
    }
    with EmbeddedBroker(config=config, log_level="DEBUG") as b:
        yield b


def unsecured_config(broker: EmbeddedBroker, oauth_config: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": broker.listeners["UNSECURED"],
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "enable.sasl.oauthbearer.unsecure.jwt": True,
        "sasl.oauthbearer.config": oauth_config,
    }


def token_config(
    broker: EmbeddedBroker, certificates: Certificates, token: str, listener: str = "JWT"
) -> dict[str, Any]:
    """confluent-kafka logging in with ``token``, handed over by its oauth_cb."""
    config: dict[str, Any] = {
        "bootstrap.servers": broker.listeners[listener],
        "security.protocol": "SASL_SSL" if listener == "JWT" else "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        # librdkafka's own notion of the token's lifetime (it refreshes before it ends); the
        # broker reads the expiry from the token itself.
        "oauth_cb": lambda _config: (token, time.time() + 3600),
    }
    if listener == "JWT":
        config["ssl.ca.location"] = str(certificates.ca)
    return config


def test_unsecured_token_from_librdkafka(broker: EmbeddedBroker) -> None:
    config = unsecured_config(broker, "principal=alice scope=kafka")
    values = [f"unsecured {i}".encode() for i in range(20)]
    assert confluent_round_trip(config, new_topic("unsecured"), values) == values
    assert logged(broker, "on listener UNSECURED authenticated as User:alice")


def test_signed_token_from_oauth_cb(broker: EmbeddedBroker, certificates: Certificates) -> None:
    config = token_config(broker, certificates, signed_token(sub="carol"))
    values = [bytes([i]) * 100 for i in range(20)]
    assert confluent_round_trip(config, new_topic("jwt"), values) == values
    assert logged(broker, "on listener JWT authenticated as User:carol")


def test_jwks_from_an_http_endpoint_and_a_configured_principal_claim(
    broker: EmbeddedBroker, certificates: Certificates
) -> None:
    # No expected audience on this listener: a token naming one would be refused.
    token = signed_token(URL_KEY, "url-key", sub="ignored", client_id="service-7", aud=None)
    config = token_config(broker, certificates, token, listener="JWKSURL")
    assert confluent_round_trip(config, new_topic("jwks-url"), [b"x"]) == [b"x"]
    assert logged(broker, "on listener JWKSURL authenticated as User:service-7")


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        (lambda: signed_token(lifetime_s=-120), "Signature has expired"),
        (lambda: signed_token(FORGING_KEY), "Signature verification failed"),
        (lambda: signed_token(aud="someone-else"), "Audience doesn't match"),
        (lambda: signed_token(iss="https://elsewhere.test"), "Invalid issuer"),
        (lambda: signed_token(kid="unknown"), "Unable to find a suitable verification key"),
        (lambda: unsecured_token(sub="mallory"), "Malformed JWT provided"),
        (
            lambda: jwt.encode(
                {"sub": "mallory"},
                "a shared secret of at least thirty-two bytes",
                algorithm="HS256",
            ),
            "the JWS algorithm 'HS256' is not one of a public key",
        ),
    ],
    ids=[
        "expired",
        "bad-signature",
        "wrong-audience",
        "wrong-issuer",
        "unknown-key",
        "unsigned",
        "hmac",
    ],
)
def test_refused_tokens_fail_authentication_and_others_are_still_served(
    broker: EmbeddedBroker, certificates: Certificates, token: Any, reason: str
) -> None:
    error = confluent_login_error(token_config(broker, certificates, token()))
    assert error.code() == KafkaError._AUTHENTICATION
    assert reason in error.str() and '{"status":"invalid_token"}' in error.str()
    assert logged(broker, "Failed authentication with 127.0.0.1")
    good = token_config(broker, certificates, signed_token())
    assert confluent_round_trip(good, new_topic("after-refusal"), [b"ok"]) == [b"ok"]


def test_a_token_without_the_required_scope(broker: EmbeddedBroker) -> None:
    error = confluent_login_error(unsecured_config(broker, "principal=alice scope=other"))
    assert error.code() == KafkaError._AUTHENTICATION
    assert '{"status":"insufficient_scope","scope":"kafka"}' in error.str()
    assert "missing a required scope (kafka)" in error.str()


# ---- the exchange on the wire ----------------------------------------------------------------


def initial_response(token: str, authzid: str = "", extensions: str = "") -> bytes:
    gs2 = f"n,a={authzid}," if authzid else "n,,"
    return f"{gs2}\x01auth=Bearer {token}\x01{extensions}\x01".encode()


def client(broker: EmbeddedBroker, listener: str = "UNSECURED") -> WireClient:
    wire = WireClient(broker.listeners[listener])
    handshake = wire.call(handshake_v1.SaslHandshakeRequest(mechanism="OAUTHBEARER"))
    assert handshake.error_code == ErrorCode.none
    return wire


def authenticate(wire: WireClient, message: bytes) -> Any:
    return wire.call(authenticate_v2.SaslAuthenticateRequest(auth_bytes=message))


@pytest.mark.parametrize(
    "message",
    [
        b"",
        b"\x01",
        b"n,,\x01auth=Bearer\x01\x01",  # no token after the scheme
        b"n,,\x01auth=Basic dXNlcjpwdw==\x01\x01",  # another scheme
        b"n,,\x01key=value\x01\x01",  # no auth
        b"y,,\x01auth=Bearer abc\x01\x01",  # a channel-binding flag
        b"n,,auth=Bearer abc\x01\x01",  # no separator after the GS2 header
        b"n,,\x01auth=Bearer abc\x01",  # not terminated
        b"n,,\x01auth=Bearer abc\x01bad key=v\x01\x01",  # an extension name with a space
        b"n,,\x01auth=Bearer \xff\xfe\x01\x01",  # not UTF-8
    ],
    ids=[
        "empty",
        "lone-separator",
        "no-token",
        "basic-scheme",
        "no-auth",
        "channel-binding",
        "no-separator",
        "unterminated",
        "bad-extension",
        "not-utf8",
    ],
)
def test_malformed_client_first_messages(broker: EmbeddedBroker, message: bytes) -> None:
    wire = client(broker)
    response = authenticate(wire, message)
    assert response.error_code == ErrorCode.sasl_authentication_failed
    assert response.error_message == (
        "Authentication failed during authentication due to invalid credentials with SASL "
        "mechanism OAUTHBEARER"
    )
    assert closed(wire)


def test_a_refused_token_is_a_challenge_then_a_failure(broker: EmbeddedBroker) -> None:
    wire = client(broker)
    challenge = authenticate(wire, initial_response(unsecured_token(sub="bob")))
    assert challenge.error_code == ErrorCode.none  # RFC 7628: the error is a server challenge
    assert json.loads(challenge.auth_bytes) == {"status": "insufficient_scope", "scope": "kafka"}
    failure = authenticate(wire, b"\x01")
    assert failure.error_code == ErrorCode.sasl_authentication_failed
    assert "missing a required scope (kafka)" in failure.error_message
    assert closed(wire)


def test_session_lifetime_is_the_earlier_of_token_expiry_and_max_reauth(
    broker: EmbeddedBroker,
) -> None:
    short = unsecured_token(sub="bob", scope=["kafka"], exp=int(time.time()) + 20)
    wire = client(broker)
    response = authenticate(wire, initial_response(short, extensions="traceId=abc 1\x01"))
    assert response.error_code == ErrorCode.none
    lifetime_ms = response.session_lifetime.total_seconds() * 1000
    assert 0 < lifetime_ms <= 20_000
    wire.close()
    wire = client(broker)
    long = unsecured_token(sub="bob", scope="kafka")  # an hour
    response = authenticate(wire, initial_response(long, authzid="bob"))
    assert response.error_code == ErrorCode.none
    assert response.session_lifetime.total_seconds() * 1000 == MAX_REAUTH_MS
    wire.close()


def test_an_authorization_id_other_than_the_principal(broker: EmbeddedBroker) -> None:
    wire = client(broker)
    token = unsecured_token(sub="bob", scope="kafka")
    response = authenticate(wire, initial_response(token, authzid="admin"))
    assert response.error_code == ErrorCode.sasl_authentication_failed
    assert "authorization id (admin) that is different" in response.error_message
    assert closed(wire)


def test_librdkafka_reauthenticates_before_its_token_expires(
    broker: EmbeddedBroker, certificates: Certificates
) -> None:
    """Tokens of a few seconds: the session ends with each (KIP-368), and librdkafka logs in
    again on its connection with a fresh one from its oauth_cb; every record arrives."""
    lifetime_s = 3

    def fresh_token(_config: str) -> tuple[str, float]:
        return signed_token(sub="renewer", lifetime_s=lifetime_s), time.time() + lifetime_s

    config = token_config(broker, certificates, "")
    config["oauth_cb"] = fresh_token
    topic = new_topic("renewed")
    renewed = "on listener JWT re-authenticated as User:renewer"
    values = produce_until_logged(config, broker, renewed, topic)
    assert confluent_consume(config, topic, len(values)) == values


class KafkaPythonTokens(KafkaPythonTokenProvider):
    def token(self) -> str:
        return unsecured_token(sub="kp-user", scope="kafka")


class AioKafkaTokens(AioKafkaTokenProvider):
    async def token(self) -> str:
        return unsecured_token(sub="aio-user", scope="kafka")


def test_kafka_python_and_aiokafka_with_a_token_provider(broker: EmbeddedBroker) -> None:
    common = {
        "bootstrap_servers": broker.listeners["UNSECURED"],
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "OAUTHBEARER",
    }
    values = [f"kp {i}".encode() for i in range(10)]
    kafka_python = {**common, "sasl_oauth_token_provider": KafkaPythonTokens()}
    assert kafka_python_round_trip(kafka_python, new_topic("kp"), values) == values
    aiokafka = {**common, "sasl_oauth_token_provider": AioKafkaTokens()}
    assert aiokafka_round_trip(aiokafka, new_topic("aio"), values) == values
    assert logged(broker, "on listener UNSECURED authenticated as User:kp-user")
    assert logged(broker, "on listener UNSECURED authenticated as User:aio-user")
