from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.metadata.producer_ids import MAX_EPOCH, ProducerFenced, ProducerIdManager
from odradek.protocol.errors import ErrorCode


def test_ids_are_unique_and_increasing(tmp_path: Path) -> None:
    manager = ProducerIdManager(tmp_path / "producer_ids.json", block_size=3)
    ids = [manager.generate_producer_id() for _ in range(10)]
    assert ids == sorted(set(ids))


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=7), min_size=1, max_size=6))
def test_ids_never_reused_across_restarts(tmp_path_factory, allocations_per_life) -> None:
    state = tmp_path_factory.mktemp("pid") / "producer_ids.json"
    seen: list[int] = []
    for count in allocations_per_life:
        manager = ProducerIdManager(state, block_size=4)  # a "restart" each time
        seen.extend(manager.generate_producer_id() for _ in range(count))
    assert len(seen) == len(set(seen))


def test_idempotent_producer_gets_fresh_id_at_epoch_zero(tmp_path: Path) -> None:
    manager = ProducerIdManager(tmp_path / "p.json")
    first = manager.init_producer_id(None)
    second = manager.init_producer_id(None, first.producer_id, first.epoch)
    assert first.epoch == second.epoch == 0
    assert first.producer_id != second.producer_id


def test_transactional_id_epoch_bumps_and_fences(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    manager = ProducerIdManager(path)
    first = manager.init_producer_id("tx-1")
    assert first.epoch == 0
    second = manager.init_producer_id("tx-1")  # a new instance fences the old one
    assert (second.producer_id, second.epoch) == (first.producer_id, 1)
    third = manager.init_producer_id("tx-1", second.producer_id, second.epoch)  # KIP-360 bump
    assert third.epoch == 2
    with pytest.raises(ProducerFenced) as info:
        manager.init_producer_id("tx-1", first.producer_id, first.epoch)
    assert info.value.error_code == ErrorCode.producer_fenced
    restarted = ProducerIdManager(path)
    assert restarted.init_producer_id("tx-1").epoch == 3


def test_epoch_exhaustion_moves_to_new_producer_id(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    manager = ProducerIdManager(path)
    first = manager.init_producer_id("tx")
    path.write_text(
        '{"next_block_start": 1000, "transactional_ids": {"tx": [%d, %d]}}'
        % (first.producer_id, MAX_EPOCH)
    )
    renewed = ProducerIdManager(path).init_producer_id("tx")
    assert renewed.epoch == 0 and renewed.producer_id != first.producer_id
