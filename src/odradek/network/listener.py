"""The asyncio listener: accepts connections and answers each one's requests in order.

Every connection is an ``asyncio.BufferedProtocol`` whose bytes are received in
place by a ``FrameReader`` (no copies of request frames) and one request loop (a
task) that dispatches the frames one at a time, as Kafka mutes a channel while its
request is in flight: pipelined requests are answered strictly in order, and a
long-polling fetch holds back only its own connection.

Responses are coalesced: a request that completes without waiting (a Produce with
acks=1, most control requests) only queues its response bytes, and they are
written in one ``send`` when the loop runs out of ready frames, before anything
waits (a long poll), or after ``MAX_BURST`` requests. A client pipelining many
small requests therefore costs one send per batch of requests instead of one per
request, and ``MAX_BURST`` bounds how long one busy connection keeps the event
loop from the others (a fetch woken by an append is answered within a burst, not
after the producer's whole backlog). A response that asks (``EncodedResponse.on_sent``,
the request metrics) learns when its writing started and ended: the wait in ``_out`` is
Kafka's response queue time, the write (or sendfile) its response send time. "Written"
means handed to the socket: ``os.sendfile`` and ``loop.sendfile`` (which waits for the
socket to drain) for file regions, the transport's write for bytes; bytes a full socket
leaves in the transport's buffer are not waited for, as the transport says nothing when
they leave.

Anything wrong with a connection's bytes (a bad size prefix, a malformed header, an
unknown API) closes that connection alone, with a log line.

Connections are accepted by the listener's own accept loop (Kafka's Acceptor),
which consults the broker's shared ``ConnectionQuotas``: at ``max.connections``
(broker-wide or per listener) it waits for a slot before taking the next
connection, and a connection above its address's ``max.connections.per.ip``
(or override) is closed at once.

Request memory is held against the broker's ``MemoryPool`` (``queued.max.request.bytes``,
shared by every listener): a connection charges the pool for the request bytes it
receives and gives them back when the request has been handled or the connection
closes. While the pool is exhausted a connection is muted after its read (its
transport stops reading), and while it is exhausted a read takes at most
``SHORT_READ`` bytes, so the pool is overrun by little besides the one request that
holds the pool's pass (see ``memory_pool``). A muted connection ages like any
other, as in Kafka, whose idle expiry does not look at muting: one that has sent
nothing for ``connections.max.idle.ms`` is closed, so connections stalled in the
middle of requests cannot hold the pool for longer than that.

A response may ask to mute its connection (``EncodedResponse.mute_ms``, a client over its
quota): once it is sent (or before it is sent, ``mute_first``, for a client too old to hold
back by itself) the connection neither reads nor handles anything for that long, as Kafka
mutes a throttled channel; what the client sends meanwhile waits in the socket.

A TLS listener (security protocol SSL) has an ``SslChannel``. Its acceptor
hands each accepted socket to a handshake task of its own, so a client that
connects and says nothing (or speaks plaintext) delays no one else; the
handshake has ``connections.max.idle.ms`` to finish, and a failed one is
logged, as Kafka logs a failed authentication, and closes that socket alone.
The connection's principal is set from the peer's certificate once the
handshake is done, before its first request is read. Responses go out as on
plaintext, except file regions: sendfile cannot pass through TLS, so a region
is read from the file in chunks (``os.pread``) and written to the TLS transport
as it drains. Each chunk is a new bytes object rather than a reused buffer
because the TLS transport may keep a reference to data it has not yet
encrypted; the record bytes are still never decoded, and the plaintext path
keeps sendfile without a check per response (the region sender is chosen
once per connection).

A SASL listener (SASL_PLAINTEXT, or SASL_SSL after the TLS handshake) has a
``SaslChannel``: each connection's frames go to its own sans-I/O
``SaslServerAuthenticator`` until the exchange is complete (ApiVersions is handed to
the broker as usual), and only then to the broker's dispatcher, with the
authenticated ``User:<name>`` on the ConnectionInfo. A failed authentication is
logged with the client's address, as Kafka logs it, and the connection closes once
its answer is sent. After that the request loop has nothing more to check per
request, unless ``connections.max.reauth.ms`` or an expiring credential (an OAUTHBEARER
token) gives the session a lifetime (KIP-368):
then each request is checked against the session's expiry (a closed connection once
it has passed) and a SaslHandshake starts a re-authentication, as Kafka's SocketServer
does.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import socket
import ssl
import time
import types
from collections import deque
from collections.abc import Callable, Coroutine, Generator
from dataclasses import dataclass
from typing import Any, TypeVar

from odradek.network.connection_quotas import ConnectionQuotas
from odradek.network.framing import FrameReader
from odradek.network.memory_pool import MemoryPool
from odradek.network.principal import ANONYMOUS, KafkaPrincipal
from odradek.network.sasl_authenticator import SaslServerAuthenticator
from odradek.network.sasl_channel import SaslChannel
from odradek.network.ssl_channel import SslChannel
from odradek.network.unmute import MAX_IN_FLIGHT, ChannelUnmuted
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.frames import SIZE_PREFIX_LEN, InvalidFrame, size_prefix
from odradek.protocol.header import peek_api
from odradek.protocol.response import EncodedResponse, Region

log = logging.getLogger(__name__)
_T = TypeVar("_T")
#: What a request's handling gives the request loop: a response, none (acks=0), or the task
#: of a request that unmuted the connection and answers later.
_Answer = EncodedResponse | asyncio.Task[EncodedResponse | None] | None

#: Requests answered back to back before the connection yields the event loop to others.
MAX_BURST = 16
#: Received but unanswered request bytes above which a connection stops reading (TCP backpressure).
MAX_QUEUED_BYTES = 4 * 1024 * 1024
#: Most bytes one read takes while request memory is exhausted (before the connection is muted).
SHORT_READ = 4 * 1024
#: Bytes of a file region read and written to a TLS transport at once.
TLS_REGION_CHUNK = 256 * 1024


class CloseConnection(Exception):
    """Raised by a dispatcher when the request cannot be answered and the connection must close."""


@dataclass(frozen=True, slots=True)
class ConnectionInfo:
    """What a handler may know about the connection a request came on."""

    connection_id: str
    peer_host: str
    peer_port: int
    listener_name: str
    #: The listener's protocol in listener.security.protocol.map (PLAINTEXT, SSL, SASL_*).
    security_protocol: str = "PLAINTEXT"
    #: Who the peer is, for authorization and quotas: User:ANONYMOUS until authenticated.
    principal: KafkaPrincipal = ANONYMOUS


Dispatch = Callable[[ConnectionInfo, memoryview], Coroutine[Any, Any, EncodedResponse | None]]


@dataclass(frozen=True, slots=True)
class ListenerConfig:
    host: str
    port: int
    listener_name: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"
    socket_request_max_bytes: int = 104857600
    connections_max_idle_ms: int = 600000
    #: Pending connections the kernel queues while the acceptor waits for a slot.
    backlog: int = 1024


class Listener:
    """One listening socket and its connections."""

    def __init__(
        self,
        config: ListenerConfig,
        dispatch: Dispatch,
        quotas: ConnectionQuotas | None = None,
        memory_pool: MemoryPool | None = None,
        ssl_channel: SslChannel | None = None,
        sasl_channel: SaslChannel | None = None,
    ) -> None:
        protocol = config.security_protocol
        if (ssl_channel is None) == (protocol in ("SSL", "SASL_SSL")):
            raise ValueError(
                f"listener {config.listener_name} ({protocol}): "
                "an SslChannel is needed for SSL and SASL_SSL and only for them"
            )
        if (sasl_channel is None) == protocol.startswith("SASL_"):
            raise ValueError(
                f"listener {config.listener_name} ({protocol}): "
                "a SaslChannel is needed for SASL_PLAINTEXT and SASL_SSL and only for them"
            )
        #: The mechanisms and user stores of a SASL listener.
        self.sasl_channel = sasl_channel
        self.config = config
        #: The TLS context and principal mapping of an SSL listener; replaced by ``update_ssl``.
        self.ssl_channel = ssl_channel
        self._dispatch = dispatch
        #: Shared by every listener of a broker (max.connections counts them all); unlimited by default.
        self.quotas = quotas if quotas is not None else ConnectionQuotas()
        #: Shared by every listener of a broker; queued.max.request.bytes's default when not given.
        self.memory_pool = memory_pool if memory_pool is not None else MemoryPool()
        self._acceptor: asyncio.Task[None] | None = None
        self._socket: socket.socket | None = None
        self._connections: set[_Connection] = set()
        self._handshakes: set[asyncio.Task[None]] = set()
        self._stopping = False
        self._next_id = 0

    def bind(self) -> int:
        """Bind the socket (OSError such as EADDRINUSE if it cannot be) and return the bound port.

        Bound before the broker loads its logs, so a port in use stops start-up
        early, and so that port 0 resolves to the real port the broker advertises.
        """
        infos = socket.getaddrinfo(
            self.config.host or None,
            self.config.port,
            type=socket.SOCK_STREAM,
            flags=socket.AI_PASSIVE,
        )
        family, kind, proto, _, address = infos[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
        except OSError:
            sock.close()
            raise
        self._socket = sock
        port: int = sock.getsockname()[1]
        return port

    async def start(self) -> None:
        """Start accepting connections on the bound socket."""
        if self._socket is None:
            self.bind()
        assert self._socket is not None
        self._socket.listen(self.config.backlog)
        self._socket.setblocking(False)
        self._acceptor = asyncio.create_task(
            self._accept_loop(), name=f"acceptor-{self.config.listener_name}"
        )

    async def _accept_loop(self) -> None:
        """Kafka's Acceptor: accept, wait for a connection slot, apply the per-address limit, serve."""
        loop = asyncio.get_running_loop()
        name = self.config.listener_name
        listening = self._socket
        assert listening is not None, "start() binds the socket before accepting"
        while True:
            try:
                sock, address = await loop.sock_accept(listening)
            except (
                OSError
            ) as e:  # e.g. EMFILE: the connection stays in the backlog; try again shortly
                log.error("listener %s cannot accept a connection: %s", name, e)
                await asyncio.sleep(0.1)
                continue
            try:
                await self.quotas.wait_for_slot(name)
                info = self._admit(address[0], address[1])
            except BaseException:
                sock.close()
                raise
            if info is None:
                sock.close()
                continue
            connection = _Connection(self, info)
            if self.ssl_channel is not None:
                task = asyncio.create_task(self._handshake(connection, sock, self.ssl_channel))
                self._handshakes.add(task)
                task.add_done_callback(self._handshakes.discard)
                continue
            try:
                await loop.connect_accepted_socket(lambda: connection, sock)  # noqa: B023 - called now
            except OSError as e:
                log.info("connection %s failed at once: %s", info.connection_id, e)
                sock.close()
                if not connection.counted:
                    self._release(info)

    async def _handshake(
        self, connection: _Connection, sock: socket.socket, channel: SslChannel
    ) -> None:
        """TLS handshake of one accepted socket; the connection serves once it is done."""
        info = connection.info
        try:
            await asyncio.get_running_loop().connect_accepted_socket(
                lambda: connection,
                sock,
                ssl=channel.context,
                ssl_handshake_timeout=self.config.connections_max_idle_ms / 1000,
            )
        except (OSError, ValueError) as e:  # ssl.SSLError, a reset, the handshake timeout
            log.info(
                "Failed authentication with %s (channelId=%s) (SSL handshake failed: %s)",
                info.peer_host,
                info.connection_id,
                e,
            )
        except asyncio.CancelledError:
            pass
        finally:
            if not connection.counted:
                sock.close()
                self._release(info)

    async def stop(self, timeout: float = 30.0) -> None:
        """Stop accepting, let in-flight requests finish and be answered, close every connection."""
        self._stopping = True
        if self._acceptor is not None:
            self._acceptor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._acceptor
            self._acceptor = None
        for task in list(self._handshakes):
            task.cancel()
        if self._handshakes:
            await asyncio.wait(list(self._handshakes))
        for connection in list(self._connections):
            connection.stop()
        tasks = [c.task for c in self._connections if c.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)
        for connection in list(self._connections):
            connection.abort(force=True)
        if self._socket is not None:
            self._socket.close()
            self._socket = None

    def _admit(self, host: str, port: int) -> ConnectionInfo | None:
        """A new connection's identity, or None when it must be refused (closed at once)."""
        if self._stopping:
            return None
        if not self.quotas.admit(self.config.listener_name, host):
            log.info(
                "Rejected connection from %s, address already has the configured maximum of %d connections.",
                host,
                self.quotas.max_for(host),
            )
            return None
        self._next_id += 1
        return ConnectionInfo(
            f"{host}:{port}-{self._next_id}",
            host,
            port,
            self.config.listener_name,
            self.config.security_protocol,
        )

    def update_ssl(self, channel: SslChannel) -> None:
        """Serve new connections with ``channel`` (a rotated key store); open ones keep theirs."""
        if self.ssl_channel is None:
            raise ValueError(f"listener {self.config.listener_name} is not an SSL listener")
        self.ssl_channel = channel

    def _release(self, info: ConnectionInfo) -> None:
        self.quotas.release(info.listener_name, info.peer_host)

    @property
    def connection_count(self) -> int:
        """Open connections (Kafka's connection-count of this listener)."""
        return len(self._connections)

    @property
    def connections_created(self) -> int:
        """Connections admitted since start (connection-creation-total); the closed ones are
        the difference from ``connection_count``."""
        return self._next_id


