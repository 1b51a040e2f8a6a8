"""The listener and request channel over real sockets: framing, order, bad input, limits.

Uses a table holding only ApiVersions so the network layer is tested apart from storage.
"""

from __future__ import annotations

import asyncio
import os
import struct

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from odradek.network.connection_quotas import ConnectionQuotas
from odradek.network.listener import Listener, ListenerConfig
from odradek.protocol import schemas
from odradek.protocol.errors import ErrorCode
from odradek.server.apis import API_TABLE
from odradek.server.request_channel import RequestChannel

TABLE = {18: API_TABLE[18]}


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def api_versions_request(correlation_id: int, version: int = 3, tags: bytes = b"\x00") -> bytes:
    header = struct.pack(">hhi", 18, version, correlation_id) + struct.pack(">h", 4) + b"test"
    body = schemas.encode(ApiVersionsRequest(client_software_name="t", client_software_version="1"))
    if version >= 3:
        header += tags
    else:
        body = b""
    return frame(header + body)


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    data = await reader.readexactly(size)
    return struct.unpack(">i", data[:4])[0], data[4:]


def decode_api_versions(version: int, body: bytes):
    from kio.serial import entity_reader

    return entity_reader(schemas.response_schema(18, version))(body, 0)[0]


def run(scenario, quotas: ConnectionQuotas | None = None, dispatch=None, **limits) -> None:
    """``scenario(port)`` against a listener answering with ``dispatch`` (default: the
    ApiVersions-only request channel)."""

    async def main() -> None:
        listener = Listener(
            ListenerConfig(host="127.0.0.1", port=0, **limits),
            dispatch or RequestChannel(None, TABLE).dispatch,
            quotas,
        )
        port = listener.bind()
        await listener.start()
        try:
            await asyncio.wait_for(scenario(port), 20)
        finally:
            await listener.stop(timeout=5)

    asyncio.run(main())


async def connect(port: int):
    return await asyncio.open_connection("127.0.0.1", port)


async def assert_closed(reader: asyncio.StreamReader) -> None:
    assert await asyncio.wait_for(reader.read(), 10) == b""


async def assert_serves(port: int) -> None:
    reader, writer = await connect(port)
    writer.write(api_versions_request(7))
    correlation_id, body = await read_response(reader)
    assert correlation_id == 7
    assert decode_api_versions(3, body).error_code == ErrorCode.none
    writer.close()


def test_api_versions_lists_exactly_the_table() -> None:
    async def scenario(port: int) -> None:
        reader, writer = await connect(port)
        writer.write(api_versions_request(1))
        correlation_id, body = await read_response(reader)
        assert correlation_id == 1
        response = decode_api_versions(3, body)
        assert response.error_code == ErrorCode.none
        assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == [
            (s.api_key, s.min_version, s.max_version)
            for s in sorted(API_TABLE.values(), key=lambda s: s.api_key)
        ]

    run(scenario)


def test_unknown_api_versions_version_gets_v0_unsupported_version() -> None:
    async def scenario(port: int) -> None:
        reader, writer = await connect(port)
        writer.write(frame(struct.pack(">hhih", 18, 99, 5, -1) + os.urandom(10)))
        correlation_id, body = await read_response(reader)
        assert correlation_id == 5
        response = decode_api_versions(0, body)
        assert response.error_code == ErrorCode.unsupported_version
        assert 18 in [k.api_key for k in response.api_keys]

    run(scenario)


def test_pipelined_requests_are_answered_in_order() -> None:
    async def scenario(port: int) -> None:
        reader, writer = await connect(port)
        writer.write(b"".join(api_versions_request(i, version=i % 4) for i in range(1, 21)))
        for i in range(1, 21):
            correlation_id, _ = await read_response(reader)
            assert correlation_id == i

    run(scenario)


def test_unknown_header_tags_are_skipped() -> None:
    async def scenario(port: int) -> None:
        reader, writer = await connect(port)
        tags = b"\x02" + b"\x05\x03abc" + b"\x09\x00"
        writer.write(api_versions_request(3, tags=tags))
        correlation_id, body = await read_response(reader)
        assert correlation_id == 3
        assert decode_api_versions(3, body).error_code == ErrorCode.none

    run(scenario)


@pytest.mark.parametrize(
    "garbage",
    [
        frame(struct.pack(">hhih", 999, 0, 1, -1)),  # unknown api key
        frame(struct.pack(">hhih", 18, 3, 1, 2) + b"x"),  # truncated client id
        struct.pack(">i", 2**31 - 1) + b"abc",  # huge size prefix
        struct.pack(">i", -5),  # negative size prefix
        frame(b"\x00"),  # shorter than a header
        os.urandom(64) + b"\x7f\xff\xff\xff",
    ],
)
def test_bad_input_closes_only_that_connection(garbage: bytes) -> None:
    async def scenario(port: int) -> None:
        other_reader, other_writer = await connect(port)
        reader, writer = await connect(port)
        writer.write(garbage)
        await assert_closed(reader)
        other_writer.write(api_versions_request(9))
        correlation_id, _ = await read_response(other_reader)
        assert correlation_id == 9
        await assert_serves(port)

    run(scenario, socket_request_max_bytes=1024 * 1024)


def test_truncated_frame_then_close_leaves_listener_serving() -> None:
    async def scenario(port: int) -> None:
        _reader, writer = await connect(port)
        writer.write(api_versions_request(1)[:9])
        writer.close()
        await assert_serves(port)

    run(scenario)


def test_max_connections_per_ip() -> None:
    async def scenario(port: int) -> None:
        reader, writer = await connect(port)
        writer.write(api_versions_request(1))
        await read_response(reader)
        second_reader, _ = await connect(port)
        await assert_closed(second_reader)
        writer.write(api_versions_request(2))
        assert (await read_response(reader))[0] == 2

    run(scenario, ConnectionQuotas(max_connections_per_ip=1))


def test_idle_connections_are_closed() -> None:
    async def scenario(port: int) -> None:
        reader, _ = await connect(port)
        await assert_closed(reader)

    run(scenario, connections_max_idle_ms=200)
