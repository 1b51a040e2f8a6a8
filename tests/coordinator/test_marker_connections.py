"""A transaction coordinator's connection to a partition leader that cannot take its markers
is closed, not only forgotten: each round of markers connects again, so a connection left
open would leak one socket per round.

A real broker (in this process) writes markers to a leader that is a scripted server on a
real socket: it answers ApiVersions without WriteTxnMarkers v1 (a broker too old for the
coordinator), then watches whether the coordinator closes its side.
"""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path

from odradek.coordinator.transaction.coordinator import TxnMarkers
from odradek.coordinator.transaction.service import TransactionCoordinatorService
from odradek.metadata.image import BrokerImage
from odradek.protocol import schemas
from odradek.protocol.api_keys import ApiKey
from odradek.server.broker import Broker
from odradek.server.config import BrokerConfig
from odradek.storage import TopicPartition

#: The scripted leader's node id (the real broker is node 1).
OLD_LEADER = 99


def api_versions_without_write_txn_markers_v1() -> bytes:
    """An ApiVersions v0 response frame body: WriteTxnMarkers v0 only (gone from Kafka 4)."""
    module = schemas.response_module(ApiKey.API_VERSIONS, 0)
    keys = [
        schemas.build(module.ApiVersion, api_key=k, min_version=0, max_version=v)
        for k, v in ((ApiKey.API_VERSIONS, 3), (ApiKey.WRITE_TXN_MARKERS, 0))
    ]
    return schemas.encode(schemas.build(module.ApiVersionsResponse, error_code=0, api_keys=keys))


class OldLeader:
    """Counts the connections made to it and those the other side closed."""

    def __init__(self) -> None:
        self.opened = 0
        self.closed = 0
        self.changed = asyncio.Event()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.opened += 1
        try:
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            request = await reader.readexactly(size)
            (correlation_id,) = struct.unpack_from(">i", request, 4)
            body = struct.pack(">i", correlation_id) + api_versions_without_write_txn_markers_v1()
            writer.write(struct.pack(">i", len(body)) + body)
            await writer.drain()
            while await reader.read(4096):  # b"" once the coordinator closes its side
                pass
            self.closed += 1
        finally:
            writer.close()
            self.changed.set()

    async def wait_all_closed(self, timeout_s: float) -> None:
        try:
            async with asyncio.timeout(timeout_s):
                while self.closed < self.opened:
                    self.changed.clear()
                    await self.changed.wait()
        except TimeoutError:
            pass
        assert self.closed == self.opened, (
            f"{self.opened - self.closed} of {self.opened} connections left open"
        )


def test_a_marker_connection_that_failed_is_closed(tmp_path: Path) -> None:
    config = BrokerConfig(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(tmp_path),
            "transaction.state.log.num.partitions": "1",
        }
    )

    async def run() -> None:
        leader = OldLeader()
        server = await asyncio.start_server(leader.serve, "127.0.0.1", 0)
        host, port = server.sockets[0].getsockname()[:2]
        broker = Broker(config)
        await broker.start()
        try:
            # The metadata registers the scripted leader beside the broker itself.
            registered = broker.metadata.brokers
            old = BrokerImage(OLD_LEADER, (("PLAINTEXT", host, port),))
            broker.metadata.brokers = lambda: [*registered(), old]
            svc: TransactionCoordinatorService = broker.components["transaction_coordinator"]
            tp = TopicPartition("t", 0)
            entry = TxnMarkers("tid", 1000, 0, True, frozenset([tp]))
            for _ in range(3):  # three rounds, each on a new connection
                assert await svc._write_remote(OLD_LEADER, entry, [tp], 0) == {tp}
            assert leader.opened == 3
            await leader.wait_all_closed(5)
        finally:
            await broker.stop()
            server.close()

    asyncio.run(run())
