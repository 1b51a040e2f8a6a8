"""An asyncio connection from this broker to another one (followers to their leaders).

One TCP stream, one request at a time: the replica fetcher has a single request in
flight per connection, as Kafka's fetcher threads do, so responses need no matching
beyond a check of the correlation id. Frames are built and read by
``protocol.client_codec``; the API versions both sides speak are agreed once with
ApiVersions v0 when the connection opens.

Responses are received in place (``ResponseStream``, an ``asyncio.BufferedProtocol``
around the listener's ``FrameReader``): a follower's fetch response, a megabyte of
records each round, goes from the socket into a buffer of its own size, instead of
through a stream reader's buffer and a copy out of it.

The connection speaks the inter-broker listener's security protocol
(``ClientSecurity``): TLS from the first byte when it has a client context, then,
with SASL, Kafka's client sequence after ApiVersions (``sasl_client.SaslExchange``). A
refusal is ``SaslAuthenticationFailed`` with the server's reason, so the broker's log
says why replication does not happen.

Re-authentication (KIP-368): when the server gives the session a lifetime, the
connection runs a new exchange on the same stream before the first request after the
exchange's ``reauthenticate_at``. The server serves a SaslHandshake on an authenticated
connection even after the session expired, so a connection idle past its lifetime
renews rather than failing.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from odradek.network.client_security import PLAINTEXT, ClientSecurity
from odradek.network.framing import FrameReader
from odradek.network.sasl_client import SaslExchange, SaslExchangeError
from odradek.protocol import schemas
from odradek.protocol.client_codec import (
    API_VERSIONS,
    RequestKind,
    client_id_field,
    decode_response,
    frame_request,
    response_correlation_id,
)
from odradek.protocol.errors import ErrorCode
from odradek.protocol.frames import InvalidFrame

#: The largest response accepted: the protocol's own limit (a size prefix is an int32).
MAX_RESPONSE_BYTES = 2**31 - 1


class BrokerConnectionError(ConnectionError):
    """The other broker could not be reached, closed the connection, or answered nonsense."""


class SaslAuthenticationFailed(BrokerConnectionError):
    """The other broker refused this broker's SASL login (the message has its reason)."""


class ResponseStream(asyncio.BufferedProtocol):
    """The connection's bytes: response frames received in place, requests written with
    flow control. A broken stream fails the waiting call with BrokerConnectionError."""

    transport: asyncio.Transport

    def __init__(self) -> None:
        self._frames = FrameReader(MAX_RESPONSE_BYTES)
        self._loop = asyncio.get_running_loop()
        #: Set while a call waits for a frame or for the transport to take more bytes.
        self._waiter: asyncio.Future[None] | None = None
        self._writable = True
        self._broken: str | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._frames.buffer()

    def buffer_updated(self, nbytes: int) -> None:
        try:
            self._frames.received(nbytes)
        except InvalidFrame as e:
            self._break(f"unreadable response: {e}")
            self.transport.abort()
            return
        if self._frames.frames:
            self._wake()

    def eof_received(self) -> bool:
        self._break("the broker closed the connection")
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._break(f"connection lost: {exc!r}" if exc else "connection closed")

    def pause_writing(self) -> None:
        self._writable = False

    def resume_writing(self) -> None:
        self._writable = True
        self._wake()

    def _break(self, reason: str) -> None:
        if self._broken is None:
            self._broken = reason
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def _wait(self) -> None:
        if self._broken is not None:
            raise BrokerConnectionError(self._broken)
        self._waiter = self._loop.create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    async def write(self, data: bytes) -> None:
        """Hand ``data`` to the transport, waiting while its buffer is above the high-water mark."""
        if self._broken is not None:
            raise BrokerConnectionError(self._broken)
        self.transport.write(data)
        while not self._writable:
            await self._wait()

    async def next_frame(self) -> memoryview:
        """The next response frame (read-only, without its size prefix)."""
        while not self._frames.frames:
            await self._wait()
        return self._frames.take()


class RegisteredBroker(Protocol):
    """A broker as the metadata registers it (metadata's BrokerImage)."""

    @property
    def node_id(self) -> int: ...

    def endpoint(self, listener_name: str) -> tuple[str, int] | None: ...


