"""The broker's budget of request memory: ``queued.max.request.bytes`` (Kafka's MemoryPool).

Sans-I/O. Every connection charges the pool for the request bytes it holds (bytes
received and not yet handled, plus the rest of a mid-sized frame whose buffer is
allocated whole, see ``framing``) and gives them back once the request has been
handled or the connection closes. While the pool is exhausted a connection that
tries to read more is muted (its transport stops reading; TCP pushes back on the
client) rather than failed, and every muted connection resumes when releases bring
the pool below its size, as Kafka's Selector unmutes its channels when
``MemoryPool.isOutOfMemory`` turns false.

Why the default is finite: Kafka defaults to -1 (unbounded), which on a small
machine lets a few connections that declare large requests take all its memory.
256 MiB is what a small machine (1-2 GB) can spare, and it is more than twice the
default ``socket.request.max.bytes`` (100 MiB): two requests of the largest size can
be received at once, and the pool never refuses a request the broker accepts.

A request larger than the pool: Kafka requires ``queued.max.request.bytes`` to be
at least ``socket.request.max.bytes`` (KafkaConfig refuses the config otherwise), so
no single request can exceed the pool; ``server.config`` does the same. Kafka's
pool is non-strict: an allocation succeeds while any memory is left, so usage may
exceed the size by one request (at most ``socket.request.max.bytes``).

Why a *pass*: Kafka allocates a request's whole buffer at once, so a request that
got its memory always completes. Here buffers grow with the bytes that arrive, so
several partly received requests could fill the pool between them and wait for each
other forever. While the pool is exhausted, one connection in the middle of a
request holds the pass and keeps reading until that request is complete; then the
pass goes to the longest-muted connection with a partial request. Usage therefore
exceeds the size by at most one request, the same bound as Kafka's non-strict pool,
and the requests being received always make progress. A holder that stops sending
is closed by ``connections.max.idle.ms`` like any stalled connection, and the pass
moves on.
"""

from __future__ import annotations

import sys
from typing import Protocol

#: Default of ``queued.max.request.bytes``; see the module docstring for why 256 MiB.
DEFAULT_QUEUED_MAX_REQUEST_BYTES = 256 * 1024 * 1024


class PoolMember(Protocol):
    """A connection as the pool sees it."""

    @property
    def partial(self) -> bool:
        """Whether it holds part of a request (it needs the pass to make progress)."""
        ...

    def resume(self) -> None:
        """The pool lets it read again (undoes the muting that followed ``mute``)."""
        ...


class MemoryPool:
    """Bytes of requests held across all connections, and the connections muted for lack of them.

    ``capacity`` <= 0 means no limit (Kafka's ``MemoryPool.NONE`` for -1).
    """

    __slots__ = ("_muted", "capacity", "holder", "limit", "used")

    def __init__(self, capacity: int = DEFAULT_QUEUED_MAX_REQUEST_BYTES) -> None:
        self.capacity = capacity
        #: ``used`` at which the pool is exhausted. Plain attributes, not properties, because the
        #: listener compares them on every read: ``used >= limit`` is ``exhausted``.
        self.limit = capacity if capacity > 0 else sys.maxsize
        #: Request bytes held now, by every connection together (may exceed ``capacity``).
        #: Connections add what they take to it directly; taking is never refused.
        self.used = 0
        #: Connections muted by the pool, longest-muted first.
        self._muted: dict[PoolMember, None] = {}
        #: The connection that may read on while the pool is exhausted.
        self.holder: PoolMember | None = None

    @property
    def exhausted(self) -> bool:
        """Kafka's ``isOutOfMemory``: nothing left, connections that want to read more must wait."""
        return self.used >= self.limit

    @property
    def muted(self) -> int:
        """How many connections are waiting for memory."""
        return len(self._muted)

    def release(self, nbytes: int) -> None:
        """``nbytes`` were handled or dropped; resume every muted connection once the pool has room."""
        self.used -= nbytes
        if self.used < self.limit:
            self.holder = None
            if self._muted:
                muted, self._muted = self._muted, {}
                for member in muted:
                    member.resume()
        elif self.holder is None:
            self._pass_on()

    def may_read(self, member: PoolMember) -> bool:
        """Whether ``member`` may keep reading although the pool is exhausted: it holds the pass,
        or it is in the middle of a request and nobody holds it (it takes the pass)."""
        if self.holder is member:
            return True
        if self.holder is None and member.partial:
            self.holder = member
            return True
        return False

    def mute(self, member: PoolMember) -> None:
        """``member`` stopped reading for lack of memory; ``resume`` is called when it may go on."""
        if self.holder is member:
            self.holder = None
        self._muted[member] = None
        if self.holder is None:
            self._pass_on()

    def request_completed(self, member: PoolMember) -> None:
        """``member`` finished receiving a request: if it held the pass, the pass moves on."""
        if self.holder is member:
            self.holder = None
            self._pass_on()

    def leave(self, member: PoolMember) -> None:
        """``member`` closed (its bytes are released separately)."""
        self._muted.pop(member, None)
        if self.holder is member:
            self.holder = None
            self._pass_on()

    def _pass_on(self) -> None:
        """Give the pass to the longest-muted connection holding part of a request, and resume it."""
        if not self.exhausted:
            return
        for member in self._muted:
            if member.partial:
                del self._muted[member]
                self.holder = member
                member.resume()
                return
