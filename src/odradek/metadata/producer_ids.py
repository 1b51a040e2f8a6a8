"""Producer id allocation for InitProducerId, persisted so an id is never handed out twice.

Like Kafka's controller, ids are reserved in blocks: before the first id of a
block is used, the end of the block is written (atomically, fsynced) to the
state file. A restart continues after the last reserved block, so ids issued
before a crash are never reused, at the cost of skipping the unused rest of a
block. In a cluster every broker hands out ids, so blocks come from the
cluster's metadata instead (``/latest_producer_id_block`` in ZooKeeper, as
Kafka's ZooKeeper mode): no two brokers ever hold the same block. The epochs of
transactional ids are the transaction coordinator's (__transaction_state); this
module only hands out the ids.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from odradek.durable import write_atomically

BLOCK_SIZE = 1000


class ProducerIdManager:
    """Hands out producer ids; all state lives in one JSON file."""

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

    def _persist(self) -> None:
        state = {"next_block_start": self._block_end}
        write_atomically(self._path, json.dumps(state))
