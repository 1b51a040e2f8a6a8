"""The asyncio listener: accepts connections and runs one request loop per connection.

Each connection reads a size-prefixed frame, hands it to the dispatcher, writes
the response, and only then reads the next frame, as Kafka mutes a channel while
its request is in flight. Pipelined requests therefore queue in the socket and
are answered strictly in order, and a long-polling fetch holds back only its own
connection. Anything wrong with a connection's bytes (a bad size prefix, a
malformed header, an unknown API) closes that connection alone, with a log line.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from odradek.protocol.frames import SIZE_PREFIX_LEN, InvalidFrame, frame_size, size_prefix
from odradek.protocol.response import EncodedResponse

log = logging.getLogger(__name__)


class CloseConnection(Exception):
    """Raised by a dispatcher when the request cannot be answered and the connection must close."""


@dataclass(frozen=True, slots=True)
class ConnectionInfo:
    """What a handler may know about the connection a request came on."""

    connection_id: str
    peer_host: str
    peer_port: int
    listener_name: str


Dispatch = Callable[[ConnectionInfo, bytes], Awaitable[EncodedResponse | None]]


@dataclass(frozen=True, slots=True)
class ListenerConfig:
    host: str
    port: int
    listener_name: str = "PLAINTEXT"
    socket_request_max_bytes: int = 104857600
    connections_max_idle_ms: int = 600000
    max_connections_per_ip: int = 2147483647


class Listener:
    """One listening socket and its connections."""

    def __init__(self, config: ListenerConfig, dispatch: Dispatch) -> None:
        self.config = config
        self._dispatch = dispatch
        self._server: asyncio.Server | None = None
        self._socket: socket.socket | None = None
        self._connections: dict[asyncio.Task, bool] = {}  # task -> busy with a request
        self._per_ip: Counter[str] = Counter()
        self._stopping = False
        self._next_id = 0

    def bind(self) -> int:
        """Bind the socket (OSError such as EADDRINUSE if it cannot be) and return the bound port.

        Bound before the broker loads its logs, so a port in use stops start-up
        early, and so that port 0 resolves to the real port the broker advertises.
        """
        infos = socket.getaddrinfo(self.config.host or None, self.config.port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
        family, kind, proto, _, address = infos[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
        except OSError:
            sock.close()
            raise
        self._socket = sock
        return sock.getsockname()[1]

    async def start(self) -> None:
        """Start accepting connections on the bound socket."""
        if self._socket is None:
            self.bind()
        self._server = await asyncio.start_server(self._on_connection, sock=self._socket, backlog=1024)

    async def stop(self, timeout: float = 30.0) -> None:
        """Stop accepting, let in-flight requests finish and be answered, close every connection."""
        self._stopping = True
        if self._server is not None:
            self._server.close()
        for task, busy in list(self._connections.items()):
            if not busy:
                task.cancel()
        if self._connections:
            await asyncio.wait(list(self._connections), timeout=timeout)
        for task in list(self._connections):
            task.cancel()
        if self._server is not None:
            await self._server.wait_closed()
        elif self._socket is not None:
            self._socket.close()

    async def _on_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        peer = writer.get_extra_info("peername") or ("?", 0)
        host, port = peer[0], peer[1]
        if self._stopping or self._per_ip[host] >= self.config.max_connections_per_ip:
            log.warning("closing connection from %s:%s: max.connections.per.ip (%d) reached",
                        host, port, self.config.max_connections_per_ip)
            writer.close()
            return
        self._per_ip[host] += 1
        self._connections[task] = False
        self._next_id += 1
        info = ConnectionInfo(f"{host}:{port}-{self._next_id}", host, port, self.config.listener_name)
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # With a zero high-water mark, drain() returns only once the buffer is empty,
        # which sendfile needs before it may write to the socket itself.
        writer.transport.set_write_buffer_limits(high=0)
        try:
            await self._serve(info, reader, writer)
        except asyncio.CancelledError:
            pass
        except (asyncio.IncompleteReadError, ConnectionError):
            log.debug("connection %s closed by peer", info.connection_id)
        except InvalidFrame as e:
            log.warning("closing connection %s: %s", info.connection_id, e)
        except CloseConnection as e:
            log.warning("closing connection %s: %s", info.connection_id, e)
        except Exception:
            log.exception("closing connection %s after an unexpected error", info.connection_id)
        finally:
            self._per_ip[host] -= 1
            if not self._per_ip[host]:
                del self._per_ip[host]
            self._connections.pop(task, None)
            writer.close()

    async def _serve(self, info: ConnectionInfo, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        idle = self.config.connections_max_idle_ms / 1000
        max_bytes = self.config.socket_request_max_bytes
        while not self._stopping:
            # asyncio.timeout arms one timer; wait_for would also wrap each read in a new Task.
            try:
                async with asyncio.timeout(idle):
                    prefix = await reader.readexactly(SIZE_PREFIX_LEN)
            except asyncio.TimeoutError:
                log.info("closing connection %s: idle for connections.max.idle.ms", info.connection_id)
                return
            size = frame_size(prefix, max_bytes)
            try:
                async with asyncio.timeout(idle):
                    frame = await reader.readexactly(size)
            except asyncio.TimeoutError:
                raise CloseConnection("truncated frame: no bytes for connections.max.idle.ms") from None
            self._connections[task] = True
            try:
                response = await self._dispatch(info, frame)
                if response is not None:
                    await self._write(writer, response)
            finally:
                self._connections[task] = False

    async def _write(self, writer: asyncio.StreamWriter, response: EncodedResponse) -> None:
        loop = asyncio.get_running_loop()
        pending: list[bytes | memoryview] = [size_prefix(response.size)]
        for chunk in response.chunks:
            if isinstance(chunk, (bytes, memoryview)):
                pending.append(chunk)
                continue
            writer.writelines(pending)
            pending = []
            await writer.drain()
            # The record data goes from the page cache to the socket without entering Python.
            await loop.sendfile(writer.transport, chunk.file, chunk.position, chunk.length, fallback=True)
        writer.writelines(pending)
        await writer.drain()