class _Connection(asyncio.BufferedProtocol):
    """One client connection: frames in through a FrameReader, responses out in request order."""

    #: Set by connection_made, which the loop calls before any other callback; the listener
    #: tracks the connection and starts its request loop and idle timer only from there.
    _transport: asyncio.Transport

    def __init__(self, listener: Listener, info: ConnectionInfo) -> None:
        self._listener = listener
        self._reader = FrameReader(listener.config.socket_request_max_bytes)
        self._pool = listener.memory_pool
        self._accounted = 0  # the reader's ``charged`` already charged to the pool
        self._held = 0  # request bytes charged to the pool and not yet given back
        self._loop = asyncio.get_running_loop()
        self._socket_fd = -1
        self.info = info
        #: Set once the listener tracks the connection; its quota slot is then released when it closes.
        self.counted = False
        self.task: asyncio.Task[None] | None = None
        #: Set while the request loop waits for frames, for writability or for the stream's end.
        self._wakeup: asyncio.Future[None] | None = None
        self._busy = False  # a request is being handled
        #: Requests that unmuted the connection (``unmute``) and wait, oldest first.
        self._in_flight: deque[asyncio.Task[EncodedResponse | None]] = deque()
        self._closed = False  # the transport is gone or going
        self._eof = False  # the peer has finished sending
        self._reading = True  # the transport is reading (neither reason below holds)
        self._backlogged = False  # too many received requests wait to be handled
        self._pool_muted = False  # waiting for request memory
        self._throttled = False  # muted for a client quota's throttle time
        self._writable = True  # the transport's write buffer is below its high-water mark
        self._out: list[bytes | memoryview] = []  # response bytes not yet given to the transport
        #: The ``on_sent`` of responses whose last bytes wait in ``_out``, with the time their
        #: writing started if a file region of theirs was already sent (else the next flush).
        self._unsent: list[tuple[Callable[[float, float], None], float | None]] = []
        self._tls = False  # set once a TLS handshake has made the connection
        #: How file regions are sent: sendfile on plaintext, read and written through TLS.
        self._send_region = self._sendfile
        self._last_active = self._loop.time()
        self._idle_timer: asyncio.TimerHandle | None = None
        #: The SASL exchange, on a SASL listener until it is complete.
        self._sasl = (
            listener.sasl_channel.authenticator() if listener.sasl_channel is not None else None
        )
        #: An authenticated session that expires (KIP-368), and when (loop time).
        self._session: SaslServerAuthenticator | None = None
        self._session_expires = 0.0

    # -- protocol callbacks --------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self.counted = True
        self._listener._connections.add(self)
        ssl_object = transport.get_extra_info("ssl_object")
        if ssl_object is not None:
            self._tls = True
            self._send_region = self._send_region_through_tls
            if self._sasl is None and not self._authenticate(ssl_object):
                return  # on SASL_SSL the principal comes from SASL, as in Kafka
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._socket_fd = sock.fileno()
        self.task = self._loop.create_task(self._serve())
        self._arm_idle_timer(self._listener.config.connections_max_idle_ms / 1000)

    def _authenticate(self, ssl_object: ssl.SSLObject) -> bool:
        """Set the principal from the peer's certificate; False (and closed) when it has none."""
        channel = self._listener.ssl_channel
        assert channel is not None
        try:
            principal = channel.principal(ssl_object)
        except ValueError as e:  # no mapping rule applies, or an unreadable certificate
            log.info(
                "Failed authentication with %s (channelId=%s) (%s)",
                self.info.peer_host,
                self.info.connection_id,
                e,
            )
            self.abort()
            return False
        self.info = dataclasses.replace(self.info, principal=principal)
        log.debug(
            "connection %s on listener %s: %s, principal %s",
            self.info.connection_id,
            self.info.listener_name,
            ssl_object.version(),
            principal,
        )
        return True

    def get_buffer(self, sizehint: int) -> memoryview:
        pool = self._pool
        if pool.used >= pool.limit and not pool.may_read(self):  # exhausted, and no pass
            return self._reader.buffer(SHORT_READ)
        return self._reader.buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self._last_active = self._loop.time()
        reader, pool = self._reader, self._pool
        frames = len(reader.frames)
        try:
            reader.received(nbytes)
        except InvalidFrame as e:  # what it took is not charged, so nothing is to give back
            log.warning("closing connection %s: %s", self.info.connection_id, e)
            self.abort()
            return
        charged = reader.charged
        self._held += charged - self._accounted
        pool.used += charged - self._accounted
        self._accounted = charged
        if len(reader.frames) > frames:
            if pool.holder is self:
                pool.request_completed(self)
            if reader.queued_bytes > MAX_QUEUED_BYTES:
                self._backlogged = True
                self._update_reading()
            self._wake()
        if pool.used >= pool.limit and not pool.may_read(self):
            self._pool_muted = True
            self._update_reading()
            pool.mute(self)

    def eof_received(self) -> bool:
        # Keep the transport open: the frames already received are still answered
        # (TLS has no half-close: asyncio closes a TLS transport whatever is returned).
        self._eof = True
        self._wake()
        return not self._tls

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._pool.leave(self)
        self._pool.release(self._held)  # with the request being handled, if any
        self._held = 0
        if self.counted and self in self._listener._connections:
            self._listener._connections.discard(self)
            self._listener._release(self.info)
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        self._wake()

    # -- request memory ----------------------------------------------------------------------

    @property
    def partial(self) -> bool:
        """Whether part of a request has been received (the pool's pass lets it finish)."""
        return self._reader.partial

    def resume(self) -> None:
        """The memory pool has room again, or gave this connection the pass."""
        self._pool_muted = False
        self._update_reading()

    def _update_reading(self) -> None:
        """Read while neither the backlog, the memory pool nor a quota says stop."""
        reading = not (self._backlogged or self._pool_muted or self._throttled)
        if reading != self._reading and not self._closed:
            self._reading = reading
            if reading:
                self._transport.resume_reading()
            else:
                self._transport.pause_reading()

    def pause_writing(self) -> None:
        self._writable = False

    def resume_writing(self) -> None:
        self._writable = True
        self._wake()

    # -- control from the listener ---------------------------------------------------------

    def stop(self) -> None:
        """Listener shutdown: an idle connection closes now, a busy one after answering."""
        if not (self._busy or self._in_flight):
            self.abort()
        else:
            self._wake()

    def abort(self, force: bool = False) -> None:
        """Close now; the request loop is cancelled unless it is handling a request (or ``force``)."""
        self._closed = True
        self._transport.close()
        if (
            self.task is not None
            and (force or not self._busy)
            and self.task is not asyncio.current_task()
        ):
            self.task.cancel()
        self._wake()

    def _wake(self) -> None:
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    async def _sleep_until_woken(self) -> None:
        self._wakeup = self._loop.create_future()
        try:
            await self._wakeup
        finally:
            self._wakeup = None

    def _arm_idle_timer(self, delay: float) -> None:
        self._idle_timer = self._loop.call_later(delay, self._check_idle)

    def _check_idle(self) -> None:
        """connections.max.idle.ms: one timer per connection, re-armed while there is activity."""
        idle = self._listener.config.connections_max_idle_ms / 1000
        quiet = self._loop.time() - self._last_active
        if self._closed:
            return
        if self._busy or self._in_flight or self._reader.frames or quiet < idle:
            self._arm_idle_timer(max(idle - quiet, 0.001) if not self._busy else idle)
            return
        what = "truncated frame: no bytes" if self._reader.partial else "idle"
        log.info(
            "closing connection %s: %s for connections.max.idle.ms", self.info.connection_id, what
        )
        self.abort()

    # -- the request loop ------------------------------------------------------------------

    async def _serve(self) -> None:
        info, reader, dispatch, listener = (
            self.info,
            self._reader,
            self._listener._dispatch,
            self._listener,
        )
        burst = 0
        try:
            while not self._closed:
                if self._in_flight and self._in_flight[0].done():
                    # Written now, not with the answers to the requests read meanwhile: these
                    # waited for other brokers, and the client may be waiting to send more.
                    await self._answer_in_flight(only_done=True)
                    self._flush()
                if not reader.frames:
                    self._flush()
                    if self._eof or listener._stopping:
                        break
                    if self._backlogged:
                        self._backlogged = False
                        self._update_reading()
                    self._last_active = self._loop.time()
                    burst = 0
                    await self._sleep_until_woken()
                    continue
                if burst >= MAX_BURST or not self._writable:
                    # Let the other connections run, and the client read what it was sent.
                    self._flush()
                    burst = 0
                    await asyncio.sleep(0)
                    while not self._writable and not self._closed:
                        await self._sleep_until_woken()
                    continue
                burst += 1
                self._busy = True
                frame = reader.take()
                close = False
                try:
                    if self._sasl is None and self._session is None:
                        response = await self._dispatch_eagerly(dispatch(info, frame))
                    else:
                        response, close = await self._authenticate_frame(frame)
                        info = self.info
                finally:
                    self._busy = False
                    handled = SIZE_PREFIX_LEN + len(frame)
                    if handled <= self._held:  # else the connection closed and gave all back
                        self._held -= handled
                        self._pool.release(handled)
                    del frame
                if isinstance(response, asyncio.Task):
                    response.add_done_callback(lambda _: self._wake())
                    self._in_flight.append(response)
                elif response is not None:
                    await self._answer_in_flight()
                    await self._deliver(response)
                if listener._stopping or close:
                    break
            await self._answer_in_flight()
            self._flush()
        except CloseConnection as e:
            log.warning("closing connection %s: %s", info.connection_id, e)
            self._flush()  # the answers to the requests before this one
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("closing connection %s after an unexpected error", info.connection_id)
        finally:
            self._closed = True
            for task in self._in_flight:
                task.cancel()
            self._flush()  # nothing is written now; the responses' on_sent learn they are done
            self._transport.close()

    async def _deliver(self, response: EncodedResponse) -> None:
        if response.mute_first and response.mute_ms and not self._closed:
            await self._mute(response.mute_ms)  # a client that does not hold back itself
            response.mute_ms = 0
        if response.silent:  # nothing to send (acks=0), maybe a quota's muting
            pass
        elif not self._closed:
            await self._queue(response)
        elif response.on_sent is not None:  # dropped with the connection
            now = time.perf_counter()
            response.on_sent(now, now)
        if response.mute_ms and not self._closed:
            await self._mute(response.mute_ms)

    async def _answer_in_flight(self, only_done: bool = False, keep: int = 0) -> None:
        """Deliver the responses of the requests that unmuted the connection, oldest first:
        waiting for each until ``keep`` are left (all of them by default), or only those at
        the head that are done."""
        while len(self._in_flight) > keep:
            task = self._in_flight[0]
            if only_done and not task.done():
                return
            try:
                response = await task
            finally:
                self._in_flight.popleft()
            if response is not None:
                await self._deliver(response)

    async def _mute(self, mute_ms: int) -> None:
        """Kafka's channel throttling: send what is queued (the throttled response among it),
        then neither read nor handle anything for ``mute_ms``; the bytes a client sends
        meanwhile wait in the socket, never dropped."""
        self._flush()
        self._throttled = True
        self._update_reading()
        try:
            await asyncio.sleep(mute_ms / 1000)
        finally:
            self._throttled = False
            self._update_reading()
            self._last_active = self._loop.time()

    async def _authenticate_frame(self, frame: memoryview) -> tuple[_Answer, bool]:
        """A frame received before authentication is complete, or on a session that expires:
        (the answer, close after it)."""
        if self._sasl is None:
            assert self._session is not None
            if peek_api(frame)[0] == ApiKey.SASL_HANDSHAKE:
                self._sasl = self._session.for_reauthentication()
            elif self._loop.time() >= self._session_expires:
                log.info(
                    "closing connection %s: its SASL session (%s) expired without "
                    "re-authentication",
                    self.info.connection_id,
                    self.info.principal,
                )
                return None, True
            else:
                response = await self._dispatch_eagerly(self._listener._dispatch(self.info, frame))
                return response, False
        sasl = self._sasl
        step = sasl.receive(frame)
        if step.dispatch:
            return await self._dispatch_eagerly(self._listener._dispatch(self.info, frame)), False
        if step.close:
            log.info(
                "Failed authentication with %s (channelId=%s) (%s)",
                self.info.peer_host,
                self.info.connection_id,
                step.reason,
            )
        elif sasl.principal is not None:
            self.info = dataclasses.replace(self.info, principal=sasl.principal)
            self._sasl = None
            self._session = sasl if sasl.session_expires else None
            self._session_expires = self._loop.time() + sasl.session_lifetime_ms / 1000
            log.debug(
                "connection %s on listener %s %s as %s",
                self.info.connection_id,
                self.info.listener_name,
                "re-authenticated" if sasl.renewing else "authenticated",
                sasl.principal,
            )
        response = None
        if step.response is not None:
            response = EncodedResponse()
            response.add(step.response)
        return response, step.close

    async def _dispatch_eagerly(self, coro: Coroutine[Any, Any, EncodedResponse | None]) -> _Answer:
        """Run the handler within this step; only if it must wait, flush the queued responses first.

        Most requests complete without ever suspending, and their answers then wait
        in ``_out`` to leave with the next ones; a request that does suspend (a long
        poll) must not hold back the answers to the requests before it. A handler whose
        first suspension unmutes the connection (``unmute``) goes on in a task of its own,
        which is returned; when ``MAX_IN_FLIGHT`` requests already wait that way, once the
        oldest of them is answered.
        """
        try:
            pending = coro.send(None)
        except StopIteration as done:
            response: EncodedResponse | None = done.value
            return response
        if pending.__class__ is ChannelUnmuted:
            if len(self._in_flight) >= MAX_IN_FLIGHT:
                # The oldest waiting request's answer frees a place for this one: the others
                # go on waiting, so the connection keeps MAX_IN_FLIGHT requests overlapping
                # instead of draining them all before it reads again.
                await self._answer_in_flight(keep=MAX_IN_FLIGHT - 1)
                self._flush()
            return self._loop.create_task(_finish(coro, pending))
        await self._answer_in_flight()
        self._flush()
        return await _resume(coro, pending)

    async def _queue(self, response: EncodedResponse) -> None:
        """Queue a response's bytes; file regions go out with sendfile, after the bytes before them.

        A response with ``on_sent`` is done when its last bytes are written: at once if they
        were a file region's, else at the flush that writes them.
        """
        self._out.append(size_prefix(response.size))
        writing: float | None = None
        region_last = False
        for chunk in response.chunks:
            if isinstance(chunk, (bytes, memoryview)):
                self._out.append(chunk)
                region_last = False
                continue
            if writing is None and response.on_sent is not None:
                writing = time.perf_counter()
            self._flush()
            await self._send_region(chunk)
            region_last = True
            if self._closed:
                break
        if response.on_sent is not None:
            if region_last and writing is not None:
                response.on_sent(writing, time.perf_counter())
            else:
                self._unsent.append((response.on_sent, writing))

    def _flush(self) -> None:
        if self._out:
            writing = time.perf_counter() if self._unsent else 0.0
            if not self._closed:
                self._transport.writelines(self._out)
            self._out = []
            if self._unsent:
                written = time.perf_counter()
                for on_sent, started in self._unsent:
                    on_sent(writing if started is None else started, written)
                self._unsent = []

    async def _sendfile(self, region: Region) -> None:
        """The record data goes from the page cache to the socket without entering Python.

        When the transport has nothing buffered the region is sent with ``os.sendfile``
        right here, which for the usual small fetch is one system call; whatever the
        socket does not take at once goes through ``loop.sendfile``, which waits for
        the socket to drain.
        """
        position, remaining = region.position, region.length
        if self._transport.get_write_buffer_size() == 0:
            try:
                while remaining:
                    sent = os.sendfile(self._socket_fd, region.file.fileno(), position, remaining)
                    if sent == 0:
                        raise CloseConnection(f"file region ends {remaining} bytes early")
                    position += sent
                    remaining -= sent
            except BlockingIOError:
                pass
            except OSError as e:  # the peer went away
                log.debug("connection %s: sendfile failed: %s", self.info.connection_id, e)
                self.abort()
                return
        if remaining:
            await self._loop.sendfile(
                self._transport, region.file, position, remaining, fallback=True
            )

    async def _send_region_through_tls(self, region: Region) -> None:
        """Read the region from the file in chunks and write them to the TLS transport.

        Writes while the transport takes them and waits for it to drain (its
        ``resume_writing``) when it is full, so a large fetch holds at most a
        chunk and the transport's high-water mark in memory.
        """
        fd = region.file.fileno()
        position, remaining = region.position, region.length
        while remaining and not self._closed:
            chunk = os.pread(fd, min(remaining, TLS_REGION_CHUNK), position)
            if not chunk:
                raise CloseConnection(f"file region ends {remaining} bytes early")
            self._transport.write(chunk)
            position += len(chunk)
            remaining -= len(chunk)
            while not self._writable and not self._closed:
                await self._sleep_until_woken()


async def _finish(coro: Coroutine[Any, Any, _T], pending: Any) -> _T:
    """The rest of a handler that unmuted its connection, in a task of its own."""
    return await _resume(coro, pending)


@types.coroutine
def _resume(coro: Coroutine[Any, Any, _T], pending: Any) -> Generator[Any, None, _T]:
    """Carry on a coroutine that was started by hand and yielded ``pending`` to its task.

    What ``await coro`` would have done had the coroutine not been started already:
    the task waits on what the coroutine yields, and cancellation is passed in.
    """
    while True:
        try:
            yield pending
        except BaseException as e:
            try:
                pending = coro.throw(e)
            except StopIteration as done:
                result: _T = done.value
                return result
        else:
            try:
                pending = coro.send(None)
            except StopIteration as done:
                result = done.value
                return result
