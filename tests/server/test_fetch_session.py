"""FetchSessionCache: ids, epochs and eviction as KIP-227 describes."""

from __future__ import annotations

from collections import OrderedDict

import pytest

from odradek.server.fetch_session import (
    CachedPartition,
    FetchSessionCache,
    FetchSessionIdNotFound,
    InvalidFetchSessionEpoch,
)
from odradek.storage import TopicPartition


def test_epochs_advance_and_are_checked() -> None:
    cache = FetchSessionCache()
    session = cache.new_session(
        OrderedDict({TopicPartition("t", 0): CachedPartition(0, 100)}), now_ms=0
    )
    assert session.session_id > 0 and session.epoch == 1
    assert cache.incremental(session.session_id, 1, now_ms=1) is session
    with pytest.raises(InvalidFetchSessionEpoch):
        cache.incremental(session.session_id, 1, now_ms=2)
    assert cache.incremental(session.session_id, 2, now_ms=3).epoch == 3
    cache.remove(session.session_id)
    with pytest.raises(FetchSessionIdNotFound):
        cache.incremental(session.session_id, 3, now_ms=4)


def test_least_recently_used_session_is_evicted() -> None:
    cache = FetchSessionCache(max_sessions=2)
    first = cache.new_session(OrderedDict(), 0)
    second = cache.new_session(OrderedDict(), 0)
    cache.incremental(first.session_id, 1, 1)
    cache.new_session(OrderedDict(), 2)
    assert len(cache) == 2
    cache.incremental(first.session_id, 2, 3)
    with pytest.raises(FetchSessionIdNotFound):
        cache.incremental(second.session_id, 1, 3)
