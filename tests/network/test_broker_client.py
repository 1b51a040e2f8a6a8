"""The broker-to-broker client's response stream against a scripted server: frames split in
any way, frames larger than the eager buffers, and broken streams.

The server answers the connection's ApiVersions, then each further request with what the
test scripts: response bytes written in pieces, or nonsense, or nothing.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Awaitable, Callable

import pytest

from odradek.network.client import AsyncBrokerConnection, BrokerConnectionError
from odradek.protocol import schemas
from odradek.protocol.api_keys import ApiKey

FETCH_VERSION = 12
Script = Callable[[asyncio.StreamWriter, int], Awaitable[None]]


def frame(correlation_id: int, body: bytes, flexible: bool) -> bytes:
    header = struct.pack(">i", correlation_id) + (b"\x00" if flexible else b"")
    return struct.pack(">i", len(header) + len(body)) + header + body


def api_versions_response() -> bytes:
    module = schemas.response_module(ApiKey.API_VERSIONS, 0)
    keys = [
        schemas.build(module.ApiVersion, api_key=k, min_version=0, max_version=v)
        for k, v in ((ApiKey.API_VERSIONS, 3), (ApiKey.FETCH, FETCH_VERSION))
    ]
    return schemas.encode(schemas.build(module.ApiVersionsResponse, error_code=0, api_keys=keys))


def fetch_response(records: bytes) -> bytes:
    module = schemas.response_module(ApiKey.FETCH, FETCH_VERSION)
    partition = schemas.build(
        module.PartitionData,
        partition_index=0,
        error_code=0,
        high_watermark=1,
        last_stable_offset=1,
        log_start_offset=0,
        aborted_transactions=(),
        preferred_read_replica=-1,
        records=records,
    )
    topic = schemas.build(module.FetchableTopicResponse, topic="t", partitions=(partition,))
    return schemas.encode(
        schemas.build(
            module.FetchResponse, throttle_time=0, error_code=0, session_id=0, responses=(topic,)
        )
    )


def fetch_request():
    module = schemas.request_module(ApiKey.FETCH, FETCH_VERSION)
    return schemas.build(
        module.FetchRequest,
        replica_id=-1,
        max_wait=0,
        min_bytes=1,
        max_bytes=1,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(),
        forgotten_topics_data=(),
        rack_id="",
    )


async def read_request(reader: asyncio.StreamReader) -> int:
    """The correlation id of the next request."""
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    body = await reader.readexactly(size)
    return struct.unpack_from(">i", body, 4)[0]


def run(script: Script, client: Callable[[AsyncBrokerConnection], Awaitable[None]]) -> None:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            writer.write(frame(await read_request(reader), api_versions_response(), False))
            await script(writer, await read_request(reader))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass

    async def main() -> None:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        connection = await AsyncBrokerConnection.connect("127.0.0.1", port, "test", 10)
        try:
            await client(connection)
        finally:
            connection.close()
            server.close()

    asyncio.run(main())


@pytest.mark.parametrize(
    ("records_size", "piece"),
    # Byte by byte and across the size prefix for a small frame; a frame with a buffer of its
    # own (over 64 KiB) and one in a lazily filled mapping (over 2 MiB), in segments.
    [(10, 1), (10, 3), (10, 7), (200_000, 65_536), (3_000_000, 65_536), (3_000_000, 1_000_003)],
)
def test_a_response_arriving_in_pieces_is_received_whole(records_size: int, piece: int) -> None:
    records = bytes(range(256)) * (records_size // 256) + b"x" * (records_size % 256)

    async def script(writer: asyncio.StreamWriter, correlation_id: int) -> None:
        data = frame(correlation_id, fetch_response(records), True)
        for start in range(0, len(data), piece):
            writer.write(data[start : start + piece])
            await writer.drain()
            if piece < 1000:
                await asyncio.sleep(0)  # separate segments, so the client reads them one by one

    async def client(connection: AsyncBrokerConnection) -> None:
        response = await connection.request(fetch_request(), 10)
        assert bytes(response.responses[0].partitions[0].records) == records

    run(script, client)


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(lambda cid: struct.pack(">i", -5), id="negative size"),
        pytest.param(lambda cid: struct.pack(">ii", 100, cid) + b"short", id="closed mid-frame"),
        pytest.param(lambda cid: frame(cid + 1, fetch_response(b""), True), id="other request"),
        pytest.param(lambda cid: b"", id="closed without answer"),
    ],
)
def test_a_broken_answer_fails_the_call_with_broker_connection_error(answer) -> None:
    async def script(writer: asyncio.StreamWriter, correlation_id: int) -> None:
        writer.write(answer(correlation_id))
        await writer.drain()
        writer.close()

    async def client(connection: AsyncBrokerConnection) -> None:
        with pytest.raises(BrokerConnectionError):
            await connection.request(fetch_request(), 10)
        with pytest.raises(BrokerConnectionError):  # and the connection stays unusable
            await connection.request(fetch_request(), 10)

    run(script, client)


def test_no_answer_in_time_fails_the_call() -> None:
    async def script(writer: asyncio.StreamWriter, correlation_id: int) -> None:
        await asyncio.sleep(5)

    async def client(connection: AsyncBrokerConnection) -> None:
        with pytest.raises(BrokerConnectionError):
            await connection.request(fetch_request(), 0.2)

    run(script, client)
