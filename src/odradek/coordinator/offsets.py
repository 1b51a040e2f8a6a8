"""Committed offsets and the rules for keeping them (offsets.retention.minutes)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    #: Set only by old clients (OffsetCommit v1 retention); -1 otherwise.
    expire_timestamp_ms: int = -1

    def expired(self, now_ms: int, base_timestamp_ms: int, retention_ms: int) -> bool:
        """Kafka 2.1+ (KIP-211): an explicit expire time wins, else retention counts from the base."""
        if self.expire_timestamp_ms >= 0:
            return now_ms >= self.expire_timestamp_ms
        return now_ms - base_timestamp_ms >= retention_ms
