"""The group coordinator's shell loads and unloads __consumer_offsets partitions one by one, as a
cluster will when their leadership moves; a single node loads all of them at start-up."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from odradek.coordinator.classic_group import JoinResult
from odradek.coordinator.offset_metadata import OffsetCommit
from odradek.coordinator.runtime import CoordinatorWriteError
from odradek.coordinator.service import GroupCoordinatorService
from odradek.protocol.errors import ErrorCode
from odradek.server.broker import Broker
from odradek.server.config import BrokerConfig


def test_unloaded_partition_is_not_coordinated_until_loaded_again(tmp_path: Path) -> None:
    config = BrokerConfig(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(tmp_path),
            "offsets.topic.num.partitions": "3",
            "group.initial.rebalance.delay.ms": "60000",
        }
    )

    async def run() -> None:
        broker = Broker(config)
        await broker.start()
        try:
            svc: GroupCoordinatorService = broker.components["group_coordinator"]
            assert svc.loaded_partitions == {0, 1, 2}
            core = svc.core
            svc.call(core.commit_offsets, ["g"], "g", "", None, -1, [OffsetCommit("t", 0, 7)])
            partition = core.partition_for("g")
            other = next(
                gid for gid in ("a", "b", "c", "d") if core.partition_for(gid) != partition
            )
            svc.call(core.commit_offsets, [other], other, "", None, -1, [OffsetCommit("t", 0, 3)])

            # A member waiting out the initial rebalance delay in another group of that partition.
            waiting_group = next(
                f"w{i}" for i in range(100) if core.partition_for(f"w{i}") == partition
            )

            def join(callback, now_ms):
                core.join_group(
                    waiting_group,
                    "",
                    None,
                    "client",
                    "/127.0.0.1",
                    "consumer",
                    [("range", b"")],
                    10_000,
                    30_000,
                    False,
                    callback,
                    now_ms,
                )

            joining = asyncio.ensure_future(svc.wait(join, [waiting_group]))
            await asyncio.sleep(0)
            assert not joining.done()

            svc.unload_partition(partition)
            result: JoinResult = await joining
            assert result.error == ErrorCode.not_coordinator
            assert partition not in svc.loaded_partitions
            assert "g" not in core.groups and waiting_group not in core.groups
            with pytest.raises(CoordinatorWriteError) as refused:
                svc.call(core.commit_offsets, ["g"], "g", "", None, -1, [OffsetCommit("t", 0, 8)])
            assert refused.value.error_code == ErrorCode.not_coordinator
            # The other partitions' groups are untouched.
            assert core.fetch_offsets(other, [("t", 0)])[("t", 0)].offset == 3

            assert svc.load_partition(partition) > 0
            assert core.fetch_offsets("g", [("t", 0)])[("t", 0)].offset == 7
            svc.call(core.commit_offsets, ["g"], "g", "", None, -1, [OffsetCommit("t", 0, 9)])
            assert core.fetch_offsets("g", [("t", 0)])[("t", 0)].offset == 9
            # Loading a loaded partition again replays nothing over the newer state in memory.
            assert svc.load_partition(partition) == 0
            assert core.fetch_offsets("g", [("t", 0)])[("t", 0)].offset == 9
        finally:
            await broker.stop()

    asyncio.run(asyncio.wait_for(run(), 60))
