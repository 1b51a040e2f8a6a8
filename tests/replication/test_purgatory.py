"""The purgatory's waits: woken by a notification of any of their partitions, by their deadline,
or by shutdown, and leaving nothing behind however they end (a cancelled request included)."""

from __future__ import annotations

import asyncio

import pytest

from odradek.replication.purgatory import Purgatory
from odradek.storage import TopicPartition

A, B = TopicPartition("t", 0), TopicPartition("t", 1)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 10))


def test_a_notification_of_any_partition_wakes_the_wait() -> None:
    async def scenario() -> None:
        purgatory = Purgatory()
        waiting = asyncio.create_task(purgatory.wait([A, B], 60))
        await asyncio.sleep(0)
        assert purgatory.delayed == 1
        purgatory.notify(B)
        await waiting
        assert purgatory.delayed == 0
        purgatory.notify(A)  # nothing is left watching A

    run(scenario())


def test_the_deadline_ends_the_wait() -> None:
    async def scenario() -> float:
        purgatory = Purgatory()
        loop = asyncio.get_running_loop()
        start = loop.time()
        await purgatory.wait([A], 0.05)
        assert purgatory.delayed == 0
        return loop.time() - start

    assert run(scenario()) >= 0.05


def test_a_cancelled_wait_leaves_nothing_behind() -> None:
    async def scenario() -> None:
        purgatory = Purgatory()
        waiting = asyncio.create_task(purgatory.wait([A], 60))
        await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert purgatory.delayed == 0
        purgatory.notify(A)  # no watcher of a cancelled wait is resolved
        # and the next wait on A is woken by its own notification only
        again = asyncio.create_task(purgatory.wait([A], 60))
        await asyncio.sleep(0)
        purgatory.notify(A)
        await again

    run(scenario())


def test_shutdown_wakes_every_wait_and_later_waits_return_at_once() -> None:
    async def scenario() -> None:
        purgatory = Purgatory()
        waits = [asyncio.create_task(purgatory.wait([p], 60)) for p in (A, B)]
        await asyncio.sleep(0)
        purgatory.shutdown()
        await asyncio.gather(*waits)
        await purgatory.wait([A], 60)
        assert purgatory.closed and purgatory.delayed == 0

    run(scenario())
