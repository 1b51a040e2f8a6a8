"""Unsupported API versions, as Kafka 4 handles them.

ApiVersions of an unknown version gets the v0-format UNSUPPORTED_VERSION reply
(KIP-511) and the connection stays open for the client's retry at a version we
know. Any other API at a version Kafka does not define (no kio schema) closes the
connection with a log line (Kafka's SocketServer.parseRequestHeader), sending
nothing back, and other clients are unaffected; versions Kafka defines but we do
not serve get an error response (test_unsupported_version_errors.py).
"""

from __future__ import annotations

import io
import socket
import struct
import time
from collections.abc import Iterator

import pytest
from kio.schema.api_versions.v0 import response as api_versions_v0
from kio.schema.api_versions.v3 import request as api_versions_v3
from kio.schema.metadata.v12 import request as metadata_v12
from kio.serial import entity_reader, entity_writer

from odradek import EmbeddedBroker
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.server.apis import API_TABLE

from .wire_client import WireClient


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        yield b


def frame(
    api_key: int, version: int, correlation_id: int, body: bytes = b"", flexible: bool = True
) -> bytes:
    """A well-formed request frame: size, header v2 (v1 when not flexible), body."""
    header = struct.pack(">hhih", api_key, version, correlation_id, 5) + b"probe"
    if flexible:
        header += b"\x00"  # no tagged fields
    return struct.pack(">i", len(header) + len(body)) + header + body


def read_frame(sock: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data

    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


def encode(request) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(request))(buf, request)
    return buf.getvalue()


METADATA_BODY = encode(
    metadata_v12.MetadataRequest(
        topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
)


@pytest.mark.parametrize(
    ("api_key", "version", "flexible"),
    [
        (ApiKey.METADATA, API_TABLE[ApiKey.METADATA].max_version + 1, True),
        (ApiKey.PRODUCE, API_TABLE[ApiKey.PRODUCE].min_version - 1, False),  # removed by KIP-896
        (ApiKey.FETCH, 3, False),
        (ApiKey.LIST_OFFSETS, 0, False),
    ],
    ids=["metadata-too-new", "produce-too-old", "fetch-too-old", "list-offsets-v0"],
)
def test_unsupported_version_closes_only_that_connection(
    broker: EmbeddedBroker, api_key: int, version: int, flexible: bool
) -> None:
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    bad = socket.create_connection((host, int(port)), timeout=15)
    good = WireClient(broker.bootstrap_servers)
    try:
        # Well-formed frame, and our side stays open: only the version can make the broker close.
        bad.sendall(frame(api_key, version, 7, METADATA_BODY, flexible))
        assert bad.recv(100) == b""
        versions = good.call(
            api_versions_v3.ApiVersionsRequest(
                client_software_name="t", client_software_version="1"
            )
        )
        assert versions.error_code == ErrorCode.none
    finally:
        bad.close()
        good.close()
    expected = f"Received request api key {ApiKey(api_key).name} with version {version} which is not enabled"
    deadline = time.monotonic() + 10
    while not any(expected in line for line in broker.log_lines):
        assert time.monotonic() < deadline, "no log line names the unsupported version"
        time.sleep(0.05)


def test_unknown_api_versions_version_gets_v0_reply_and_connection_stays(
    broker: EmbeddedBroker,
) -> None:
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=15) as sock:
        sock.sendall(frame(ApiKey.API_VERSIONS, 99, 1, b"\x00\x00\x00"))
        data = read_frame(sock)
        assert struct.unpack(">i", data[:4])[0] == 1
        reply = entity_reader(api_versions_v0.ApiVersionsResponse)(data[4:], 0)[0]
        assert reply.error_code == ErrorCode.unsupported_version
        advertised = {k.api_key: (k.min_version, k.max_version) for k in reply.api_keys}
        assert advertised[ApiKey.API_VERSIONS] == (0, 4)
        # The client retries at a version we know, on the same connection.
        retry = api_versions_v3.ApiVersionsRequest(
            client_software_name="t", client_software_version="1"
        )
        sock.sendall(frame(ApiKey.API_VERSIONS, 3, 2, encode(retry)))
        data = read_frame(sock)
        assert struct.unpack(">i", data[:4])[0] == 2
