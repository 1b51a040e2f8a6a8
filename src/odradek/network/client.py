"""An asyncio connection from this broker to another one (followers to their leaders).

One TCP stream, one request at a time: the replica fetcher has a single request in
flight per connection, as Kafka's fetcher threads do, so responses need no matching
beyond a check of the correlation id. Frames are built and read by
``protocol.client_codec``; the API versions both sides speak are agreed once with
ApiVersions v0 when the connection opens.

The connection speaks the inter-broker listener's security protocol
(``ClientSecurity``): TLS from the first byte when it has a client context, then,
with SASL, Kafka's client sequence after ApiVersions: SaslHandshake v1 naming the
mechanism, and SaslAuthenticate (v1 or later, the versions that carry an error
message and the session lifetime) until the mechanism is complete. A refusal is
``SaslAuthenticationFailed`` with the server's reason, so the broker's log says why
replication does not happen.

Re-authentication (KIP-368): when the server gives the session a lifetime, the
connection authenticates again on the same stream before the next request once a
random 85-95% of that lifetime has passed (Kafka's client takes the same window, so
brokers sharing a leader do not all renew at once). The lifetime is counted from
before the last SaslAuthenticate was sent, so the estimate is never later than the
server's. The server serves a SaslHandshake on an authenticated connection even after
the session expired, so a connection idle past its lifetime renews rather than failing.
"""

from __future__ import annotations

import asyncio
import random
import socket
import struct
import time
from typing import Any

from odradek.network.client_security import PLAINTEXT, ClientSecurity
from odradek.network.sasl_mechanism import SaslAuthenticationError
from odradek.protocol import schemas
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.client_codec import (
    API_VERSIONS,
    client_id_field,
    decode_response,
    encode_request,
    response_correlation_id,
)
from odradek.protocol.errors import ErrorCode

_SIZE = struct.Struct(">i")
#: SaslHandshake v1 carries the tokens in SaslAuthenticate; v0's bare tokens are not spoken.
SASL_HANDSHAKE_VERSION = 1
#: SaslAuthenticate v1 added the session lifetime (KIP-368); v2 is the flexible form.
SASL_AUTHENTICATE_VERSIONS = (1, 2)
#: The part of a session's lifetime after which the client re-authenticates (Kafka's).
REAUTH_WINDOW = (0.85, 0.95)


class BrokerConnectionError(ConnectionError):
    """The other broker could not be reached, closed the connection, or answered nonsense."""


class SaslAuthenticationFailed(BrokerConnectionError):
    """The other broker refused this broker's SASL login (the message has its reason)."""


