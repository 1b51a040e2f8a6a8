"""What every SASL mechanism is to the broker's authenticator: a token exchange.

Kafka's authenticator drives a javax.security.sasl.SaslServer: each client token goes
to ``evaluateResponse`` and what comes back is the server's token, until the server
says it is complete; its authorization id is the principal's name. The mechanisms here
(``sasl_plain``, ``scram_server``, ``sasl_oauthbearer``) are that interface, sans-I/O: plain objects fed bytes.

A failure the client should read about raises ``SaslAuthenticationError`` with Kafka's
message (it becomes SaslAuthenticate's error_message); the authenticator logs it with
the client's address and closes the connection after the response.

The client's side of every mechanism is ``sasl_client.SaslClient``; a mechanism refusing
the server's answer raises ``SaslAuthenticationError`` there too.
"""

from __future__ import annotations

from typing import Protocol


class SaslAuthenticationError(Exception):
    """Authentication failed; the message is sent to the client (SASL_AUTHENTICATION_FAILED)."""


class InvalidCredentials(Exception):
    """Authentication failed; the detail is logged, the client gets Kafka's generic message.

    Kafka's SaslException: its text may tell whether a user exists, so the client reads
    only "Authentication failed during authentication due to invalid credentials with
    SASL mechanism M".
    """


class SaslServer(Protocol):
    """One authentication exchange on one connection."""

    @property
    def mechanism(self) -> str: ...

    @property
    def complete(self) -> bool:
        """True once the exchange has succeeded (no further token is expected)."""
        ...

    @property
    def authorization_id(self) -> str:
        """The authenticated user's name, once complete."""
        ...

    @property
    def credential_expiration_ms(self) -> int | None:
        """When the credential expires (ms since the epoch; an OAUTHBEARER token's ``exp``),
        once complete; None for credentials that do not (passwords)."""
        ...

    def evaluate(self, token: bytes) -> bytes:
        """The server's answer to the client's token (SaslAuthenticationError on failure)."""
        ...
