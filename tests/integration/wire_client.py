"""A minimal raw Kafka client over kio for tests that need exact bytes on the wire."""

from __future__ import annotations

import io
import socket
import ssl
import struct
from typing import Any

from kio.schema.metadata.v12 import request as metadata_v12
from kio.schema.types import TopicName
from kio.serial import entity_reader, entity_writer

from odradek.protocol import schemas


class WireClient:
    def __init__(
        self,
        bootstrap_servers: str,
        timeout: float = 15.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        host, port = bootstrap_servers.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        if ssl_context is not None:  # an SSL listener: TLS handshake first
            self.sock = ssl_context.wrap_socket(self.sock, server_hostname=host)
        self._correlation_id = 0
        #: Correlation id of the last response received.
        self.last_correlation_id = -1

    def close(self) -> None:
        self.sock.close()

    def send(self, request: Any) -> int:
        """Send a kio request (header v1/v2 as its version needs); returns the correlation id."""
        self._correlation_id += 1
        api_key, version = int(request.__api_key__), int(request.__version__)
        header = struct.pack(">hhih", api_key, version, self._correlation_id, 4) + b"test"
        if request.__flexible__:
            header += b"\x00"
        buf = io.BytesIO()
        entity_writer(type(request))(buf, request)
        body = header + buf.getvalue()
        self.sock.sendall(struct.pack(">i", len(body)) + body)
        return self._correlation_id

    def receive(self, request: Any) -> Any:
        """Read the next response, decoded as ``request``'s response type."""
        api_key, version = int(request.__api_key__), int(request.__version__)
        (size,) = struct.unpack(">i", self._read(4))
        data = self._read(size)
        self.last_correlation_id = struct.unpack(">i", data[:4])[0]
        flexible = request.__flexible__ and api_key != 18
        body = data[5:] if flexible else data[4:]
        return entity_reader(schemas.response_schema(api_key, version))(body, 0)[0]

    def call(self, request: Any) -> Any:
        self.send(request)
        return self.receive(request)

    def _read(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed by broker")
            out += chunk
        return out


def metadata(
    address: str,
    topic: str,
    ssl_context: ssl.SSLContext | None = None,
    auto_create: bool = True,
):
    """A Metadata v12 answer for ``topic`` (auto-created unless told not to) from the broker at
    ``address``."""
    client = WireClient(address, ssl_context=ssl_context)
    try:
        return client.call(
            metadata_v12.MetadataRequest(
                topics=(metadata_v12.MetadataRequestTopic(name=TopicName(topic), topic_id=None),),
                allow_auto_topic_creation=auto_create,
                include_topic_authorized_operations=False,
            )
        )
    finally:
        client.close()
