"""NodeConnections: callers asking for a node at the same time share one connect.

Before, each made its own and the last replaced the others in the cache, whose sockets were
left open. A scripted broker on a real socket answers ApiVersions slowly (so the callers
overlap) and counts the connections made to it and those closed.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from odradek.network.client import NodeConnections
from odradek.network.client_security import PLAINTEXT
from tests.network.test_broker_client import api_versions_response, frame, read_request

NODE = 7


@dataclass(frozen=True)
class Registered:
    node_id: int
    port: int

    def endpoint(self, listener: str) -> tuple[str, int] | None:
        return ("127.0.0.1", self.port)


def test_callers_asking_at_once_share_one_connection() -> None:
    async def main() -> None:
        opened: list[asyncio.StreamWriter] = []
        closed = 0

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal closed
            opened.append(writer)
            correlation_id = await read_request(reader)
            await asyncio.sleep(0.1)  # the other callers ask meanwhile
            writer.write(frame(correlation_id, api_versions_response(), False))
            await reader.read()  # b"" once the client closes its side
            closed += 1

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        connections = NodeConnections(
            lambda: [Registered(NODE, port)], "PLAINTEXT", "test", 10, PLAINTEXT
        )
        try:
            got = await asyncio.gather(*(connections.get(NODE) for _ in range(3)))
            assert len(opened) == 1
            assert got[0] is got[1] is got[2]
            assert await connections.get(NODE) is got[0]  # cached from then on
            connections.close()
            async with asyncio.timeout(5):
                while closed < len(opened):
                    await asyncio.sleep(0.01)
        finally:
            server.close()

    asyncio.run(main())


def test_a_caller_that_gives_up_leaves_the_connect_to_the_others() -> None:
    async def main() -> None:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            correlation_id = await read_request(reader)
            await asyncio.sleep(0.1)
            writer.write(frame(correlation_id, api_versions_response(), False))
            await reader.read()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        connections = NodeConnections(
            lambda: [Registered(NODE, port)], "PLAINTEXT", "test", 10, PLAINTEXT
        )
        try:
            impatient = asyncio.create_task(connections.get(NODE))
            patient = asyncio.create_task(connections.get(NODE))
            await asyncio.sleep(0.02)
            impatient.cancel()
            connection = await patient
            assert await connections.get(NODE) is connection
        finally:
            connections.close()
            server.close()

    asyncio.run(main())
