"""No transaction marker goes out before the Prepare record is below the high watermark.

A failover that lost the Prepare record would leave markers of a transaction the new
coordinator believes open, and aborts by timeout: committed on some partitions, aborted on
others. So the marker task waits for replication as long as it takes (round after round of
``await_replication``), not one timeout's worth, and gives up only when the transaction is no
longer coordinated here (the new leader then writes the markers, if its log has the record).

A real broker in this process; its replica manager's answer for the Prepare record is
scripted (replication that does not come in time: REQUEST_TIMED_OUT) and the marker rounds
are recorded instead of sent.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from odradek.coordinator.transaction.coordinator import TxnMarkers
from odradek.coordinator.transaction.service import TransactionCoordinatorService
from odradek.protocol.errors import ErrorCode
from odradek.server.broker import Broker
from odradek.server.config import BrokerConfig
from odradek.storage import TopicPartition

TID = "tid"
DATA = TopicPartition("t", 0)
#: Where the Prepare record went: (partition of __transaction_state, end offset, leader epoch).
PREPARE = (TopicPartition("__transaction_state", 0), 1, 0)


async def coordinator(broker: Broker) -> TransactionCoordinatorService:
    svc: TransactionCoordinatorService = broker.components["transaction_coordinator"]
    svc.ensure_transaction_state_topic()
    async with asyncio.timeout(10):
        while not svc.coordinates(TID):
            await asyncio.sleep(0.01)
    return svc


@pytest.mark.parametrize("resigned", [False, True], ids=["replicated-late", "resigned"])
def test_markers_wait_for_the_prepare_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, resigned: bool
) -> None:
    config = BrokerConfig(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(tmp_path),
            "transaction.state.log.num.partitions": "1",
        }
    )

    async def run() -> list[tuple[str, Any]]:
        broker = Broker(config)
        await broker.start()
        try:
            svc = await coordinator(broker)
            events: list[tuple[str, Any]] = []
            answers = [ErrorCode.request_timed_out, ErrorCode.request_timed_out, ErrorCode.none]

            async def await_replication(appends: list[Any], timeout_ms: int) -> list[ErrorCode]:
                assert appends == [PREPARE]
                answer = answers.pop(0)
                events.append(("replication", answer))
                if resigned:  # leadership of __transaction_state moved while it waited
                    svc.on_resignation(0)
                return [answer]

            async def write_round(
                entry: TxnMarkers, pending: set[TopicPartition], epoch: int
            ) -> set[TopicPartition]:
                events.append(("markers", frozenset(pending)))
                return set()

            monkeypatch.setattr(broker.replica_manager, "await_replication", await_replication)
            monkeypatch.setattr(svc, "_write_round", write_round)
            entry = TxnMarkers(TID, 1000, 0, True, frozenset([DATA]))
            async with asyncio.timeout(10):
                await svc._write_markers(entry, [PREPARE])
            return events
        finally:
            await broker.stop()

    events = asyncio.run(run())
    if resigned:
        assert events == [("replication", ErrorCode.request_timed_out)]
    else:
        assert events == [
            ("replication", ErrorCode.request_timed_out),
            ("replication", ErrorCode.request_timed_out),
            ("replication", ErrorCode.none),
            ("markers", frozenset([DATA])),
        ]