class AsyncBrokerConnection:
    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        client_id: str,
        security: ClientSecurity = PLAINTEXT,
        address: str = "",
    ) -> None:
        self._reader, self._writer = reader, writer
        self._client_id = client_id_field(client_id)
        self._correlation_id = 0
        self._security = security
        self._address = address
        self.versions: dict[int, tuple[int, int]] = {}
        #: time.monotonic() after which the SASL session is renewed before a request.
        self._reauthenticate_at: float | None = None

    @classmethod
    async def connect(
        cls,
        host: str,
        port: int,
        client_id: str,
        timeout_s: float,
        security: ClientSecurity = PLAINTEXT,
    ) -> AsyncBrokerConnection:
        address = f"{host}:{port}"
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(host, port, ssl=security.ssl_context), timeout_s
            )
        except (OSError, TimeoutError) as exc:  # ssl.SSLError, a failed TLS handshake, is one
            raise BrokerConnectionError(f"cannot connect to {address}: {exc}") from None
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        connection = cls(reader, writer, client_id, security, address)
        try:
            response = await connection._send(
                schemas.build(schemas.request_schema(API_VERSIONS, 0)), timeout_s
            )
            if response.error_code != ErrorCode.none:
                raise BrokerConnectionError(f"ApiVersions to {address}: {response.error_code}")
            connection.versions = {
                int(v.api_key): (int(v.min_version), int(v.max_version)) for v in response.api_keys
            }
            if security.sasl is not None:
                await connection._authenticate(timeout_s)
        except BaseException:
            connection.close()
            raise
        return connection

    def version(self, api_key: int, highest: int) -> int | None:
        """The newest version of ``api_key`` both sides speak, None if there is none."""
        low, high = self.versions.get(api_key, (0, -1))
        chosen = min(high, highest)
        return chosen if chosen >= low else None

    async def request(self, request: Any, timeout_s: float) -> Any:
        """Send ``request`` (a kio entity) and return its decoded response (re-authenticating
        first when the SASL session is due for renewal)."""
        if self._reauthenticate_at is not None and time.monotonic() >= self._reauthenticate_at:
            try:
                await self._authenticate(timeout_s)
            except BaseException:
                self.close()
                raise
        return await self._send(request, timeout_s)

    async def _authenticate(self, timeout_s: float) -> None:
        login = self._security.sasl
        assert login is not None
        handshake = self.version(ApiKey.SASL_HANDSHAKE, SASL_HANDSHAKE_VERSION)
        authenticate = self.version(ApiKey.SASL_AUTHENTICATE, SASL_AUTHENTICATE_VERSIONS[1])
        if handshake != SASL_HANDSHAKE_VERSION or (
            authenticate is None or authenticate < SASL_AUTHENTICATE_VERSIONS[0]
        ):
            raise SaslAuthenticationFailed(
                f"{self._address} does not serve SaslHandshake v1 and SaslAuthenticate v1+"
            )
        module = schemas.request_module(ApiKey.SASL_HANDSHAKE, handshake)
        response = await self._send(
            schemas.build(module.SaslHandshakeRequest, mechanism=login.mechanism), timeout_s
        )
        if response.error_code != ErrorCode.none:
            raise SaslAuthenticationFailed(
                f"{self._address} refused SASL mechanism {login.mechanism} "
                f"({ErrorCode(response.error_code).name.upper()}); it enables "
                f"{', '.join(response.mechanisms) or 'none'}"
            )
        module = schemas.request_module(ApiKey.SASL_AUTHENTICATE, authenticate)
        client = login.new_client()
        token: bytes | None = client.initial_response()
        started = time.monotonic()
        while token is not None:
            started = time.monotonic()
            response = await self._send(
                schemas.build(module.SaslAuthenticateRequest, auth_bytes=token), timeout_s
            )
            if response.error_code != ErrorCode.none:
                raise SaslAuthenticationFailed(
                    f"authentication as {login.username} with {login.mechanism} to "
                    f"{self._address} failed ({ErrorCode(response.error_code).name.upper()}): "
                    f"{response.error_message}"
                )
            try:
                token = client.evaluate_challenge(bytes(response.auth_bytes))
            except SaslAuthenticationError as e:
                raise SaslAuthenticationFailed(
                    f"authentication with {login.mechanism} to {self._address} failed: {e}"
                ) from None
        if not client.complete:
            raise SaslAuthenticationFailed(
                f"{self._address} ended the {login.mechanism} exchange before it was complete"
            )
        lifetime_s = response.session_lifetime.total_seconds()
        self._reauthenticate_at = (
            started + lifetime_s * random.uniform(*REAUTH_WINDOW) if lifetime_s > 0 else None
        )

    async def _send(self, request: Any, timeout_s: float) -> Any:
        self._correlation_id += 1
        correlation_id = self._correlation_id
        try:
            self._writer.write(encode_request(request, correlation_id, self._client_id))
            await self._writer.drain()
            size = _SIZE.unpack(await asyncio.wait_for(self._reader.readexactly(4), timeout_s))[0]
            frame = await asyncio.wait_for(self._reader.readexactly(size), timeout_s)
        except (OSError, asyncio.IncompleteReadError, TimeoutError) as exc:
            self.close()
            raise BrokerConnectionError(f"request failed: {exc!r}") from None
        if response_correlation_id(frame) != correlation_id:
            self.close()
            raise BrokerConnectionError("the broker answered another request")
        return decode_response(request, frame)

    def close(self) -> None:
        self._writer.close()
