from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.metadata.producer_ids import ProducerIdManager


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
