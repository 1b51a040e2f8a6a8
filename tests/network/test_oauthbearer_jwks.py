"""A JWKS endpoint's keys: fetched at start, refreshed early when a token names a new key id."""

from __future__ import annotations

import http.server
import json
import ssl
import threading
import time
from collections.abc import Iterator
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from odradek.network.oauthbearer_jwks import RefreshingJwks, jwks_keys
from odradek.network.oauthbearer_jwt import JwtValidator
from odradek.network.oauthbearer_unsecured import OAuthBearerConfigError
from odradek.network.sasl_oauthbearer import InvalidToken
from odradek.testing.certificates import Certificates, make_certificates

OLD_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
NEW_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def key_set(key: rsa.RSAPrivateKey, kid: str) -> bytes:
    jwk = json.loads(RSAAlgorithm.to_jwk(key.public_key()))
    return json.dumps({"keys": [{**jwk, "kid": kid}]}).encode()


class Provider(http.server.BaseHTTPRequestHandler):
    """An identity provider's JWKS endpoint; ``body`` is what it serves now."""

    body = key_set(OLD_KEY, "old")

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def serve(context: ssl.SSLContext | None = None) -> Iterator[str]:
    Provider.body = key_set(OLD_KEY, "old")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Provider)
    if context is not None:
        server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    scheme = "http" if context is None else "https"
    yield f"{scheme}://127.0.0.1:{server.server_address[1]}/keys"
    server.shutdown()
    server.server_close()


@pytest.fixture
def endpoint() -> Iterator[str]:
    yield from serve()


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certificates"))


@pytest.fixture
def https_endpoint(certificates: Certificates) -> Iterator[str]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certificates.broker)
    yield from serve(context)


def token(key: rsa.RSAPrivateKey, kid: str) -> str:
    now = int(time.time())
    return jwt.encode(
        {"sub": "svc", "iat": now, "exp": now + 60}, key, algorithm="RS256", headers={"kid": kid}
    )


def test_a_rotated_key_is_fetched_when_a_token_names_it(endpoint: str) -> None:
    keys = RefreshingJwks(
        endpoint, refresh_ms=3_600_000, retry_backoff_ms=10, retry_backoff_max_ms=50
    )
    validator = JwtValidator(keys)
    try:
        assert validator.validate(token(OLD_KEY, "old")).principal_name == "svc"
        Provider.body = key_set(NEW_KEY, "new")  # the provider rotates its key
        with pytest.raises(InvalidToken, match="Unable to find a suitable verification key"):
            validator.validate(token(NEW_KEY, "new"))  # and asks for the new set
        deadline = time.monotonic() + 30
        while [k.jwk.key_id for k in keys.current()] != ["new"]:
            assert time.monotonic() < deadline, "the key set was not refreshed"
            time.sleep(0.01)
        assert validator.validate(token(NEW_KEY, "new")).principal_name == "svc"
    finally:
        validator.close()
    keys._thread.join(10)
    assert not keys._thread.is_alive()


def test_an_https_endpoint_is_trusted_through_the_jaas_trust_store(
    https_endpoint: str, certificates: Certificates
) -> None:
    configs = {
        "sasl.oauthbearer.jwks.endpoint.url": https_endpoint,
        "sasl.oauthbearer.jwks.endpoint.refresh.ms": 3_600_000,
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": 100,
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": 10_000,
    }
    with pytest.raises(OAuthBearerConfigError, match="CERTIFICATE_VERIFY_FAILED"):
        jwks_keys(configs, {})  # the system's CAs do not know the test CA
    keys = jwks_keys(configs, {"ssl.truststore.location": str(certificates.ca)})
    try:
        assert [k.jwk.key_id for k in keys.current()] == ["old"]
    finally:
        keys.close()
