"""The client side of SASL, Kafka's SaslClientAuthenticator sans-I/O: one exchange that the
broker's connections to the other brokers (``network.client``) and the tools' blocking kio
connections (``spark.connection``) drive alike, each with its own transport::

    exchange = SaslExchange(login, connection.versions, address)
    request = exchange.first_request()
    while request is not None:
        request = exchange.on_response(send_and_receive(request))

Kafka's sequence after ApiVersions: SaslHandshake v1 naming the mechanism, then
SaslAuthenticate (v1+: an error message and the session lifetime) with the mechanism's
tokens until it is complete; a refusal, or answers that do not complete the mechanism (a
wrong SCRAM signature), raise ``SaslExchangeError`` with the reason. A ``SaslLogin``
(``SaslClientLogin``: a password; ``UnsecuredLogin``: an unsigned token) makes a new
``SaslClient`` (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER) per exchange: a SCRAM nonce is
good once. KIP-368: ``reauthenticate_at`` is when to authenticate again, a random 85-95%
(Kafka's window, so that brokers do not all renew at once) of the session's lifetime after
the last SaslAuthenticate was sent, so never later than the server's reckoning.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from odradek.network.sasl_mechanism import SaslAuthenticationError
from odradek.protocol import schemas
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode

#: SaslHandshake v1 carries the tokens in SaslAuthenticate; v0's bare tokens are not spoken.
SASL_HANDSHAKE_VERSION = 1
#: SaslAuthenticate v1 added the session lifetime (KIP-368); v2 is the flexible form.
SASL_AUTHENTICATE_VERSIONS = (1, 2)
#: The part of a session's lifetime after which the client re-authenticates (Kafka's).
REAUTH_WINDOW = (0.85, 0.95)


class SaslClient(Protocol):
    """One mechanism's side of one exchange. The client speaks first (``initial_response``);
    each server token gets its next one (``evaluate_challenge``: None when it has nothing
    more to send, SaslAuthenticationError for an unacceptable token) until it has accepted
    the server's last one (SCRAM's server signature) and is ``complete``."""

    @property
    def complete(self) -> bool: ...

    def initial_response(self) -> bytes: ...

    def evaluate_challenge(self, token: bytes) -> bytes | None: ...


class SaslLogin(Protocol):
    """A mechanism and the credentials of ``username``: a new client for each exchange."""

    @property
    def mechanism(self) -> str: ...

    @property
    def username(self) -> str: ...

    def new_client(self) -> SaslClient: ...


class SaslExchangeError(Exception):
    """The server refused the login, or its answers do not complete the mechanism."""


class SaslExchange:
    """One authentication on one connection: a handshake, then the mechanism's rounds."""

    def __init__(
        self,
        login: SaslLogin,
        versions: Mapping[int, tuple[int, int]],
        address: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._login, self._address, self._clock = login, address, clock
        handshake = _newest(versions, ApiKey.SASL_HANDSHAKE, (SASL_HANDSHAKE_VERSION,) * 2)
        authenticate = _newest(versions, ApiKey.SASL_AUTHENTICATE, SASL_AUTHENTICATE_VERSIONS)
        if handshake is None or authenticate is None:
            raise SaslExchangeError(
                f"{address} does not serve SaslHandshake v1 and SaslAuthenticate v1+"
            )
        self._handshake = schemas.request_module(ApiKey.SASL_HANDSHAKE, handshake)
        self._authenticate = schemas.request_module(ApiKey.SASL_AUTHENTICATE, authenticate)
        self._client: SaslClient | None = None
        self._sent_at = 0.0
        #: clock() after which the session is to be renewed; None when it has no lifetime.
        self.reauthenticate_at: float | None = None

    def first_request(self) -> Any:
        return schemas.build(self._handshake.SaslHandshakeRequest, mechanism=self._login.mechanism)

    def on_response(self, response: Any) -> Any | None:
        """The next request after ``response``; None once authenticated."""
        mechanism, address = self._login.mechanism, self._address
        error = ErrorCode(response.error_code).name.upper()
        if self._client is None:
            if response.error_code != ErrorCode.none:
                enabled = ", ".join(response.mechanisms) or "none"
                raise SaslExchangeError(
                    f"{address} refused SASL mechanism {mechanism} ({error}); it enables {enabled}"
                )
            self._client = self._login.new_client()
            return self._authenticate_request(self._client.initial_response())
        if response.error_code != ErrorCode.none:
            raise SaslExchangeError(
                f"authentication as {self._login.username} with {mechanism} to {address} "
                f"failed ({error}): {response.error_message}"
            )
        try:
            token = self._client.evaluate_challenge(bytes(response.auth_bytes))
        except SaslAuthenticationError as e:
            raise SaslExchangeError(
                f"authentication with {mechanism} to {address} failed: {e}"
            ) from None
        if token is not None:
            return self._authenticate_request(token)
        if not self._client.complete:
            raise SaslExchangeError(
                f"{address} ended the {mechanism} exchange before it was complete"
            )
        lifetime_s = response.session_lifetime.total_seconds()
        if lifetime_s > 0:
            self.reauthenticate_at = self._sent_at + lifetime_s * random.uniform(*REAUTH_WINDOW)
        return None

    def _authenticate_request(self, token: bytes) -> Any:
        self._sent_at = self._clock()
        return schemas.build(self._authenticate.SaslAuthenticateRequest, auth_bytes=token)


def _newest(
    versions: Mapping[int, tuple[int, int]], api_key: int, wanted: tuple[int, int]
) -> int | None:
    """The newest version of ``api_key`` in ``wanted`` the server serves, None if none is."""
    low, high = versions.get(api_key, (0, -1))
    chosen = min(high, wanted[1])
    return chosen if chosen >= max(low, wanted[0]) else None
