"""Offsets committed in transactions (TxnOffsetCommit): pending until their producer's marker,
also across a load and an unload of their __consumer_offsets partition."""

from __future__ import annotations

from odradek.coordinator.config import GroupCoordinatorConfig
from odradek.coordinator.coordinator import GroupCoordinator
from odradek.coordinator.offset_metadata import OffsetCommit

CONFIG = GroupCoordinatorConfig(offsets_topic_num_partitions=2)
PRODUCER = 7


def txn_commit(core: GroupCoordinator, group: str, offset: int) -> list:
    errors = core.txn_commit_offsets(
        group, PRODUCER, 0, "", None, -1, [OffsetCommit("t", 0, offset)], now_ms=0
    )
    assert errors == [0]
    return core.drain_records()


def test_a_replayed_transactional_commit_creates_its_group_as_the_commit_did() -> None:
    written = GroupCoordinator(CONFIG)
    (record,) = txn_commit(written, "simple", 5)
    assert written.list_groups() == [("simple", "", "Empty", "classic")]
    loaded = GroupCoordinator(CONFIG)
    loaded.load_record(record.key, record.value, 0, PRODUCER)
    assert loaded.list_groups() == written.list_groups()
    assert loaded.fetch_offsets("simple", [("t", 0)]) == {("t", 0): None}
    loaded.replay_end_transaction(record.partition, PRODUCER, True, 0)
    (om,) = loaded.fetch_offsets("simple", [("t", 0)]).values()
    assert om is not None and om.offset == 5


def test_unloading_forgets_offsets_pending_in_transactions() -> None:
    core = GroupCoordinator(CONFIG)
    (record,) = txn_commit(core, "g", 5)
    assert core.pending_transactional_offsets("g") == {("t", 0)}
    # Leadership moves away before the record is replicated; the next leader's log lacks it.
    core.unload_partition(record.partition)
    assert core.pending_transactional_offsets("g") == set()
    # Loaded again from a log without it: the producer's marker has nothing to apply.
    core.replay_end_transaction(record.partition, PRODUCER, True, 0)
    assert core.fetch_offsets("g", None) == {}
