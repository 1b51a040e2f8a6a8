"""The client side of SASL PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER, sans-I/O.

For the project's own kio connections (``odradek transactions``, which confluent-kafka's
admin client cannot serve): a mechanism gives the bytes of each SaslAuthenticate request
from the server's previous answer, and checks the server's last one. The connection
that drives it sends SaslHandshake v1 first and stops at the first error answer.

- PLAIN (RFC 4616): one message, ``\\0user\\0password``.
- SCRAM (RFC 5802): client-first, then client-final with the proof; the server's final
  signature is verified, so a server that does not know the password is detected.
- OAUTHBEARER (RFC 7628): one message carrying a token; a server's error challenge is
  acknowledged with ``\\x01``, as the RFC and Kafka's client do, after which the server
  answers with its error. ``unsecured_token`` makes the unsigned JWS that librdkafka's
  ``sasl.oauthbearer.config`` and Kafka's unsecured login module make.
"""

from __future__ import annotations

import base64
import hmac
import json
import secrets
import time
from collections.abc import Mapping
from typing import Protocol

from odradek.network.scram import SCRAM_MECHANISMS


class SaslClientError(Exception):
    """The server's answers do not complete the exchange (a bad server signature, say)."""


class SaslClient(Protocol):
    @property
    def mechanism(self) -> str: ...

    def respond(self, challenge: bytes | None) -> bytes | None:
        """The next message (the first when ``challenge`` is None); None once complete."""
        ...


class PlainClient:
    mechanism = "PLAIN"

    def __init__(self, username: str, password: str) -> None:
        self._message = f"\0{username}\0{password}".encode()

    def respond(self, challenge: bytes | None) -> bytes | None:
        return self._message if challenge is None else None


class ScramClient:
    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self.mechanism = mechanism
        self._scram = SCRAM_MECHANISMS[mechanism]
        self._password = password
        name = username.replace("=", "=3D").replace(",", "=2C")
        self._first_bare = f"n={name},r={secrets.token_urlsafe(24)}"
        self._server_signature: bytes | None = None

    def respond(self, challenge: bytes | None) -> bytes | None:
        if challenge is None:
            return f"n,,{self._first_bare}".encode()
        if self._server_signature is None:
            return self._final(challenge.decode())
        if not challenge.startswith(b"v="):
            raise SaslClientError(f"SCRAM server-final message without a signature: {challenge!r}")
        if not hmac.compare_digest(base64.b64decode(challenge[2:]), self._server_signature):
            raise SaslClientError("the server's SCRAM signature does not match: not the server")
        return None

    def _final(self, server_first: str) -> bytes:
        fields = dict(item.split("=", 1) for item in server_first.split(",") if "=" in item)
        nonce, salt, iterations = fields.get("r", ""), fields.get("s"), fields.get("i")
        client_nonce = self._first_bare.rsplit("r=", 1)[1]
        if not nonce.startswith(client_nonce) or salt is None or iterations is None:
            raise SaslClientError(f"invalid SCRAM server-first message: {server_first!r}")
        salted = self._scram.salted_password(
            self._password, base64.b64decode(salt), int(iterations)
        )
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._first_bare},{server_first},{without_proof}".encode()
        client_key = self._scram.hmac(salted, b"Client Key")
        signature = self._scram.hmac(self._scram.hash(client_key), auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = self._scram.hmac(salted, b"Server Key")
        self._server_signature = self._scram.hmac(server_key, auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


class OAuthBearerClient:
    mechanism = "OAUTHBEARER"

    def __init__(self, token: str, extensions: Mapping[str, str] | None = None) -> None:
        pairs = "".join(f"\x01{k}={v}" for k, v in (extensions or {}).items())
        self._message = f"n,,\x01auth=Bearer {token}{pairs}\x01\x01".encode()

    def respond(self, challenge: bytes | None) -> bytes | None:
        if challenge is None:
            return self._message
        return b"\x01" if challenge else None  # acknowledge an error challenge


def unsecured_token(
    principal: str,
    scope: tuple[str, ...] = (),
    lifetime_s: float = 3600,
    principal_claim: str = "sub",
    scope_claim: str = "scope",
) -> str:
    """An unsigned JWS (``alg`` none), as Kafka's and librdkafka's unsecured logins make."""

    def part(value: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    now = time.time()
    claims: dict[str, object] = {principal_claim: principal, "iat": now, "exp": now + lifetime_s}
    if scope:
        claims[scope_claim] = list(scope)
    return f"{part({'alg': 'none'})}.{part(claims)}."
