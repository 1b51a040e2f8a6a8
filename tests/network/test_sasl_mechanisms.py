"""The SASL mechanisms' server sides, sans-I/O: PLAIN and SCRAM-SHA-256/512.

SCRAM is checked against RFC 7677's worked example byte for byte, and by hypothesis
against a small RFC 5802 client written here from the RFC: any user name (with the
``,`` and ``=`` that saslname escapes), password, salt and either mechanism logs in;
a wrong password, a changed nonce or a replayed proof does not.
"""

from __future__ import annotations

import base64
import hmac

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


# -- SCRAM: a client from RFC 5802 -----------------------------------------------------------


def saslname(user: str) -> str:
    return user.replace("=", "=3D").replace(",", "=2C")


class ScramClient:
    def __init__(self, mechanism: ScramMechanism, user: str, password: str, nonce: str) -> None:
        self.mechanism, self.password, self.nonce = mechanism, password, nonce
        self.first_bare = f"n={saslname(user)},r={nonce}"
        self.server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self.first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        fields = dict(item.split("=", 1) for item in server_first.decode().split(","))
        assert fields["r"].startswith(self.nonce)
        salt, iterations = base64.b64decode(fields["s"]), int(fields["i"])
        m = self.mechanism
        salted = m.salted_password(self.password, salt, iterations)
        client_key = m.hmac(salted, b"Client Key")
        without_proof = f"c=biws,r={fields['r']}"
        auth = f"{self.first_bare},{server_first.decode()},{without_proof}".encode()
        signature = m.hmac(m.hash(client_key), auth)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self.server_signature = m.hmac(m.hmac(salted, b"Server Key"), auth)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


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
def test_scram_exchange_with_rfc_client(
    mechanism: ScramMechanism, user: str, password: str, salt: bytes, nonce: str
) -> None:
    lookup = store(mechanism, user, password, salt, 4096)
    client = ScramClient(mechanism, user, password, nonce)
    server = ScramSaslServer(mechanism, lookup)
    server_first = server.evaluate(client.first())
    server_final = server.evaluate(client.final(server_first))
    assert server.complete and server.authorization_id == user
    assert hmac.compare_digest(server_final, b"v=" + base64.b64encode(client.server_signature))

    wrong = ScramClient(mechanism, user, password + "x", nonce)
    server = ScramSaslServer(mechanism, lookup)
    with pytest.raises(InvalidCredentials, match="Invalid client credentials"):
        server.evaluate(wrong.final(server.evaluate(wrong.first())))
    assert not server.complete


def exchange_start(
    mechanism: ScramMechanism = SCRAM_SHA_256,
) -> tuple[ScramSaslServer, ScramClient]:
    lookup = store(mechanism, "alice", "alice-secret", b"salt", 4096)
    client = ScramClient(mechanism, "alice", "alice-secret", "cnonce")
    return ScramSaslServer(mechanism, lookup), client


def test_a_proof_for_another_server_nonce_is_refused() -> None:
    """A proof recorded from one exchange does not log in on another (fresh server nonce)."""
    server, client = exchange_start()
    recorded = client.final(server.evaluate(client.first()))
    replay, _ = exchange_start()
    replay.evaluate(client.first())
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


def test_scram_extensions_other_than_tokenauth_are_ignored() -> None:
    server, client = exchange_start()
    server_first = server.evaluate(client.first() + b",ext=value")
    client.first_bare += ",ext=value"
    server.evaluate(client.final(server_first))
    assert server.complete


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
    final = client.final(server.evaluate(client.first()))
    with pytest.raises(InvalidCredentials, match="Invalid channel binding"):
        server.evaluate(final.replace(b"c=biws", b"c=eSws", 1))


def test_no_token_after_completion() -> None:
    server, client = exchange_start()
    server.evaluate(client.final(server.evaluate(client.first())))
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
