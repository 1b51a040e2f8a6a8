"""The SASL exchange of one connection, sans-I/O: Kafka's SaslServerAuthenticator.

A connection on a SASL_PLAINTEXT or SASL_SSL listener starts here and reaches the
broker's request handlers only once authenticated. Each received frame goes to
``receive``, which says what to do with it (``SaslStep``): answer it with the bytes
given, hand it to the broker (ApiVersions, so the version list is the broker's own),
and whether to close the connection after the answer. The states are Kafka's:

    handshake-or-versions --ApiVersions--> handshake --SaslHandshake--> authenticate
    handshake-or-versions --SaslHandshake--> authenticate
    authenticate --SaslAuthenticate (until the mechanism completes)--> complete
    any --a failure--> failed (the answer is sent, then the connection closes)

Before authentication only ApiVersions (once, first), SaslHandshake and
SaslAuthenticate are served. Anything else during the handshake closes the
connection without an answer, and during the exchange gets its error response with
ILLEGAL_SASL_STATE before the close, as Kafka does. A mechanism the listener does
not enable gets UNSUPPORTED_SASL_MECHANISM with the enabled list, then the close.

SaslHandshake v1 (every current client) carries the tokens in SaslAuthenticate
requests, whose responses can carry an error message. v0, deprecated in Kafka 4 but
still served, is followed by bare size-prefixed tokens: each frame is a token, each
answer is the server's token, and a failure simply closes the connection.

Re-authentication (KIP-368): with ``connections.max.reauth.ms`` above 0 for the
mechanism, or a credential that expires (an OAUTHBEARER token; the session then ends at
the earlier of the two, as Kafka's), a successful SaslAuthenticate tells the client its
``session_lifetime_ms``,
and the connection (the listener) closes a session that has expired when its next
request comes. Before then the client re-authenticates on the same connection: the
listener gives a SaslHandshake that arrives on an authenticated connection to a new
authenticator made ``for_reauthentication``, which requires the same mechanism (another
one fails at its SaslAuthenticate, as Kafka's REAUTH_BAD_MECHANISM) and the same
principal, and starts a new session. A client whose SaslAuthenticate is v0 cannot
re-authenticate; its connection is closed when its session expires, as Kafka does.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from odradek.network.principal import USER_TYPE, KafkaPrincipal
from odradek.network.sasl_mechanism import InvalidCredentials, SaslAuthenticationError, SaslServer
from odradek.protocol import schemas
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.error_response import error_response
from odradek.protocol.errors import ErrorCode
from odradek.protocol.header import parse_request_header, peek_api, response_header

log = logging.getLogger(__name__)

#: The versions Kafka 4 serves (SaslHandshake v0 is deprecated, still served).
SASL_HANDSHAKE_VERSIONS = (0, 1)
SASL_AUTHENTICATE_VERSIONS = (0, 2)


@dataclass(frozen=True, slots=True)
class SaslStep:
    """What the connection does with one received frame."""

    #: Bytes to send back (a response without its size prefix), or None.
    response: bytes | None = None
    #: Hand the frame to the broker's request handlers instead (ApiVersions).
    dispatch: bool = False
    #: Close the connection once ``response`` has been sent.
    close: bool = False
    #: Why the connection closes, for the log (a failed authentication's reason).
    reason: str = ""


class SaslServerAuthenticator:
    """One connection's authentication; ``principal`` is set once it is complete."""

    def __init__(
        self,
        enabled_mechanisms: tuple[str, ...],
        new_server: Callable[[str], SaslServer],
        max_reauth_ms: Callable[[str], int] = lambda mechanism: 0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._enabled = enabled_mechanisms
        self._new_server = new_server
        self._max_reauth_ms = max_reauth_ms
        #: Wall-clock seconds, against which a credential's expiration is measured.
        self._clock = clock
        self._server: SaslServer | None = None
        self._raw_tokens = False  # SaslHandshake v0: tokens without Kafka headers
        self.state = "handshake-or-versions"
        self.principal: KafkaPrincipal | None = None
        #: The mechanism chosen by the handshake.
        self.mechanism = ""
        #: Set when complete: how long the session lasts, told to the client (KIP-368).
        self.session_lifetime_ms = 0
        #: Set when complete: whether the session ends after ``session_lifetime_ms`` (else it
        #: lasts as long as the connection). A credential already expired within the allowed
        #: clock skew makes a session of 0 ms that does expire: the next request closes it.
        self.session_expires = False
        #: Re-authentication: the session being renewed (its mechanism and principal).
        self._renewing: tuple[str, KafkaPrincipal] | None = None

    @property
    def renewing(self) -> bool:
        """Whether this exchange re-authenticates an authenticated connection."""
        return self._renewing is not None

    def for_reauthentication(self) -> SaslServerAuthenticator:
        """A new exchange on this authenticated connection, which must keep its mechanism
        and principal (the handshake is its first request; no ApiVersions before it)."""
        if self.principal is None:
            raise RuntimeError("only an authenticated connection re-authenticates")
        renewal = SaslServerAuthenticator(
            self._enabled, self._new_server, self._max_reauth_ms, self._clock
        )
        renewal._renewing = (self.mechanism, self.principal)
        renewal.state = "handshake"
        return renewal

    @property
    def complete(self) -> bool:
        return self.state == "complete"

    def receive(self, frame: memoryview) -> SaslStep:
        if self.state in ("complete", "failed"):
            raise RuntimeError(f"no frame is expected in SASL state {self.state}")
        if self._raw_tokens:
            return self._raw_token(bytes(frame))
        try:
            api_key, api_version, correlation_id = peek_api(frame)
        except ValueError:
            return self._fail("a request shorter than a Kafka request header")
        if self.state in ("authenticate", "reauth-bad-mechanism"):
            return self._authenticate(frame, api_key, api_version, correlation_id)
        if api_key == ApiKey.API_VERSIONS and self.state == "handshake-or-versions":
            self.state = "handshake"
            return SaslStep(dispatch=True)
        if api_key != ApiKey.SASL_HANDSHAKE:
            return self._fail(
                f"Unexpected Kafka request of type {_name(api_key)} during SASL handshake."
            )
        return self._handshake(frame, api_version, correlation_id)

    # -- SaslHandshake ---------------------------------------------------------------------

    def _handshake(self, frame: memoryview, api_version: int, correlation_id: int) -> SaslStep:
        request = _decode(frame, ApiKey.SASL_HANDSHAKE, api_version, SASL_HANDSHAKE_VERSIONS)
        if request is None:
            return self._fail(f"malformed or unsupported SaslHandshake v{api_version} request")
        mechanism = request.mechanism
        enabled = mechanism in self._enabled
        module = schemas.response_module(ApiKey.SASL_HANDSHAKE, api_version)
        answer = _encode(
            ApiKey.SASL_HANDSHAKE,
            api_version,
            correlation_id,
            schemas.build(
                module.SaslHandshakeResponse,
                error_code=ErrorCode.none if enabled else ErrorCode.unsupported_sasl_mechanism,
                mechanisms=self._enabled,
            ),
        )
        if not enabled:
            return self._fail(f"Unsupported SASL mechanism {mechanism}", answer)
        self._server = self._new_server(mechanism)
        self.mechanism = mechanism
        self._raw_tokens = api_version == 0
        self.state = "authenticate"
        if self._renewing is not None and mechanism != self._renewing[0]:
            self.state = "reauth-bad-mechanism"  # refused at the SaslAuthenticate, as Kafka
        return SaslStep(answer)

    # -- SaslAuthenticate ------------------------------------------------------------------

    def _authenticate(
        self, frame: memoryview, api_key: int, api_version: int, correlation_id: int
    ) -> SaslStep:
        if api_key != ApiKey.SASL_AUTHENTICATE:
            reason = (
                f"Unexpected Kafka request of type {_name(api_key)} during SASL authentication."
            )
            return self._fail(reason, _illegal_state_answer(frame, api_key, api_version))
        request = _decode(frame, api_key, api_version, SASL_AUTHENTICATE_VERSIONS)
        if request is None:
            return self._fail(f"malformed or unsupported SaslAuthenticate v{api_version} request")
        module = schemas.response_module(api_key, api_version)
        server = self._server
        assert server is not None

        def answer(error: ErrorCode, message: str | None, token: bytes) -> bytes:
            response = schemas.build(
                module.SaslAuthenticateResponse,
                error_code=error,
                error_message=message,
                auth_bytes=token,
                session_lifetime=self.session_lifetime_ms,
            )
            return _encode(api_key, api_version, correlation_id, response)

        try:
            if self.state == "reauth-bad-mechanism":
                raise SaslAuthenticationError(
                    f"SASL mechanism '{self.mechanism}' requested by client is not supported "
                    f"for re-authentication of mechanism '{self._renewing and self._renewing[0]}'"
                )
            token = server.evaluate(bytes(request.auth_bytes))
            self._maybe_complete(server)
        except (SaslAuthenticationError, InvalidCredentials) as e:
            message = (
                str(e)
                if isinstance(e, SaslAuthenticationError)
                else "Authentication failed during authentication due to invalid credentials "
                f"with SASL mechanism {server.mechanism}"
            )
            return self._fail(str(e), answer(ErrorCode.sasl_authentication_failed, message, b""))
        return SaslStep(answer(ErrorCode.none, None, token))

    def _raw_token(self, token: bytes) -> SaslStep:
        server = self._server
        assert server is not None
        try:
            answer = server.evaluate(token)
            self._maybe_complete(server)
        except (SaslAuthenticationError, InvalidCredentials) as e:
            return self._fail(str(e))
        return SaslStep(answer)

    def _maybe_complete(self, server: SaslServer) -> None:
        """On success: the principal (the same one when renewing) and the session's lifetime."""
        if not server.complete:
            return
        principal = KafkaPrincipal(USER_TYPE, server.authorization_id)
        if self._renewing is not None and principal != self._renewing[1]:
            raise SaslAuthenticationError(
                f"Cannot change principals during re-authentication from {self._renewing[1]}: "
                f"{principal}"
            )
        self.principal = principal
        max_reauth_ms = max(0, self._max_reauth_ms(server.mechanism))
        expiration_ms = server.credential_expiration_ms
        self.session_expires = max_reauth_ms > 0 or expiration_ms is not None
        if expiration_ms is not None:  # Kafka: the earlier of the credential's end and the cap
            remaining = max(0, expiration_ms - int(self._clock() * 1000))
            self.session_lifetime_ms = min(remaining, max_reauth_ms or remaining)
        else:
            self.session_lifetime_ms = max_reauth_ms
        self.state = "complete"

    def _fail(self, reason: str, answer: bytes | None = None) -> SaslStep:
        self.state = "failed"
        return SaslStep(answer, close=True, reason=reason)


def _name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return str(api_key)


def _decode(frame: memoryview, api_key: int, api_version: int, versions: tuple[int, int]) -> Any:
    """The kio request, or None when it is of a version not served or does not decode."""
    if not versions[0] <= api_version <= versions[1]:
        return None
    try:
        header = parse_request_header(frame, schemas.is_flexible(api_key, api_version))
        return schemas.decode_request(api_key, api_version, frame[header.size :])
    except Exception:  # any decoding failure: not a valid request
        return None


def _encode(api_key: int, api_version: int, correlation_id: int, response: object) -> bytes:
    flexible = schemas.is_flexible(api_key, api_version)
    return response_header(api_key, correlation_id, flexible) + schemas.encode(response)


def _illegal_state_answer(frame: memoryview, api_key: int, api_version: int) -> bytes | None:
    """The request's own error response with ILLEGAL_SASL_STATE, when it decodes."""
    try:
        flexible = schemas.is_flexible(api_key, api_version)
        header = parse_request_header(frame, flexible)
        request = schemas.decode_request(api_key, api_version, frame[header.size :])
        response = error_response(
            schemas.response_schema(api_key, api_version), request, ErrorCode.illegal_sasl_state
        )
        return response_header(api_key, header.correlation_id, flexible) + schemas.encode(response)
    except Exception:  # an unknown API or undecodable bytes: close without an answer
        return None
