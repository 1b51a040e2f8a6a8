"""A request that lets its connection read on while it waits for other brokers.

Kafka mutes a connection while one of its requests is in flight, so requests are
handled one at a time and answered in order. A Produce with acks=all then holds its
connection for a whole replication round: the leader's append, the followers' fetch,
their appends and their next fetch. With the leader, its followers and the clients
sharing a machine's cores, that round is several milliseconds, and a producer that
sends one partition's batches over one connection gets one batch per round, whatever
the cores could do meanwhile.

A handler may therefore end the ordered part of its work early: once everything that
must happen in request order has happened (a Produce has appended to every partition,
so the next request's records land after its own), it awaits ``unmute_channel()``. The
connection then reads and handles its next requests while this one waits, and still
writes every response in request order (``listener._Connection``); at most
``MAX_IN_FLIGHT`` requests of one connection wait this way (the Java client's default
``max.in.flight.requests.per.connection``). A client sees only that its pipelined
requests are appended sooner; what each one is answered, and in which order, is what
Kafka would answer. Only the first suspension of a handler may unmute (the listener
looks at nothing else), so a handler that must wait for something before its ordered
part is done (a coordinator's answer) just waits, holding the connection as before.

The signal is an already completed future, so the handler also runs correctly under
any other driver (a plain asyncio task resumes it at once, as after ``sleep(0)``).
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Generator
from typing import Any

#: Requests of one connection that may wait unmuted at once (then the connection waits).
MAX_IN_FLIGHT = 5


class ChannelUnmuted(asyncio.Future[None]):
    """What a handler yields to say that the rest of its work may overlap later requests."""


@types.coroutine
def unmute_channel() -> Generator[Any, None, None]:
    """Let the connection handle its next requests while this one waits (see the module)."""
    signal = ChannelUnmuted(loop=asyncio.get_running_loop())
    signal.set_result(None)
    signal._asyncio_future_blocking = True  # what a Task looks for in a yielded future
    yield signal
