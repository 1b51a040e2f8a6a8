"""Connection limits shared by every listener of a broker, as Kafka's ConnectionQuotas.

Three limits, with Kafka's names and behaviour:

- ``max.connections`` (broker-wide) and ``listener.name.<name>.max.connections``
  (per listener): when either is reached the listener's acceptor waits until a
  connection closes; the new connection is not refused, it is served once a slot
  frees (meanwhile the client sees a connection that does not answer).
- ``max.connections.per.ip`` with ``max.connections.per.ip.overrides``
  ("host:count,host:count", host names resolved once): a connection above its
  address's limit is closed at once.

All counting happens on the event loop; waiting acceptors are futures woken
whenever a connection is released.
"""

from __future__ import annotations

import asyncio
import socket
from collections import Counter
from collections.abc import Mapping

INT_MAX = 2**31 - 1


class ConnectionQuotas:
    def __init__(
        self,
        *,
        max_connections: int = INT_MAX,
        max_connections_per_ip: int = INT_MAX,
        per_ip_overrides: Mapping[str, int] | None = None,
        listener_max_connections: Mapping[str, int] | None = None,
    ) -> None:
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip
        #: Address (as the peer name shows it) -> its limit; host names resolved here, as Kafka does at start-up.
        self.per_ip_overrides = resolve_overrides(per_ip_overrides or {})
        self.listener_max_connections = dict(listener_max_connections or {})
        self.total = 0
        self._per_ip: Counter[str] = Counter()
        self._per_listener: Counter[str] = Counter()
        self._waiters: list[asyncio.Future[None]] = []

    def slot_available(self, listener_name: str) -> bool:
        """Whether ``listener_name`` may take one more connection under the broker and listener limits."""
        if self._per_listener[listener_name] >= self.listener_max_connections.get(
            listener_name, INT_MAX
        ):
            return False
        return self.total < self.max_connections

    async def wait_for_slot(self, listener_name: str) -> None:
        """Return once ``listener_name`` may take one more connection (Kafka's acceptor blocks here)."""
        loop = asyncio.get_running_loop()
        while not self.slot_available(listener_name):
            waiter = loop.create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    def max_for(self, address: str) -> int:
        return self.per_ip_overrides.get(address, self.max_connections_per_ip)

    def admit(self, listener_name: str, address: str) -> bool:
        """Count a new connection from ``address``, or return False when its address is at its limit."""
        if self._per_ip[address] >= self.max_for(address):
            return False
        self._per_ip[address] += 1
        self._per_listener[listener_name] += 1
        self.total += 1
        return True

    def release(self, listener_name: str, address: str) -> None:
        """A connection counted by ``admit`` closed: free its slot and wake waiting acceptors."""
        self._per_ip[address] -= 1
        if not self._per_ip[address]:
            del self._per_ip[address]
        self._per_listener[listener_name] -= 1
        self.total -= 1
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def connections_from(self, address: str) -> int:
        return self._per_ip[address]

    @property
    def waiting_acceptors(self) -> int:
        """Acceptors waiting for a slot (each holding one accepted, not yet served connection)."""
        return len(self._waiters)


def parse_overrides(value: str) -> dict[str, int]:
    """Kafka's ``max.connections.per.ip.overrides`` format: "host:count,host:count" (split at the last ':').

    Raises ValueError with the reason for anything Kafka would refuse: an entry
    without ':' or count, a count that is not a non-negative int, a host with
    characters outside Kafka's valid host pattern ([0-9a-zA-Z-%._:]).
    """
    overrides: dict[str, int] = {}
    if not value.strip():
        return overrides
    for entry in (e.strip() for e in value.split(",")):
        host, colon, count = entry.rpartition(":")
        host, count = host.strip(), count.strip()
        if not colon or not host:
            raise ValueError(f"entry {entry!r} is not host:count")
        if not all(c.isascii() and (c.isalnum() or c in "-%._:") for c in host):
            raise ValueError(f"contains invalid addresses : {host}")
        try:
            limit = int(count)
        except ValueError:
            raise ValueError(f"entry {entry!r}: {count!r} is not a number") from None
        if not 0 <= limit <= INT_MAX:
            raise ValueError(f"entry {entry!r}: the count must be between 0 and {INT_MAX}")
        overrides[host] = limit
    return overrides


def resolve_overrides(overrides: Mapping[str, int]) -> dict[str, int]:
    """Each host's addresses -> its limit, as Kafka's InetAddress.getByName at start-up.

    Raises ValueError naming the host when one does not resolve.
    """
    resolved: dict[str, int] = {}
    for host, limit in overrides.items():
        try:
            infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
        except OSError as e:
            raise ValueError(
                f"max.connections.per.ip.overrides: cannot resolve host {host!r}: {e}"
            ) from None
        for *_, sockaddr in infos:
            address = sockaddr[0]
            # (family, bytes) is an IPv6 result of a Python built without IPv6: never a peer here.
            if isinstance(address, str):
                resolved[address] = limit
    return resolved
