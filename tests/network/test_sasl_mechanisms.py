"""The SASL mechanisms' server sides, sans-I/O: PLAIN and SCRAM-SHA-256/512.

SCRAM is checked against RFC 7677's worked example byte for byte, and by hypothesis
against the broker's own client (``scram_client``, itself checked against that example):
any user name (with the ``,`` and ``=`` that saslname escapes), password, salt and either
mechanism logs in, and the client accepts the server's signature; a wrong password, a
changed nonce or a replayed proof does not.
"""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.network.sasl_mechanism import InvalidCredentials, SaslAuthenticationError
from odradek.network.sasl_plain import PlainSaslServer
from odradek.network.scram import (
    SCRAM_MECHANISMS,
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    InvalidCredential,
    ScramCredential,
    ScramMechanism,
)
from odradek.network.scram_client import ScramSaslClient
from odradek.network.scram_server import ScramSaslServer

# -- PLAIN ---------------------------------------------------------------------------------


def test_plain_accepts_a_configured_user() -> None:
    server = PlainSaslServer({"alice": "alice-secret"})
    assert server.evaluate(b"\0alice\0alice-secret") == b""
    assert server.complete and server.authorization_id == "alice"


def test_plain_accepts_an_authorization_id_equal_to_the_user() -> None:
    server = PlainSaslServer({"alice": "alice-secret"})
    server.evaluate(b"alice\0alice\0alice-secret")
    assert server.authorization_id == "alice"


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (b"\0alice\0wrong", "Authentication failed: Invalid username or password"),
        (b"\0mallory\0alice-secret", "Authentication failed: Invalid username or password"),
        (b"\0alice", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
        (b"\0\0alice-secret", "Authentication failed: username not specified"),
        (b"\0alice\0", "Authentication failed: password not specified"),
        (b"bob\0alice\0alice-secret", "authorization id that is different from username"),
        (b"\0alice\0\xff", "not UTF-8"),
    ],
)
def test_plain_failures_have_kafkas_messages(token: bytes, message: str) -> None:
    server = PlainSaslServer({"alice": "alice-secret"})
    with pytest.raises(SaslAuthenticationError, match=message):
        server.evaluate(token)
    assert not server.complete


# -- SCRAM ---------------------------------------------------------------------------------


def store(mechanism: ScramMechanism, user: str, password: str, salt: bytes, iterations: int):
    credential = mechanism.credential(
        mechanism.salted_password(password, salt, iterations), salt, iterations
    )
    stored = {(mechanism.name, user): credential}
    return lambda mech, name: stored.get((mech, name))


