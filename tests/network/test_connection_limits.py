"""Connection limits over real sockets, as Kafka's ConnectionQuotas.

Above its address's limit (max.connections.per.ip, or its override) a connection is
closed at once; at max.connections (broker-wide, or listener.name.<name>.max.connections)
the acceptor waits: the connection is served as soon as another one closes.
"""

from __future__ import annotations

import asyncio
import struct

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from odradek.network.connection_quotas import ConnectionQuotas, parse_overrides, resolve_overrides
from odradek.network.listener import Listener, ListenerConfig
from odradek.protocol import schemas
from odradek.server.apis import API_TABLE
from odradek.server.request_channel import RequestChannel

TABLE = {18: API_TABLE[18]}


def api_versions(correlation_id: int) -> bytes:
    header = struct.pack(">hhih", 18, 3, correlation_id, 1) + b"t" + b"\x00"
    body = schemas.encode(ApiVersionsRequest(client_software_name="t", client_software_version="1"))
    return struct.pack(">i", len(header) + len(body)) + header + body


class Client:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def connect(cls, port: int) -> Client:
        return cls(*await asyncio.open_connection("127.0.0.1", port))

    def send(self, correlation_id: int) -> None:
        self.writer.write(api_versions(correlation_id))

    async def answer(self) -> int:
        (size,) = struct.unpack(">i", await asyncio.wait_for(self.reader.readexactly(4), 10))
        data = await self.reader.readexactly(size)
        return struct.unpack(">i", data[:4])[0]

    async def served(self, correlation_id: int) -> bool:
        self.send(correlation_id)
        return await self.answer() == correlation_id

    async def closed_by_broker(self) -> bool:
        return await asyncio.wait_for(self.reader.read(), 10) == b""

    async def close(self) -> None:
        self.writer.close()


async def until(condition, timeout: float = 10.0) -> None:
    async def poll() -> None:
        while not condition():
            await asyncio.sleep(0.01)

    await asyncio.wait_for(poll(), timeout)


def run(scenario, quotas: ConnectionQuotas, names: tuple[str, ...] = ("PLAINTEXT",)) -> None:
    async def main() -> None:
        listeners = [
            Listener(
                ListenerConfig(host="127.0.0.1", port=0, listener_name=name),
                RequestChannel(None, TABLE).dispatch,
                quotas,
            )
            for name in names
        ]
        ports = [listener.bind() for listener in listeners]
        for listener in listeners:
            await listener.start()
        try:
            await asyncio.wait_for(scenario(*ports), 30)
        finally:
            for listener in listeners:
                await listener.stop(timeout=5)

    asyncio.run(main())


def test_over_the_per_ip_override_a_connection_is_closed_at_once() -> None:
    quotas = ConnectionQuotas(max_connections_per_ip=1, per_ip_overrides={"127.0.0.1": 2})

    async def scenario(port: int) -> None:
        first, second = await Client.connect(port), await Client.connect(port)
        assert await first.served(1) and await second.served(2)
        third = await Client.connect(port)
        assert await third.closed_by_broker()
        assert quotas.connections_from("127.0.0.1") == 2
        await first.close()
        await until(lambda: quotas.connections_from("127.0.0.1") == 1)
        fourth = await Client.connect(port)
        assert await fourth.served(4) and await second.served(5)

    run(scenario, quotas)


def test_a_host_name_override_applies_to_its_addresses_and_zero_blocks_the_rest() -> None:
    quotas = ConnectionQuotas(max_connections_per_ip=0, per_ip_overrides={"localhost": 1})

    async def scenario(port: int) -> None:
        first = await Client.connect(port)  # 127.0.0.1 is localhost: one connection allowed
        assert await first.served(1)
        assert await (await Client.connect(port)).closed_by_broker()

    run(scenario, quotas)


def test_at_max_connections_the_acceptor_waits_instead_of_closing() -> None:
    quotas = ConnectionQuotas(max_connections=2)

    async def scenario(port: int) -> None:
        first, second = await Client.connect(port), await Client.connect(port)
        assert await first.served(1) and await second.served(2)
        third = await Client.connect(
            port
        )  # the kernel completes the handshake; the broker does not serve it yet
        third.send(3)
        await until(lambda: quotas.waiting_acceptors == 1)
        assert quotas.total == 2
        await first.close()
        assert await third.answer() == 3  # served once a slot freed, never closed
        assert quotas.total == 2 and quotas.waiting_acceptors == 0
        assert await second.served(4)

    run(scenario, quotas)


def test_a_listener_limit_blocks_that_listener_only_and_the_broker_limit_counts_all() -> None:
    quotas = ConnectionQuotas(max_connections=3, listener_max_connections={"INTERNAL": 1})

    async def scenario(external: int, internal: int) -> None:
        a = await Client.connect(internal)
        assert await a.served(1)
        waiting = await Client.connect(internal)
        waiting.send(2)
        await until(lambda: quotas.waiting_acceptors == 1)
        b, c = await Client.connect(external), await Client.connect(external)
        assert await b.served(3) and await c.served(4)  # the other listener still accepts
        d = await Client.connect(external)  # broker-wide: 3 connections, so this one waits too
        d.send(5)
        await until(lambda: quotas.waiting_acceptors == 2)
        await b.close()  # frees a broker slot: the external listener's waiter goes first ...
        assert await d.answer() == 5
        await a.close()  # ... and the internal one waits for its own listener's slot
        assert await waiting.answer() == 2

    run(scenario, quotas, names=("EXTERNAL", "INTERNAL"))


@pytest.mark.parametrize(
    "value, reason",
    [
        ("host", "is not host:count"),
        ("host:many", "is not a number"),
        ("bad#host:3", "contains invalid addresses : bad#host"),
        ("host:-1", "between 0 and"),
    ],
)
def test_overrides_in_kafkas_format_are_validated(value: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        parse_overrides(value)


def test_overrides_parse_as_kafkas_csv_map() -> None:
    assert parse_overrides("") == {}
    assert parse_overrides("hostName:100, 127.0.0.1:200 ,::1:3") == {
        "hostName": 100,
        "127.0.0.1": 200,
        "::1": 3,
    }


def test_an_unresolvable_override_host_is_named() -> None:
    with pytest.raises(ValueError, match="cannot resolve host 'no-such-host.invalid'"):
        resolve_overrides({"no-such-host.invalid": 3})
