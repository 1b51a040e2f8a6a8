"""The client's SASL exchange (``network.sasl_client``), sans-I/O: its requests answered by
the broker's own server mechanisms in place of a broker; its refusals and its KIP-368
re-authentication deadline."""

from __future__ import annotations

import pytest

from odradek.network.client_security import SaslClientLogin
from odradek.network.oauthbearer_unsecured import UnsecuredJwsValidator, UnsecuredLogin
from odradek.network.sasl_client import SaslExchange, SaslExchangeError
from odradek.network.sasl_mechanism import SaslAuthenticationError, SaslServer
from odradek.network.sasl_oauthbearer import OAuthBearerSaslServer
from odradek.network.scram import SCRAM_SHA_256
from odradek.network.scram_server import ScramSaslServer
from odradek.protocol import schemas
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode

VERSIONS = {ApiKey.SASL_HANDSHAKE: (0, 1), ApiKey.SASL_AUTHENTICATE: (0, 2)}
HANDSHAKE = schemas.response_module(ApiKey.SASL_HANDSHAKE, 1).SaslHandshakeResponse
AUTHENTICATE = schemas.response_module(ApiKey.SASL_AUTHENTICATE, 2).SaslAuthenticateResponse
ADDRESS = "broker:9092"


def authenticate(exchange: SaslExchange, server: SaslServer, lifetime_ms: int = 0) -> None:
    """Answer the exchange's requests as the broker's authenticator does."""
    assert exchange.first_request().mechanism == server.mechanism
    request = exchange.on_response(schemas.build(HANDSHAKE, error_code=0, mechanisms=[]))
    while request is not None:
        try:
            token = server.evaluate(bytes(request.auth_bytes))
        except SaslAuthenticationError as e:
            code, message, token = ErrorCode.sasl_authentication_failed, str(e), b""
        else:
            code, message = ErrorCode.none, None
        answer = schemas.build(
            AUTHENTICATE,
            error_code=code,
            error_message=message,
            auth_bytes=token,
            session_lifetime=lifetime_ms if server.complete else 0,
        )
        request = exchange.on_response(answer)


def scram_server() -> ScramSaslServer:
    salted = SCRAM_SHA_256.salted_password("secret", b"salt", 4096)
    credential = SCRAM_SHA_256.credential(salted, b"salt", 4096)
    return ScramSaslServer(SCRAM_SHA_256, lambda m, u: credential if u == "broker" else None)


def test_the_session_is_renewed_within_kafkas_window_from_the_last_token_sent() -> None:
    sent = iter([100.0, 200.0])  # client-first, client-final
    login = SaslClientLogin("SCRAM-SHA-256", "broker", "secret")
    exchange = SaslExchange(login, VERSIONS, ADDRESS, clock=lambda: next(sent))
    authenticate(exchange, scram_server(), lifetime_ms=100_000)
    assert exchange.reauthenticate_at is not None
    assert 200 + 85 <= exchange.reauthenticate_at <= 200 + 95
    unlimited = SaslExchange(login, VERSIONS, ADDRESS)
    authenticate(unlimited, scram_server())
    assert unlimited.reauthenticate_at is None


def test_the_servers_reason_is_kept_as_it_is() -> None:
    """An OAUTHBEARER refusal's reason is JSON, braces and all."""
    login = UnsecuredLogin("olivia", ("read",))
    server = OAuthBearerSaslServer(
        UnsecuredJwsValidator({"unsecuredValidatorRequiredScope": "admin"})
    )
    with pytest.raises(SaslExchangeError) as refusal:
        authenticate(SaslExchange(login, VERSIONS, ADDRESS), server)
    assert str(refusal.value).startswith(
        "authentication as olivia with OAUTHBEARER to broker:9092 failed "
        "(SASL_AUTHENTICATION_FAILED): "
    )
    assert str(refusal.value).endswith('{"status":"insufficient_scope","scope":"admin"}')


def test_a_refused_mechanism_and_a_server_without_the_versions() -> None:
    login = SaslClientLogin("PLAIN", "broker", "secret")
    exchange = SaslExchange(login, VERSIONS, ADDRESS)
    exchange.first_request()
    refusal = schemas.build(
        HANDSHAKE, error_code=ErrorCode.unsupported_sasl_mechanism, mechanisms=["SCRAM-SHA-512"]
    )
    with pytest.raises(
        SaslExchangeError,
        match=r"refused SASL mechanism PLAIN \(UNSUPPORTED_SASL_MECHANISM\); it enables "
        "SCRAM-SHA-512",
    ):
        exchange.on_response(refusal)
    with pytest.raises(SaslExchangeError, match="does not serve SaslHandshake v1"):
        SaslExchange(login, {ApiKey.SASL_HANDSHAKE: (0, 0)}, ADDRESS)
