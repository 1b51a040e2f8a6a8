"""One blocking socket to one broker, speaking kio's request and response schemas.

The source's Fetch reader and the sink's producer send their data-path
requests through it; the API versions are agreed once per connection with
ApiVersions v0, which every Kafka-compatible broker answers. A connection may be
TLS (an ``ssl_context``) and authenticate with SASL (a ``network.sasl_client`` login,
the exchange the broker's own connections run; a refusal is its SaslExchangeError), as
the tools that use it (``odradek transactions``) are asked to by ``--command-config``.
"""

from __future__ import annotations

import socket
import ssl
import struct
from typing import Any

from odradek.network.sasl_client import SaslExchange, SaslLogin
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


class BrokerError(RuntimeError):
    """A broker answered with an error code that retrying will not cure."""

    def __init__(self, code: ErrorCode, where: str, message: str | None = None) -> None:
        super().__init__(
            f"{where} failed: {code.name} ({int(code)}){': ' + message if message else ''}"
        )
        self.code = code


class BrokerConnection:
    """Requests out, responses back in order; at most the caller's requests in flight."""

    def __init__(
        self,
        host: str,
        port: int,
        client_id: str,
        timeout_s: float,
        ssl_context: ssl.SSLContext | None = None,
        sasl: SaslLogin | None = None,
    ) -> None:
        self.address = f"{host}:{port}"
        self._sock = socket.create_connection((host, port), timeout=timeout_s)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if ssl_context is not None:
            try:
                self._sock = ssl_context.wrap_socket(self._sock, server_hostname=host)
            except BaseException:
                self._sock.close()
                raise
        self._correlation_id = 0
        self._client_id = client_id_field(client_id)
        response = self.request(schemas.build(schemas.request_schema(API_VERSIONS, 0)))
        if response.error_code != ErrorCode.none:
            raise BrokerError(response.error_code, f"ApiVersions to {self.address}")
        self.versions = {
            int(v.api_key): (int(v.min_version), int(v.max_version)) for v in response.api_keys
        }
        if sasl is not None:
            self._authenticate(sasl)

    def _authenticate(self, login: SaslLogin) -> None:
        """Kafka's client sequence (``network.sasl_client``): SaslHandshake, SaslAuthenticate."""
        exchange = SaslExchange(login, self.versions, self.address)
        request = exchange.first_request()
        while request is not None:
            request = exchange.on_response(self.request(request))

    def version(self, api_key: int, lowest: int, highest: int) -> int:
        """The newest version of an API both sides speak, between ``lowest`` and ``highest``."""
        low, high = self.versions.get(api_key, (0, -1))
        chosen = min(high, highest)
        if chosen < max(low, lowest):
            raise RuntimeError(
                f"broker {self.address} serves API {api_key} v{low}-v{high}; "
                f"this client needs v{lowest}-v{highest}"
            )
        return chosen

    def close(self) -> None:
        self._sock.close()

    def request(self, request: Any) -> Any:
        return self.receive(request, self.send(request))

    def send(self, request: Any) -> int:
        """Send a request; its correlation id, to be passed to receive()."""
        self._correlation_id += 1
        self._sock.sendall(encode_request(request, self._correlation_id, self._client_id))
        return self._correlation_id

    def receive(self, request: Any, correlation_id: int) -> Any:
        """The response to ``request``; responses arrive in the order their requests were sent."""
        response = self._receive(_SIZE.unpack(self._receive(4))[0])
        if response_correlation_id(response) != correlation_id:
            raise ConnectionError(f"{self.address} answered another request")
        return decode_response(request, response)

    def _receive(self, size: int) -> memoryview:
        view = memoryview(bytearray(size))
        received = 0
        while received < size:
            n = self._sock.recv_into(view[received:])
            if not n:
                raise ConnectionError(f"{self.address} closed the connection")
            received += n
        return view.toreadonly()  # kio reads read-only memoryviews, never bytearrays
