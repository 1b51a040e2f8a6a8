"""The SASL client mechanisms, sans-I/O: against RFC 7677's example and against this
broker's own server mechanisms (SCRAM's: tests/network/test_sasl_mechanisms.py), and their
refusals of a server that misbehaves."""

from __future__ import annotations

import base64

import pytest

from odradek.network.oauthbearer_unsecured import UnsecuredJwsValidator, UnsecuredLogin
from odradek.network.sasl_mechanism import SaslAuthenticationError
from odradek.network.sasl_oauthbearer import OAuthBearerSaslClient, OAuthBearerSaslServer
from odradek.network.sasl_plain import PlainSaslClient, PlainSaslServer
from odradek.network.scram import SCRAM_SHA_256
from odradek.network.scram_client import ScramSaslClient


def test_rfc_7677_example() -> None:
    client = ScramSaslClient(SCRAM_SHA_256, "user", "pencil", lambda: "rOprNGfwEbeRWgbNEkqO")
    assert client.initial_response() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = (
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    assert client.evaluate_challenge(server_first) == (
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert not client.complete
    assert client.evaluate_challenge(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=") is None
    assert client.complete


def exchange(client, server) -> None:
    """Run the exchange to its end as the authenticators do."""
    token = client.initial_response()
    while token is not None:
        token = client.evaluate_challenge(server.evaluate(token))


@pytest.mark.parametrize(
    ("server_first", "message"),
    [
        (b"r=someone-elses-nonce,s=c2FsdA==,i=4096", "does not start with client nonce"),
        (b"r=NONCE,s=c2FsdA==,i=4096", "does not start with client nonce"),  # nothing added
        (b"r=NONCEserver,s=c2FsdA==,i=1024", "less than the minimum 4096"),
        (b"r=NONCEserver,s=!!,i=4096", "Invalid SCRAM server first message"),
        (b"r=NONCEserver,i=4096", "Invalid SCRAM server first message"),
    ],
)
def test_a_server_first_message_the_client_refuses(server_first: bytes, message: str) -> None:
    client = ScramSaslClient(SCRAM_SHA_256, "broker", "secret", lambda: "NONCE")
    client.initial_response()
    with pytest.raises(SaslAuthenticationError, match=message):
        client.evaluate_challenge(server_first)
    assert not client.complete


@pytest.mark.parametrize(
    ("server_final", "message"),
    [
        (b"v=" + base64.b64encode(b"\0" * 32), "Invalid server signature"),
        (b"v=not base64", "Invalid server signature"),
        (b"e=invalid-proof", "failed with error: invalid-proof"),
    ],
)
def test_a_server_that_cannot_prove_the_credential_is_refused(
    server_final: bytes, message: str
) -> None:
    client = ScramSaslClient(SCRAM_SHA_256, "broker", "secret", lambda: "NONCE")
    client.initial_response()
    client.evaluate_challenge(b"r=NONCEserver,s=c2FsdA==,i=4096")
    with pytest.raises(SaslAuthenticationError, match=message):
        client.evaluate_challenge(server_final)
    assert not client.complete


def test_plain_client_and_server_agree() -> None:
    server = PlainSaslServer({"broker": "secret"})
    client = PlainSaslClient("broker", "secret")
    exchange(client, server)
    assert client.complete and server.authorization_id == "broker"
    with pytest.raises(SaslAuthenticationError, match="Invalid username or password"):
        exchange(PlainSaslClient("broker", "wrong"), PlainSaslServer({"broker": "secret"}))


def test_oauthbearer_client_and_server_agree_and_a_refusal_is_acknowledged() -> None:
    login = UnsecuredLogin("olivia", ("kafka",), extensions={"traceId": "t1"})
    server = OAuthBearerSaslServer(UnsecuredJwsValidator({}))
    exchange(login.new_client(), server)
    assert server.authorization_id == "olivia"
    strict = OAuthBearerSaslServer(
        UnsecuredJwsValidator({"unsecuredValidatorRequiredScope": "admin"})
    )
    with pytest.raises(SaslAuthenticationError, match="insufficient_scope"):
        exchange(login.new_client(), strict)  # the client's \x01 gets the server's reason


def test_oauthbearer_client_refuses_a_server_going_on_after_a_refusal() -> None:
    client = OAuthBearerSaslClient("token", {})
    client.initial_response()
    assert client.evaluate_challenge(b'{"status":"invalid_token"}') == b"\x01"
    with pytest.raises(SaslAuthenticationError, match="after refusing"):
        client.evaluate_challenge(b"")
    assert not client.complete
