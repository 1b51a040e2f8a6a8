"""The exactly-once sink's decision record: any decision round-trips through committed offsets,
chunked under Kafka's offset.metadata.max.bytes, and the latest complete one is read back."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.spark.decision import METADATA_MAX_BYTES, Decision, DecisionError, decode, encode

decisions = st.builds(
    Decision.of,
    st.integers(0, 2**62),
    st.dictionaries(
        st.integers(0, 100_000),
        st.tuples(st.integers(0, 2**62), st.integers(0, 32767)),
        max_size=600,
    ),
)


def rows(topic: str, committed: dict[int, tuple[int, str]]) -> list[tuple[str, int, int, str]]:
    return [(topic, p, offset, metadata) for p, (offset, metadata) in committed.items()]


@given(decisions)
def test_a_decision_round_trips_in_chunks_that_fit(decision: Decision) -> None:
    committed = encode(decision, partitions=64)
    assert all(len(metadata.encode()) <= METADATA_MAX_BYTES for _, metadata in committed.values())
    assert sorted(committed) == list(range(len(committed)))
    assert decode(rows("t", committed)) == decision


@given(decisions, decisions)
def test_the_latest_decision_wins_over_older_chunks(first: Decision, second: Decision) -> None:
    older, newer = sorted([first, second], key=lambda d: d.batch_id)
    if older.batch_id == newer.batch_id:
        return
    # The newer decision overwrites the older one's first chunks and leaves the rest behind.
    committed = {**encode(older, partitions=64), **encode(newer, partitions=64)}
    assert decode(rows("t", committed)) == newer


def test_offsets_of_other_writers_are_ignored_and_nothing_decided_is_none() -> None:
    assert decode([]) is None
    assert decode([("t", 0, 7, None), ("t", 1, 9, "some consumer's note")]) is None
    decided = Decision.of(3, {0: (1000, 2)})
    got = decode([("t", 1, 9, "note"), *rows("u", encode(decided, 1))])
    assert got == decided and got.identity(0) == (1000, 2) and got.identity(1) is None


def test_too_many_transactions_for_the_topic_partitions_is_refused() -> None:
    big = Decision.of(1, dict.fromkeys(range(400), (2**62, 32767)))
    with pytest.raises(DecisionError, match="partitions"):
        encode(big, partitions=1)


def test_an_incomplete_decision_is_an_error() -> None:
    big = Decision.of(5, dict.fromkeys(range(400), (2**62, 32767)))
    committed = encode(big, partitions=8)
    del committed[1]
    with pytest.raises(DecisionError, match="incomplete"):
        decode(rows("t", committed))
