"""The fetch purgatory: long-polling fetches wait here until an append wakes them.

A waiting fetch registers one future under each partition it reads; an append
to any of them resolves the future (ReplicaManager.append_listeners), and the
deadline is a timer, so nothing sleeps or polls. On shutdown every waiter is
woken so that in-flight fetches answer promptly with what they have.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from odradek.storage import TopicPartition


class FetchPurgatory:
    def __init__(self) -> None:
        self._watchers: dict[TopicPartition, set[asyncio.Future[None]]] = {}
        self._closed = False

    @property
    def closed(self) -> bool:
        """After shutdown, waits return at once: fetches answer with what they have."""
        return self._closed

    def notify(self, tp: TopicPartition) -> None:
        """Wake every fetch waiting on ``tp``."""
        for future in self._watchers.pop(tp, ()):
            if not future.done():
                future.set_result(None)

    async def wait(self, partitions: Iterable[TopicPartition], timeout_s: float) -> None:
        """Return when one of ``partitions`` is appended to, or after ``timeout_s``."""
        if self._closed or timeout_s <= 0:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        keys = list(partitions)
        for tp in keys:
            self._watchers.setdefault(tp, set()).add(future)
        try:
            await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            pass
        finally:
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
