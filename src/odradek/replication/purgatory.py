"""Purgatories: requests that wait for something to happen to a partition (Kafka's
DelayedOperationPurgatory, keyed by partition).

The fetch purgatory holds long-polling fetches until an append (or, for consumers,
who read only below it, a move of the high watermark) wakes them; the produce
purgatory holds acks=all produces until the high watermark passes their records or
the leadership changes (ReplicaManager.hw_listeners). A waiter registers one future
under each partition it waits on; a notification of any of them resolves it, and
the deadline is a timer, so nothing sleeps or polls: the waiter checks its own
condition again when woken. On shutdown every waiter is woken so that in-flight
requests answer promptly with what they have.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from odradek.storage import TopicPartition


class Purgatory:
    def __init__(self) -> None:
        self._watchers: dict[TopicPartition, set[asyncio.Future[None]]] = {}
        self._closed = False
        #: Requests waiting now (Kafka's NumDelayedOperations of this purgatory).
        self.delayed = 0

    @property
    def closed(self) -> bool:
        """After shutdown, waits return at once: requests answer with what they have."""
        return self._closed

    def notify(self, tp: TopicPartition) -> None:
        """Wake every request waiting on ``tp``."""
        for future in self._watchers.pop(tp, ()):
            if not future.done():
                future.set_result(None)

    async def wait(self, partitions: Iterable[TopicPartition], timeout_s: float) -> None:
        """Return when one of ``partitions`` is notified, or after ``timeout_s``."""
        if self._closed or timeout_s <= 0:
            return
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        keys = list(partitions)
        for tp in keys:
            self._watchers.setdefault(tp, set()).add(future)
        self.delayed += 1
        # The deadline resolves the same future a notification would: one timer, where
        # asyncio.wait_for would add a second future and two callbacks to every wait.
        deadline = loop.call_later(timeout_s, _expire, future)
        try:
            await future
        finally:
            deadline.cancel()
            self.delayed -= 1
            for tp in keys:
                watchers = self._watchers.get(tp)
                if watchers is not None:
                    watchers.discard(future)
                    if not watchers:
                        del self._watchers[tp]

    def shutdown(self) -> None:
        self._closed = True
        for tp in list(self._watchers):
            self.notify(tp)


def _expire(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
