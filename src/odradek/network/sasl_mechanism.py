"""What every SASL mechanism is to the authenticators: a token exchange, on either side.

Kafka's authenticator drives a javax.security.sasl.SaslServer: each client token goes
to ``evaluateResponse`` and what comes back is the server's token, until the server
says it is complete; its authorization id is the principal's name. The mechanisms here
(``sasl_plain``, ``scram_server``, ``sasl_oauthbearer``) are that interface, sans-I/O: plain objects fed bytes.

A failure the client should read about raises ``SaslAuthenticationError`` with Kafka's
message (it becomes SaslAuthenticate's error_message); the authenticator logs it with
the client's address and closes the connection after the response.

The broker is a SASL client too, of the other brokers' inter-broker listener
(``SaslClient``: Kafka's SaslClient as its SaslClientAuthenticator drives it). The
client speaks first; each server token gets the client's next token until the
client has checked the server's last one (SCRAM's server signature) and is complete.
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


class SaslClient(Protocol):
    """The client's side of one authentication exchange."""

    @property
    def mechanism(self) -> str: ...

    @property
    def complete(self) -> bool:
        """True once the client has sent its last token and accepted the server's."""
        ...

    def initial_response(self) -> bytes:
        """The first token (SASL's client-first mechanisms: PLAIN, SCRAM)."""
        ...

    def evaluate_challenge(self, token: bytes) -> bytes | None:
        """The answer to the server's token; None when there is nothing more to send
        (SaslAuthenticationError when the server's token is not acceptable)."""
        ...
