"""Requests that unmute their connection: the next ones are handled, answers stay in order.

A dispatcher stands in for the broker so each request's wait is under the test's control:
request ``i`` unmutes (or not) and then waits for its gate.
"""

from __future__ import annotations

import asyncio
import struct

from odradek.network.listener import Listener, ListenerConfig
from odradek.network.unmute import MAX_IN_FLIGHT, unmute_channel
from odradek.protocol.header import peek_api
from odradek.protocol.response import EncodedResponse
from tests.network.test_listener import read_response


def request(correlation_id: int) -> bytes:
    body = struct.pack(">hhih", 0, 9, correlation_id, -1)
    return struct.pack(">i", len(body)) + body


class Handlers:
    """Request ``i`` records that it started, unmutes when ``i`` is in ``unmuting``, waits for
    ``gates[i]`` and answers its correlation id."""

    def __init__(self, unmuting: set[int]) -> None:
        self.unmuting = unmuting
        self.gates: dict[int, asyncio.Event] = {}
        self.started: list[int] = []
        self.changed = asyncio.Event()

    def gate(self, i: int) -> asyncio.Event:
        return self.gates.setdefault(i, asyncio.Event())

    async def dispatch(self, _info, frame) -> EncodedResponse:
        correlation_id = peek_api(memoryview(frame))[2]
        self.started.append(correlation_id)
        self.changed.set()
        if correlation_id in self.unmuting:
            await unmute_channel()
        await self.gate(correlation_id).wait()
        response = EncodedResponse()
        response.add(struct.pack(">i", correlation_id))
        return response

    async def until_started(self, count: int) -> None:
        while len(self.started) < count:
            self.changed.clear()
            await self.changed.wait()


def run(handlers: Handlers, scenario) -> None:
    async def main() -> None:
        listener = Listener(ListenerConfig(host="127.0.0.1", port=0), handlers.dispatch)
        port = listener.bind()
        await listener.start()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            await asyncio.wait_for(scenario(reader, writer), 20)
            writer.close()
        finally:
            await listener.stop(timeout=5)

    asyncio.run(main())


def test_unmuted_requests_overlap_and_are_answered_in_order() -> None:
    handlers = Handlers(unmuting={1, 2, 3})

    async def scenario(reader, writer) -> None:
        writer.write(b"".join(request(i) for i in (1, 2, 3, 4)))
        # 1-3 unmute, so all of them and 4 (which does not) start before any answer.
        await handlers.until_started(4)
        for i in (4, 3, 2, 1):  # released newest first
            handlers.gate(i).set()
        assert [(await read_response(reader))[0] for _ in range(4)] == [1, 2, 3, 4]

    run(handlers, scenario)


def test_a_request_that_does_not_unmute_holds_the_connection() -> None:
    handlers = Handlers(unmuting=set())

    async def scenario(reader, writer) -> None:
        writer.write(request(1) + request(2))
        await handlers.until_started(1)
        await asyncio.sleep(0.05)  # 2 would have started by now were 1 not holding it back
        assert handlers.started == [1]
        handlers.gate(2).set()
        handlers.gate(1).set()
        assert [(await read_response(reader))[0] for _ in range(2)] == [1, 2]

    run(handlers, scenario)


def test_at_most_max_in_flight_requests_wait_unmuted_and_the_oldest_answer_frees_a_place() -> None:
    total = MAX_IN_FLIGHT + 2
    handlers = Handlers(unmuting=set(range(1, total + 1)))

    async def scenario(reader, writer) -> None:
        writer.write(b"".join(request(i) for i in range(1, total + 1)))
        # The one after the limit starts but waits where it is, holding back the last.
        await handlers.until_started(MAX_IN_FLIGHT + 1)
        await asyncio.sleep(0.05)
        assert handlers.started == list(range(1, MAX_IN_FLIGHT + 2))
        # Only the oldest is answered: it goes out at once, and the one that waited for a
        # place takes it, so the last request starts while the others still wait.
        handlers.gate(1).set()
        assert (await read_response(reader))[0] == 1
        await handlers.until_started(total)
        for i in range(total, 1, -1):
            handlers.gate(i).set()
        answers = [(await read_response(reader))[0] for _ in range(total - 1)]
        assert answers == list(range(2, total + 1))

    run(handlers, scenario)


def test_a_closed_connection_with_waiting_requests_leaves_the_listener_serving() -> None:
    handlers = Handlers(unmuting={1, 2, 3})

    async def scenario(reader, writer) -> None:
        port = writer.get_extra_info("peername")[1]
        writer.write(request(1) + request(2))
        await handlers.until_started(2)
        writer.close()
        await writer.wait_closed()
        handlers.gate(2).set()
        handlers.gate(1).set()
        # The listener goes on serving other connections.
        reader2, writer2 = await asyncio.open_connection("127.0.0.1", port)
        handlers.gate(3).set()
        writer2.write(request(3))
        assert (await read_response(reader2))[0] == 3
        writer2.close()

    run(handlers, scenario)
