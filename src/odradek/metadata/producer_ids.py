"""Producer id allocation for InitProducerId, persisted so an id is never handed out twice.

Like Kafka's controller, ids are reserved in blocks: before the first id of a
block is used, the end of the block is written (atomically, fsynced) to the
state file. A restart continues after the last reserved block, so ids issued
before a crash are never reused, at the cost of skipping the unused rest of a
block. In a cluster every broker hands out ids, so blocks come from the
cluster's metadata instead (``/latest_producer_id_block`` in ZooKeeper, as
Kafka's ZooKeeper mode): no two brokers ever hold the same block. Transactional ids keep their (producer id, epoch) here too, so that a
new producer instance with the same transactional id fences the old one by an
epoch bump (KIP-98), and KIP-360 epoch bumps by a live producer are accepted.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from odradek.durable import write_atomically
from odradek.protocol.errors import ErrorCode, KafkaError

BLOCK_SIZE = 1000
#: Kafka stops bumping at Short.MaxValue - 1 and moves to a fresh producer id.
MAX_EPOCH = 32767 - 1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


class ProducerFenced(KafkaError):
    """The caller's (producer id, epoch) is older than the transactional id's current one."""

    error_code = ErrorCode.producer_fenced


@dataclass(frozen=True, slots=True)
class ProducerIdAndEpoch:
    producer_id: int
    epoch: int


class ProducerIdManager:
    """Hands out producer ids and epochs; all state lives in one JSON file."""

    def __init__(
        self,
        state_file: Path,
        block_size: int = BLOCK_SIZE,
        take_block: Callable[[int], int] | None = None,
    ) -> None:
        """``take_block(size)``: in a cluster, reserves ``size`` ids for this broker alone and
        returns the first (the cluster's metadata store keeps the blocks); None reserves
        them in ``state_file``."""
        self._path = Path(state_file)
        self._block_size = block_size
        self._take_block = take_block
        state = json.loads(self._path.read_text()) if self._path.exists() else {}
        # Everything below the persisted block end may have been issued before.
        self._next_id: int = state.get("next_block_start", 0)
        self._block_end: int = self._next_id
        self._transactional: dict[str, ProducerIdAndEpoch] = {
            tid: ProducerIdAndEpoch(pid, epoch)
            for tid, (pid, epoch) in state.get("transactional_ids", {}).items()
        }

    def generate_producer_id(self) -> int:
        """A producer id never returned before, by this or any earlier process."""
        if self._next_id >= self._block_end:
            if self._take_block is not None:
                self._next_id = self._take_block(self._block_size)
                self._block_end = self._next_id + self._block_size
            else:
                self._block_end = self._next_id + self._block_size
                self._persist()
        producer_id = self._next_id
        self._next_id += 1
        return producer_id

    def init_producer_id(
        self,
        transactional_id: str | None,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
    ) -> ProducerIdAndEpoch:
        """The id and epoch an InitProducerId request gets, as Kafka's TransactionCoordinator.

        Without a transactional id every call gets a fresh producer id at epoch 0.
        With one, a fresh producer (no id given) or the current holder bumps the epoch,
        fencing any older instance; a stale (id, epoch) is ProducerFenced.
        """
        if transactional_id is None:
            return ProducerIdAndEpoch(self.generate_producer_id(), 0)
        current = self._transactional.get(transactional_id)
        if current is None:
            granted = ProducerIdAndEpoch(self.generate_producer_id(), 0)
        else:
            if producer_id != NO_PRODUCER_ID and (
                producer_id != current.producer_id or producer_epoch != current.epoch
            ):
                raise ProducerFenced(
                    f"producer {producer_id} epoch {producer_epoch} is fenced by "
                    f"producer {current.producer_id} epoch {current.epoch}"
                )
            if current.epoch >= MAX_EPOCH:
                granted = ProducerIdAndEpoch(self.generate_producer_id(), 0)
            else:
                granted = ProducerIdAndEpoch(current.producer_id, current.epoch + 1)
        self._transactional[transactional_id] = granted
        self._persist()
        return granted

    def _persist(self) -> None:
        state = {
            "next_block_start": self._block_end,
            "transactional_ids": {
                tid: [p.producer_id, p.epoch] for tid, p in sorted(self._transactional.items())
            },
        }
        write_atomically(self._path, json.dumps(state))
