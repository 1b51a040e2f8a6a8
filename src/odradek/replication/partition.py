"""Partition: one topic-partition's replication state around its Log.

Kept sans-I/O: a plain object driven by method calls. A single node is a
cluster of one, so the ISR is {this node} and the high watermark follows the
log end offset as soon as an append returns; replication will add followers
whose fetch positions hold the high watermark back, without changing callers.
"""

from __future__ import annotations

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.storage import FetchDataInfo, Log, LogAppendInfo

READ_UNCOMMITTED = 0
READ_COMMITTED = 1


class NotEnoughReplicas(KafkaError):
    error_code = ErrorCode.not_enough_replicas


class FencedLeaderEpoch(KafkaError):
    error_code = ErrorCode.fenced_leader_epoch


class UnknownLeaderEpoch(KafkaError):
    error_code = ErrorCode.unknown_leader_epoch


class Partition:
    def __init__(self, log: Log, node_id: int, leader_epoch: int) -> None:
        self.log = log
        self.topic_partition = log.topic_partition
        self.leader_id = node_id
        self.leader_epoch = leader_epoch
        self.isr: frozenset[int] = frozenset({node_id})
        self.replicas: tuple[int, ...] = (node_id,)
        self.high_watermark = log.log_end_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def last_stable_offset(self) -> int:
        """Without open transactions the last stable offset is the high watermark."""
        return self.high_watermark

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """KIP-320: a client's epoch older than ours is fenced, a newer one unknown to us."""
        if current_leader_epoch < 0:
            return
        if current_leader_epoch < self.leader_epoch:
            raise FencedLeaderEpoch(f"epoch {current_leader_epoch} < {self.leader_epoch}")
        if current_leader_epoch > self.leader_epoch:
            raise UnknownLeaderEpoch(f"epoch {current_leader_epoch} > {self.leader_epoch}")

    def append_records_to_leader(
        self, records: memoryview | bytes, required_acks: int, now_ms: int
    ) -> LogAppendInfo:
        """Append as leader; acks=-1 needs min.insync.replicas in the ISR first."""
        if required_acks == -1 and len(self.isr) < self.log.config.min_insync_replicas:
            raise NotEnoughReplicas(
                f"The size of the current ISR {len(self.isr)} is insufficient to satisfy "
                f"the min.isr requirement of {self.log.config.min_insync_replicas}"
            )
        info = self.log.append(records, leader_epoch=self.leader_epoch, now_ms=now_ms)
        self._maybe_increment_high_watermark()
        return info

    def _maybe_increment_high_watermark(self) -> None:
        # Every ISR member (only us) has the whole log.
        self.high_watermark = self.log.log_end_offset

    def read(
        self, fetch_offset: int, max_bytes: int, isolation_level: int, min_one_message: bool
    ) -> FetchDataInfo:
        """Records from ``fetch_offset`` up to the high watermark (last stable offset for read_committed)."""
        max_offset = (
            self.last_stable_offset if isolation_level == READ_COMMITTED else self.high_watermark
        )
        return self.log.read(
            fetch_offset, max_bytes, max_offset=max_offset, min_one_message=min_one_message
        )
