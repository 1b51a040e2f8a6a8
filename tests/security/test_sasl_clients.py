"""The broker's SASL client mechanisms, sans-I/O: against RFC 7677's example and against
this broker's own server mechanisms, and their refusals of a server that misbehaves."""

from __future__ import annotations

import base64
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.network.sasl_mechanism import InvalidCredentials, SaslAuthenticationError
from odradek.network.sasl_plain import PlainSaslClient, PlainSaslServer
from odradek.network.scram import SCRAM_MECHANISMS, SCRAM_SHA_256, ScramCredential
from odradek.network.scram_client import ScramSaslClient
from odradek.network.scram_server import ScramSaslServer


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


def credential(mechanism: str, password: str) -> ScramCredential:
    scram = SCRAM_MECHANISMS[mechanism]
    salt = os.urandom(16)
    return scram.credential(scram.salted_password(password, salt, 4096), salt, 4096)


def exchange(client, server) -> None:
    """Run the exchange to its end as the authenticators do."""
    token = client.initial_response()
    while token is not None:
        token = client.evaluate_challenge(server.evaluate(token))


@pytest.mark.parametrize("mechanism", sorted(SCRAM_MECHANISMS))
@given(user=st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1))
def test_scram_client_and_server_agree(mechanism: str, user: str) -> None:
    stored = credential(mechanism, "secret")
    server = ScramSaslServer(
        SCRAM_MECHANISMS[mechanism], lambda m, u: stored if u == user else None
    )
    client = ScramSaslClient(SCRAM_MECHANISMS[mechanism], user, "secret")
    exchange(client, server)
    assert client.complete and server.complete
    assert server.authorization_id == user


def test_a_wrong_password_is_refused_by_the_server() -> None:
    stored = credential("SCRAM-SHA-512", "secret")
    server = ScramSaslServer(SCRAM_MECHANISMS["SCRAM-SHA-512"], lambda m, u: stored)
    client = ScramSaslClient(SCRAM_MECHANISMS["SCRAM-SHA-512"], "broker", "wrong")
    with pytest.raises(InvalidCredentials):
        exchange(client, server)


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
