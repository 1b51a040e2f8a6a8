"""Fetch sessions (KIP-227): the broker remembers a consumer's partitions between fetches.

A full fetch (epoch 0) creates a session; incremental fetches (epoch n > 0) send
only the partitions whose fetch position changed plus the ones to forget, and
the response carries only partitions with news (records, an error, or a moved
high watermark / log start offset). Epoch -1 is a sessionless full fetch.
Sans-I/O: the cache is a plain object the fetch handler drives.
"""

from __future__ import annotations

import itertools
import random
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.storage import TopicPartition

INITIAL_EPOCH = 0
FINAL_EPOCH = -1


class FetchSessionIdNotFound(KafkaError):
    error_code = ErrorCode.fetch_session_id_not_found


class InvalidFetchSessionEpoch(KafkaError):
    error_code = ErrorCode.invalid_fetch_session_epoch


@dataclass(slots=True)
class CachedPartition:
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    #: What the last response told the client; an incremental response repeats a
    #: partition only when one of these changed.
    high_watermark: int = -1
    log_start_offset: int = -1
    #: The topic id the client named it by (v13+), by which it forgets it.
    topic_id: uuid.UUID | None = None


@dataclass(slots=True)
class FetchSession:
    session_id: int
    epoch: int
    partitions: OrderedDict[TopicPartition, CachedPartition] = field(default_factory=OrderedDict)
    last_used_ms: int = 0


class FetchSessionCache:
    def __init__(self, max_sessions: int = 1000) -> None:
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self._max_sessions = max_sessions
        self._ids = itertools.count(random.randint(1, 2**20))

    def __len__(self) -> int:
        return len(self._sessions)

    def new_session(
        self, partitions: OrderedDict[TopicPartition, CachedPartition], now_ms: int
    ) -> FetchSession:
        """A session for a full fetch; the least recently used one is evicted when full."""
        if len(self._sessions) >= self._max_sessions:
            self._sessions.popitem(last=False)
        session_id = next(self._ids) & 0x7FFFFFFF or next(self._ids)
        session = FetchSession(session_id, INITIAL_EPOCH + 1, partitions, now_ms)
        self._sessions[session_id] = session
        return session

    def remove(self, session_id: int) -> None:
        self._sessions.pop(session_id, None)

    def incremental(self, session_id: int, epoch: int, now_ms: int) -> FetchSession:
        """The session an incremental fetch continues; checks and advances the epoch."""
        session = self._sessions.get(session_id)
        if session is None:
            raise FetchSessionIdNotFound(f"fetch session {session_id} not found")
        if epoch != session.epoch:
            raise InvalidFetchSessionEpoch(f"expected epoch {session.epoch}, got {epoch}")
        session.epoch = session.epoch + 1 if session.epoch < 2**31 - 1 else 1
        session.last_used_ms = now_ms
        self._sessions.move_to_end(session_id)
        return session
