"""The listener's connections over real sockets with a scripted dispatcher: response bytes and
file regions in order, answers not held back by a request that waits, fairness between
connections, idle handling while a request is in flight, half-closed peers.

Each request body is one command byte and an argument:
E<data> echo; F<n> head + n bytes of a file + tail; W wait for the event; S set it; N no response.
Every response asks to be told when it was sent (``on_sent``), as the request metrics do.
"""

from __future__ import annotations

import asyncio
import os
import struct
import tempfile
from dataclasses import dataclass
from typing import BinaryIO

from odradek.network.listener import Listener, ListenerConfig
from odradek.protocol.response import EncodedResponse

TIMEOUT = 20


@dataclass(frozen=True)
class Region:
    file: BinaryIO
    position: int
    length: int


class Script:
    """The dispatcher: records what it handled, in order."""

    def __init__(self, file: BinaryIO) -> None:
        self.file = file
        self.event = asyncio.Event()
        self.started: list[bytes] = []
        self.handled: list[bytes] = []
        #: (command and argument, writing started, written) of each response, as reported.
        self.sent: list[tuple[bytes, float, float]] = []

    async def dispatch(self, _info, frame: memoryview) -> EncodedResponse | None:
        command, argument = bytes(frame[:1]), bytes(frame[1:])
        self.started.append(command)
        out = EncodedResponse()
        if command == b"E":
            out.add(argument)
        elif command == b"F":
            out.add(b"head")
            out.add_region(Region(self.file, 3, int(argument)))
            out.add(b"tail")
        elif command == b"W":
            await self.event.wait()
            out.add(b"woke")
        elif command == b"S":
            self.event.set()
            out.add(b"set")
        elif command == b"N":
            out = None
        name = command + argument[:20]
        self.handled.append(name)
        if out is not None:
            out.on_sent = lambda writing, written: self.sent.append((name, writing, written))
        return out

    async def started_on(self, command: bytes) -> None:
        """Wait until a request ``command`` is being handled."""
        while command not in self.started:
            await asyncio.sleep(0.01)

    async def sent_count(self, count: int) -> list[tuple[bytes, float, float]]:
        """The sent reports once there are ``count`` of them."""
        while len(self.sent) < count:
            await asyncio.sleep(0.01)
        return self.sent


def request(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


async def response(reader: asyncio.StreamReader) -> bytes:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return await reader.readexactly(size)


async def set_the_event(port: int) -> None:
    """From a connection of its own, wake the requests waiting on the script's event."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request(b"S"))
    assert await response(reader) == b"set"


def run(scenario, **config) -> None:
    with tempfile.TemporaryFile() as file:
        file.write(os.urandom(4 << 20))
        file.flush()

        async def main() -> None:
            script = Script(file)
            listener = Listener(ListenerConfig(host="127.0.0.1", port=0, **config), script.dispatch)
            port = listener.bind()
            await listener.start()
            try:
                await asyncio.wait_for(scenario(port, script), TIMEOUT)
            finally:
                await listener.stop(timeout=5)

        asyncio.run(main())


def file_bytes(file: BinaryIO, position: int, length: int) -> bytes:
    return os.pread(file.fileno(), length, position)


def test_file_regions_go_out_between_the_bytes_around_them() -> None:
    async def scenario(port: int, script: Script) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        sizes = [10, 3 << 20, 1000]  # 3 MB: more than a socket takes at once
        writer.write(b"".join(request(b"F%d" % n) for n in sizes) + request(b"Eafter"))
        await asyncio.sleep(0.2)  # let the socket fill before reading (not asserted on)
        for n in sizes:
            assert await response(reader) == b"head" + file_bytes(script.file, 3, n) + b"tail"
        assert await response(reader) == b"after"

    run(scenario)


def test_each_response_reports_once_in_order_when_its_last_byte_is_written() -> None:
    async def scenario(port: int, script: Script) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        sizes = [3 << 20, 10]  # the first goes through loop.sendfile: more than a socket takes
        writer.write(
            request(b"Ea")
            + b"".join(request(b"F%d" % n) for n in sizes)
            + request(b"Eb")
            + request(b"N")
        )
        for _ in range(4):
            await response(reader)
        sent = await script.sent_count(4)
        assert [name for name, _, _ in sent] == [b"Ea", b"F3145728", b"F10", b"Eb"]
        assert all(writing <= written for _, writing, written in sent)
        # Written in the order they were answered; "Ea" waited to leave with F's head.
        written = [w for _, _, w in sent]
        assert written == sorted(written)

    run(scenario)


def test_a_response_dropped_with_its_connection_still_reports() -> None:
    """As Kafka counts the responses in flight of a closed connection in its request metrics."""

    async def scenario(port: int, script: Script) -> None:
        _reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(request(b"W"))
        await script.started_on(b"W")
        writer.close()
        await set_the_event(port)
        names = sorted(name for name, _, _ in await script.sent_count(2))
        assert names == [b"S", b"W"]

    run(scenario)


def test_answers_before_a_waiting_request_are_not_held_back() -> None:
    async def scenario(port: int, script: Script) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(request(b"Efirst") + request(b"N") + request(b"Esecond") + request(b"W"))
        # Both answers arrive while the long poll behind them is still waiting.
        assert await response(reader) == b"first"
        assert await response(reader) == b"second"
        assert not script.event.is_set()
        await set_the_event(port)
        assert await response(reader) == b"woke"

    run(scenario)


def test_a_connection_with_a_backlog_does_not_starve_a_woken_one() -> None:
    async def scenario(port: int, script: Script) -> None:
        waiter_reader, waiter_writer = await asyncio.open_connection("127.0.0.1", port)
        waiter_writer.write(request(b"W"))
        await script.started_on(b"W")
        busy_reader, busy_writer = await asyncio.open_connection("127.0.0.1", port)
        backlog = 500
        busy_writer.write(request(b"S") + b"".join(request(b"E%d" % i) for i in range(backlog)))
        assert await response(waiter_reader) == b"woke"
        for expected in [b"set"] + [b"%d" % i for i in range(backlog)]:
            assert await response(busy_reader) == expected
        # The woken request was answered before the busy connection got through its backlog.
        assert script.handled.index(b"W") < len(script.handled) - 1

    run(scenario)


def test_a_request_in_flight_is_not_closed_as_idle() -> None:
    async def scenario(port: int, script: Script) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(request(b"W"))
        await asyncio.sleep(0.8)  # several idle periods with the request parked (not asserted on)
        await set_the_event(port)
        assert await response(reader) == b"woke"

    run(scenario, connections_max_idle_ms=200)


def test_requests_sent_before_a_half_close_are_answered() -> None:
    async def scenario(port: int, _script: Script) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"".join(request(b"E%d" % i) for i in range(3)))
        writer.write_eof()
        assert [await response(reader) for _ in range(3)] == [b"0", b"1", b"2"]
        assert await reader.read() == b""

    run(scenario)
