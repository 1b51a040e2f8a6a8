"""A replica fetcher stops when told to, even when its cancellation is swallowed.

On Python 3.11 ``asyncio.wait_for`` returns normally, dropping the cancellation,
when what it awaited completed in the same loop iteration as the cancel. A fetcher
backing off (``wait_for`` on its wake-up event) that is woken by a role change and
stopped at once is in exactly that state; it must leave its loop all the same, or
the broker's shutdown waits on it for ever (seen as brokers killed after their stop
timeout when a whole cluster stopped together).
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from odradek.network.client_security import PLAINTEXT
from odradek.replication.fetcher import FetcherSettings, ReplicaFetcher
from odradek.storage import TopicPartition

LEADER = 2


def _fetcher() -> ReplicaFetcher:
    """A fetcher following one partition of a leader that is not registered, so it backs
    off between attempts (the leader's endpoint is unknown)."""
    partition = SimpleNamespace(leader_id=LEADER)
    replica_manager = SimpleNamespace(
        node_id=1, followed_partitions=lambda: {TopicPartition("t", 0): partition}
    )
    manager = SimpleNamespace(
        replica_manager=replica_manager,
        metadata=SimpleNamespace(brokers=list),
        listener_name="PLAINTEXT",
        settings=FetcherSettings(fetch_backoff_ms=60_000),
        security=PLAINTEXT,
        fetcher_key=lambda tp, p: (p.leader_id, 0),
    )
    return ReplicaFetcher(manager, LEADER)  # type: ignore[arg-type]


async def _woken_and_stopped_together() -> None:
    fetcher = _fetcher()
    fetcher.start()
    for _ in range(5):  # let it fail to connect and enter its back-off
        await asyncio.sleep(0)
    fetcher.wake()
    fetcher.stop()
    # Bounded only so that a regression fails instead of hanging the suite.
    loop = fetcher._task
    assert loop is not None
    done, _ = await asyncio.wait({loop}, timeout=30)
    assert done == {loop}, "the fetcher went on after stop()"
    await fetcher.stopped()


def test_a_fetcher_woken_and_stopped_in_one_step_stops():
    asyncio.run(_woken_and_stopped_together())
