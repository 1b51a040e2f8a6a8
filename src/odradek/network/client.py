"""An asyncio connection from this broker to another one (followers to their leaders).

One TCP stream, one request at a time: the replica fetcher has a single request in
flight per leader, as Kafka's fetcher threads do, so responses need no matching
beyond a check of the correlation id. Frames are built and read by
``protocol.client_codec``; the API versions both sides speak are agreed once with
ApiVersions v0 when the connection opens.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from typing import Any

from odradek.protocol import schemas
from odradek.protocol.client_codec import (
    API_VERSIONS,
    client_id_field,
    decode_response,
    encode_request,
    response_correlation_id,
)
from odradek.protocol.errors import ErrorCode

_SIZE = struct.Struct(">i")


class BrokerConnectionError(ConnectionError):
    """The other broker could not be reached, closed the connection, or answered nonsense."""


class AsyncBrokerConnection:
    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str
    ) -> None:
        self._reader, self._writer = reader, writer
        self._client_id = client_id_field(client_id)
        self._correlation_id = 0
        self.versions: dict[int, tuple[int, int]] = {}

    @classmethod
    async def connect(
        cls, host: str, port: int, client_id: str, timeout_s: float
    ) -> AsyncBrokerConnection:
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout_s)
        except (OSError, TimeoutError) as exc:
            raise BrokerConnectionError(f"cannot connect to {host}:{port}: {exc}") from None
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        connection = cls(reader, writer, client_id)
        try:
            response = await connection.request(
                schemas.build(schemas.request_schema(API_VERSIONS, 0)), timeout_s
            )
        except BaseException:
            connection.close()
            raise
        if response.error_code != ErrorCode.none:
            connection.close()
            raise BrokerConnectionError(f"ApiVersions to {host}:{port}: {response.error_code}")
        connection.versions = {
            int(v.api_key): (int(v.min_version), int(v.max_version)) for v in response.api_keys
        }
        return connection

    def version(self, api_key: int, highest: int) -> int | None:
        """The newest version of ``api_key`` both sides speak, None if there is none."""
        low, high = self.versions.get(api_key, (0, -1))
        chosen = min(high, highest)
        return chosen if chosen >= low else None

    async def request(self, request: Any, timeout_s: float) -> Any:
        """Send ``request`` (a kio entity) and return its decoded response."""
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