class AsyncBrokerConnection:
    def __init__(
        self,
        stream: ResponseStream,
        client_id: str,
        security: ClientSecurity = PLAINTEXT,
        address: str = "",
    ) -> None:
        self._stream = stream
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
            transport, stream = await asyncio.wait_for(
                asyncio.get_running_loop().create_connection(
                    ResponseStream, host, port, ssl=security.ssl_context
                ),
                timeout_s,
            )
        except (OSError, TimeoutError) as exc:  # ssl.SSLError, a failed TLS handshake, is one
            raise BrokerConnectionError(f"cannot connect to {address}: {exc}") from None
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        connection = cls(stream, client_id, security, address)
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

    @classmethod
    async def connect_to_node(
        cls,
        brokers: Iterable[RegisteredBroker],
        node_id: int,
        listener: str,
        client_id: str,
        timeout_s: float,
        security: ClientSecurity = PLAINTEXT,
    ) -> AsyncBrokerConnection:
        """``connect`` to broker ``node_id`` of ``brokers`` on its ``listener`` endpoint (the
        inter-broker listener, for one broker calling another)."""
        broker = next((b for b in brokers if b.node_id == node_id), None)
        endpoint = broker.endpoint(listener) if broker is not None else None
        if endpoint is None:
            raise BrokerConnectionError(f"broker {node_id} has no {listener} endpoint registered")
        host, port = endpoint
        return await cls.connect(host, port, client_id, timeout_s, security)

    def version(self, api_key: int, highest: int) -> int | None:
        """The newest version of ``api_key`` both sides speak, None if there is none."""
        low, high = self.versions.get(api_key, (0, -1))
        chosen = min(high, highest)
        return chosen if chosen >= low else None

    async def request(self, request: Any, timeout_s: float) -> Any:
        """Send ``request`` (a kio entity) and return its decoded response (re-authenticating
        first when the SASL session is due for renewal)."""
        return decode_response(request, await self.request_frame(request, timeout_s))

    async def request_frame(self, request: Any, timeout_s: float) -> memoryview:
        """As ``request``, but the response frame undecoded (``client_codec.response_body``
        finds its body), for a caller with a codec of its own."""
        return await self.request_encoded(
            RequestKind.of(request), schemas.encode(request), timeout_s
        )

    async def request_encoded(self, kind: RequestKind, body: bytes, timeout_s: float) -> memoryview:
        """As ``request_frame``, for a request whose body the caller encoded
        (``client_codec.kind_response_body`` finds the response's body)."""
        if self._reauthenticate_at is not None and time.monotonic() >= self._reauthenticate_at:
            try:
                await self._authenticate(timeout_s)
            except BaseException:
                self.close()
                raise
        return await self._send_frame(kind, body, timeout_s)

    async def _authenticate(self, timeout_s: float) -> None:
        login = self._security.sasl
        assert login is not None
        try:
            exchange = SaslExchange(login, self.versions, self._address)
            request = exchange.first_request()
            while request is not None:
                request = exchange.on_response(await self._send(request, timeout_s))
        except SaslExchangeError as e:
            raise SaslAuthenticationFailed(str(e)) from None
        self._reauthenticate_at = exchange.reauthenticate_at

    async def _send(self, request: Any, timeout_s: float) -> Any:
        frame = await self._send_frame(RequestKind.of(request), schemas.encode(request), timeout_s)
        return decode_response(request, frame)

    async def _send_frame(self, kind: RequestKind, body: bytes, timeout_s: float) -> memoryview:
        self._correlation_id += 1
        correlation_id = self._correlation_id
        stream = self._stream
        try:
            await stream.write(frame_request(kind, body, correlation_id, self._client_id))
            async with asyncio.timeout(timeout_s):  # no task per request, as wait_for makes
                frame = await stream.next_frame()
        except (BrokerConnectionError, TimeoutError) as exc:
            self.close()
            raise BrokerConnectionError(f"request failed: {exc!r}") from None
        if response_correlation_id(frame) != correlation_id:
            self.close()
            raise BrokerConnectionError("the broker answered another request")
        return frame

    def close(self) -> None:
        self._stream.transport.close()


class NodeConnections:
    """One connection to each broker this broker calls (transaction markers, transaction
    verification), made on first use; one that failed is dropped (and closed), so the next
    call connects again. Callers that ask for a node while it is being connected to wait for
    that connect rather than making one each (the second would replace the first in the
    cache and leave its socket open)."""

    def __init__(
        self,
        brokers: Callable[[], Iterable[RegisteredBroker]],
        listener: str,
        client_id: str,
        timeout_s: float,
        security: ClientSecurity,
    ) -> None:
        self._brokers = brokers
        self._listener = listener
        self._client_id = client_id
        self._timeout_s = timeout_s
        self._security = security
        self._connections: dict[int, AsyncBrokerConnection] = {}
        #: Connects under way, shared by every caller asking for that node meanwhile.
        self._connecting: dict[int, asyncio.Task[AsyncBrokerConnection]] = {}

    async def get(self, node_id: int) -> AsyncBrokerConnection:
        """The connection to broker ``node_id``, connecting if there is none."""
        connection = self._connections.get(node_id)
        if connection is not None:
            return connection
        connecting = self._connecting.get(node_id)
        if connecting is None:
            connecting = asyncio.get_running_loop().create_task(self._connect(node_id))
            # Its failure is seen even when no caller is left waiting for it.
            connecting.add_done_callback(_seen)
            self._connecting[node_id] = connecting
        # A caller that gives up (cancelled) does not cancel the connect the others wait for.
        return await asyncio.shield(connecting)

    async def _connect(self, node_id: int) -> AsyncBrokerConnection:
        try:
            connection = await AsyncBrokerConnection.connect_to_node(
                self._brokers(),
                node_id,
                self._listener,
                self._client_id,
                self._timeout_s,
                self._security,
            )
        finally:
            if self._connecting.get(node_id) is asyncio.current_task():
                del self._connecting[node_id]
        self._connections[node_id] = connection
        return connection

    def drop(self, node_id: int) -> None:
        """Forget (and close) the connection to ``node_id`` after a failure."""
        connection = self._connections.pop(node_id, None)
        if connection is not None:
            connection.close()

    def close(self) -> None:
        for connecting in self._connecting.values():
            connecting.cancel()
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()


def _seen(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()