def test_rfc7677_example_byte_for_byte() -> None:
    """RFC 7677 section 3: user "user", password "pencil"."""
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    server = ScramSaslServer(
        SCRAM_SHA_256,
        store(SCRAM_SHA_256, "user", "pencil", salt, 4096),
        server_nonce=lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
    )
    first = server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == (
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    final = server.evaluate(
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.authorization_id == "user"


names = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=12)


@settings(max_examples=25, deadline=None)
@given(
    mechanism=st.sampled_from([SCRAM_SHA_256, SCRAM_SHA_512]),
    user=names,
    password=st.text(min_size=1, max_size=20),
    salt=st.binary(min_size=1, max_size=32),
    nonce=st.text(st.sampled_from("abcXYZ019+/-_~!"), min_size=1, max_size=24),
)
def test_scram_exchange_with_the_client(
    mechanism: ScramMechanism, user: str, password: str, salt: bytes, nonce: str
) -> None:
    lookup = store(mechanism, user, password, salt, 4096)
    client = ScramSaslClient(mechanism, user, password, lambda: nonce)
    server = ScramSaslServer(mechanism, lookup)
    server_first = server.evaluate(client.initial_response())
    server_final = server.evaluate(final(client, server_first))
    assert server.complete and server.authorization_id == user
    assert client.evaluate_challenge(server_final) is None and client.complete

    wrong = ScramSaslClient(mechanism, user, password + "x", lambda: nonce)
    server = ScramSaslServer(mechanism, lookup)
    with pytest.raises(InvalidCredentials, match="Invalid client credentials"):
        server.evaluate(final(wrong, server.evaluate(wrong.initial_response())))
    assert not server.complete


def final(client: ScramSaslClient, server_first: bytes) -> bytes:
    """The client-final message (the client has one for every server-first)."""
    message = client.evaluate_challenge(server_first)
    assert message is not None
    return message


def exchange_start(
    mechanism: ScramMechanism = SCRAM_SHA_256,
) -> tuple[ScramSaslServer, ScramSaslClient]:
    lookup = store(mechanism, "alice", "alice-secret", b"salt", 4096)
    client = ScramSaslClient(mechanism, "alice", "alice-secret", lambda: "cnonce")
    return ScramSaslServer(mechanism, lookup), client


def test_a_proof_for_another_server_nonce_is_refused() -> None:
    """A proof recorded from one exchange does not log in on another (fresh server nonce)."""
    server, client = exchange_start()
    first = client.initial_response()
    recorded = final(client, server.evaluate(first))
    replay, _ = exchange_start()
    replay.evaluate(first)
    with pytest.raises(InvalidCredentials, match="Invalid client nonce"):
        replay.evaluate(recorded)


@pytest.mark.parametrize(
    ("first", "message"),
    [
        (b"n,,n=bob,r=abc", "Invalid user credentials"),  # no credential for bob
        (b"p=tls-unique,,n=alice,r=abc", "Invalid SCRAM client first message"),
        (b"n,,n=alice", "Invalid SCRAM client first message"),
        (b"n,,n=alice,r=abc,tokenauth=true", "Token Authentication failed"),
    ],
)
def test_scram_client_first_failures(first: bytes, message: str) -> None:
    server, _ = exchange_start()
    with pytest.raises(InvalidCredentials, match=message):
        server.evaluate(first)


def test_scram_extensions_other_than_tokenauth_are_ignored_but_signed() -> None:
    """An extension does not refuse the login, and is part of the AuthMessage both proofs
    sign (a client that leaves it out of its own fails, as RFC 5802 asks)."""
    server, client = exchange_start()
    server_first = server.evaluate(client.initial_response() + b",ext=value")
    with pytest.raises(InvalidCredentials, match="Invalid client credentials"):
        server.evaluate(final(client, server_first))


def test_scram_authorization_id_must_be_the_user() -> None:
    server, _ = exchange_start()
    with pytest.raises(SaslAuthenticationError, match="authorization id that is different"):
        server.evaluate(b"n,a=bob,n=alice,r=abc")


def test_scram_stored_iterations_below_the_minimum_are_refused() -> None:
    lookup = store(SCRAM_SHA_512, "alice", "pw", b"salt", 1000)
    with pytest.raises(InvalidCredentials, match="Iterations 1000 is less than the minimum 4096"):
        ScramSaslServer(SCRAM_SHA_512, lookup).evaluate(b"n,,n=alice,r=abc")


def test_scram_channel_binding_must_match_the_header() -> None:
    server, client = exchange_start()
    message = final(client, server.evaluate(client.initial_response()))
    with pytest.raises(InvalidCredentials, match="Invalid channel binding"):
        server.evaluate(message.replace(b"c=biws", b"c=eSws", 1))


def test_no_token_after_completion() -> None:
    server, client = exchange_start()
    server.evaluate(final(client, server.evaluate(client.initial_response())))
    with pytest.raises(InvalidCredentials, match="Unexpected challenge"):
        server.evaluate(b"more")


def test_credential_text_is_kafkas_and_round_trips() -> None:
    credential = ScramCredential(b"\x01salt", b"stored", b"server", 8192)
    text = credential.to_text()
    assert text == "salt=AXNhbHQ=,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=8192"
    assert ScramCredential.from_text(text) == credential
    for bad in (
        "salt=AA==,stored_key=AA==,iterations=1",
        "salt=!,stored_key=AA==,server_key=AA==,iterations=1",
    ):
        with pytest.raises(InvalidCredential):
            ScramCredential.from_text(bad)


def test_the_two_mechanisms_are_kafkas() -> None:
    assert {name: int(m.type) for name, m in SCRAM_MECHANISMS.items()} == {
        "SCRAM-SHA-256": 1,
        "SCRAM-SHA-512": 2,
    }
