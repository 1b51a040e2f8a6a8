"""SASL/OAUTHBEARER (RFC 7628) as Kafka's OAuthBearerSaslServer.

The client's one message is a GS2 header and key/value pairs separated by ``\\x01``:
``n,[a=authzid],\\x01auth=Bearer <token>\\x01[key=value\\x01...]\\x01``. The token goes to
the listener's validator (``TokenValidator``): Kafka's unsecured validator (alg ``none``,
for development) or its JWT validator (signatures checked against a JWKS). The other
pairs are SASL extensions; Kafka's validators accept every one, so they are checked for
RFC 7628's syntax and otherwise ignored.

A token the validator refuses is not an error answer at once: as RFC 7628 and Kafka,
the server answers with a challenge, the JSON error ``{"status":"invalid_token"}``
(``insufficient_scope`` with the scope when a required scope is missing), the client
acknowledges it with a lone ``\\x01``, and only then does the exchange fail. The failure's
message (SaslAuthenticate's error_message, and the broker's log line) is that JSON
preceded by the validator's reason, so a client sees why its token was refused, where
Kafka sends only the JSON. A malformed client message fails with Kafka's generic
"invalid credentials" message (``InvalidCredentials``), its detail only in the log.

``OAuthBearerSaslClient`` is the client's side of the same exchange, for the tools that
speak the protocol themselves (``network.sasl_client``).

The token's expiry is the credential's lifetime: the authenticator ends the session
(KIP-368) at the earlier of it and ``connections.max.reauth.ms``, so a client with a
token re-authenticates with a fresh one before its old one expires.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from odradek.network.sasl_mechanism import InvalidCredentials, SaslAuthenticationError

MECHANISM = "OAUTHBEARER"
#: The login module Kafka's OAUTHBEARER mechanism is configured with.
OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"

_SEPARATOR = "\x01"
# RFC 7628 section 3.1 (Kafka's OAuthBearerClientInitialResponse patterns).
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_KEY = r"[A-Za-z]+"
_VALUE = r"[\x21-\x7e \t\r\n]+"
_CLIENT_INITIAL_RESPONSE = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,{_SEPARATOR}"
    rf"(?P<kvpairs>(?:{_KEY}={_VALUE}{_SEPARATOR})*){_SEPARATOR}"
)
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)")
_AUTH_KEY = "auth"


@dataclass(frozen=True, slots=True)
class OAuthBearerToken:
    """A validated token: Kafka's OAuthBearerToken."""

    value: str
    principal_name: str
    scope: frozenset[str]
    #: When the token expires, in ms since the epoch (its ``exp`` claim).
    lifetime_ms: int
    #: When it was issued, in ms since the epoch (``iat``), when it says.
    start_time_ms: int | None = None


class InvalidToken(Exception):
    """The validator refused a token: ``str()`` is the reason, for the log and the client.

    ``scope`` is set when the token lacks a required scope (RFC 7628's insufficient_scope).
    """

    def __init__(self, reason: str, scope: str | None = None) -> None:
        super().__init__(reason)
        self.scope = scope


class TokenValidator(Protocol):
    """Kafka's server callback handler for OAUTHBEARER: a token's value in, a token out."""

    def validate(self, token_value: str) -> OAuthBearerToken:
        """The validated token, or InvalidToken."""
        ...

    def close(self) -> None:
        """Release what it holds (a JWKS refresh thread) when its listener stops."""
        ...


@dataclass(frozen=True, slots=True)
class ClientInitialResponse:
    """The parts of a client's OAUTHBEARER message."""

    token: str
    authorization_id: str
    extensions: dict[str, str]


def parse_client_initial_response(message: bytes) -> ClientInitialResponse:
    """Kafka's OAuthBearerClientInitialResponse parse; InvalidCredentials when malformed."""
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidCredentials("Invalid OAUTHBEARER client first message: not UTF-8") from None
    match = _CLIENT_INITIAL_RESPONSE.fullmatch(text)
    if match is None:
        raise InvalidCredentials("Invalid OAUTHBEARER client first message")
    pairs = dict(pair.partition("=")[::2] for pair in match["kvpairs"].split(_SEPARATOR) if pair)
    auth = pairs.pop(_AUTH_KEY, None)
    if auth is None:
        raise InvalidCredentials("Invalid OAUTHBEARER client first message: 'auth' not specified")
    auth_match = _AUTH.fullmatch(auth)
    if auth_match is None:
        raise InvalidCredentials("Invalid OAUTHBEARER client first message: invalid 'auth' format")
    if auth_match["scheme"].lower() != "bearer":
        raise InvalidCredentials(
            f"Invalid scheme in OAUTHBEARER client first message: {auth_match['scheme']}"
        )
    return ClientInitialResponse(auth_match["token"], match["authzid"] or "", pairs)


def error_challenge(status: str, scope: str | None = None) -> str:
    """RFC 7628's server error message, as Kafka writes it."""
    error: dict[str, str] = {"status": status}
    if scope is not None:
        error["scope"] = scope
    return json.dumps(error, separators=(",", ":"))


class OAuthBearerSaslServer:
    """One OAUTHBEARER exchange: the client's message, and after a refused token its ``\\x01``."""

    mechanism = MECHANISM

    def __init__(self, validator: TokenValidator) -> None:
        self._validator = validator
        self._token: OAuthBearerToken | None = None
        #: After a refused token: the failure the client's ``\x01`` ends the exchange with.
        self._error: str | None = None

    @property
    def complete(self) -> bool:
        return self._token is not None

    @property
    def authorization_id(self) -> str:
        if self._token is None:
            raise RuntimeError("Authentication exchange has not completed")
        return self._token.principal_name

    @property
    def credential_expiration_ms(self) -> int | None:
        """When the token expires (ms since the epoch): the session ends no later (KIP-368)."""
        if self._token is None:
            raise RuntimeError("Authentication exchange has not completed")
        return self._token.lifetime_ms

    def evaluate(self, token: bytes) -> bytes:
        if self._token is not None:
            raise SaslAuthenticationError("Authentication exchange has already completed")
        if token == _SEPARATOR.encode() and self._error is not None:
            raise SaslAuthenticationError(self._error)
        self._error = None  # as Kafka: a new client message after a refusal is a new attempt
        response = parse_client_initial_response(token)
        try:
            validated = self._validator.validate(response.token)
        except InvalidToken as e:
            status = "insufficient_scope" if e.scope is not None else "invalid_token"
            challenge = error_challenge(status, e.scope)
            self._error = f"{e} {challenge}"
            return challenge.encode()
        if response.authorization_id and response.authorization_id != validated.principal_name:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id "
                f"({response.authorization_id}) that is different from the token's principal "
                f"name ({validated.principal_name})"
            )
        self._token = validated
        return b""


class OAuthBearerSaslClient:
    """Kafka's OAuthBearerSaslClient: the token and extensions in one message; an error
    challenge (a refused token) gets RFC 7628's ``\\x01``, and the server then fails."""

    def __init__(self, token: str, extensions: Mapping[str, str]) -> None:
        pairs = "".join(f"{_SEPARATOR}{key}={value}" for key, value in extensions.items())
        self._message = f"n,,{_SEPARATOR}auth=Bearer {token}{pairs}{_SEPARATOR * 2}".encode()
        self.complete = False
        self._refused = False

    def initial_response(self) -> bytes:
        return self._message

    def evaluate_challenge(self, token: bytes) -> bytes | None:
        if self._refused:
            raise SaslAuthenticationError("the server went on after refusing the token")
        if token:
            self._refused = True
            return _SEPARATOR.encode()
        self.complete = True
        return None
