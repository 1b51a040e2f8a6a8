"""SASL/PLAIN (RFC 4616) as Kafka's PlainSaslServer and PlainServerCallbackHandler.

The client sends ``authzid NUL authcid NUL password`` in one token. The users are
the ``user_<name>="<password>"`` options of the listener's PlainLoginModule JAAS entry
(``listener.name.<l>.plain.sasl.jaas.config``), as Kafka's default callback handler
reads them. Passwords are compared in constant time. The messages are Kafka's, so a
client sees the same reason it would from a Kafka broker.

``PlainSaslClient`` is the client's side (``network.sasl_client``): the broker's own when it
connects to another broker with PLAIN (the ``username`` and ``password`` options of the
same JAAS entry, as Kafka's broker logs in), and the tools'. One token, no authorization
id, nothing to check in the answer.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from odradek.network.jaas_config import LoginModuleEntry
from odradek.network.sasl_mechanism import SaslAuthenticationError

MECHANISM = "PLAIN"
#: The login module Kafka's PLAIN mechanism is configured with.
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_USER_PREFIX = "user_"


def plain_users(entry: LoginModuleEntry) -> dict[str, str]:
    """User name -> password from a PlainLoginModule entry's ``user_<name>`` options."""
    return {
        key[len(_USER_PREFIX) :]: value
        for key, value in entry.options.items()
        if key.startswith(_USER_PREFIX) and len(key) > len(_USER_PREFIX)
    }


class PlainSaslServer:
    """One PLAIN exchange: a single client token, no server token."""

    mechanism = MECHANISM

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self._authorization_id = ""
        self._complete = False

    @property
    def complete(self) -> bool:
        return self._complete

    @property
    def authorization_id(self) -> str:
        if not self._complete:
            raise RuntimeError("Authentication exchange has not completed")
        return self._authorization_id

    #: A password does not expire (KIP-368 sessions then last connections.max.reauth.ms).
    credential_expiration_ms = None

    def evaluate(self, token: bytes) -> bytes:
        if self._complete:
            raise SaslAuthenticationError("Authentication exchange has already completed")
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslAuthenticationError("Invalid SASL/PLAIN response: not UTF-8") from None
        parts = text.split("\u0000")
        if len(parts) != 3:
            raise SaslAuthenticationError(
                f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}"
            )
        authorization_id, username, password = parts
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        expected = self._users.get(username)
        # Compare against something even for an unknown user, so timing does not tell.
        matches = hmac.compare_digest(
            (expected if expected is not None else "\u0000" + password).encode(),
            password.encode(),
        )
        if expected is None or not matches:
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authorization_id and authorization_id != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different "
                "from username"
            )
        self._authorization_id = username
        self._complete = True
        return b""


class PlainSaslClient:
    """The client's single PLAIN token."""

    def __init__(self, username: str, password: str) -> None:
        self._token = f"\u0000{username}\u0000{password}".encode()
        self.complete = False

    def initial_response(self) -> bytes:
        self.complete = True
        return self._token

    def evaluate_challenge(self, token: bytes) -> bytes | None:
        if token:
            raise SaslAuthenticationError("PLAIN expects no token from the server")
        return None
