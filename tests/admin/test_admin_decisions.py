"""The sans-I/O decisions behind Kafka 4's admin APIs: page cuts, elections, assignments,
authorized-operation bit fields, features on the wire, dynamic broker config rules."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.metadata.features import finalized_on_wire, supported_on_wire
from odradek.metadata.image import BrokerImage, PartitionImage, TopicImage
from odradek.metadata.local import LocalMetadataStore
from odradek.metadata.partition_change import elect_leader, validate_assignment
from odradek.metadata.store import (
    ElectionNotNeeded,
    ElectionType,
    EligibleLeadersNotAvailable,
    InvalidReplicaAssignment,
    NoReassignmentInProgress,
    PreferredLeaderNotAvailable,
    UnknownTopic,
)
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.authorization import SUPPORTED_OPERATIONS, ResourceType, to_bit_field
from odradek.server.dynamic_broker_config import check_dynamic_update
from odradek.server.handlers.describe_topic_partitions import paginate


def topic(name: str, partitions: int) -> TopicImage:
    return TopicImage(
        name=name,
        topic_id=uuid.uuid4(),
        partitions=tuple(PartitionImage(p, 1, 0, (1,), (1,)) for p in range(partitions)),
    )


# -- DescribeTopicPartitions page cuts --------------------------------------------------------


@given(
    counts=st.dictionaries(
        st.text("abcdef", min_size=1, max_size=4), st.integers(0, 6), min_size=1, max_size=6
    ),
    limit=st.integers(1, 7),
)
def test_pages_cover_every_partition_once_in_order(counts: dict[str, int], limit: int) -> None:
    """Following next_cursor from the start describes each partition exactly once, in order,
    and no page holds more than ``limit`` partitions."""
    topics = {name: topic(name, n) for name, n in counts.items()}
    names = sorted(topics)
    seen: list[tuple[str, int]] = []
    cursor = None
    for _ in range(sum(counts.values()) + len(names) + 1):
        start = cursor[0] if cursor else ""
        page = paginate(
            [n for n in names if n >= start], topics.get, cursor, limit, include_unknown=True
        )
        described = [(e.name, i) for e in page.entries for i in e.partitions]
        assert len(described) <= limit
        seen.extend(described)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert cursor is None
    assert seen == [(name, i) for name in names for i in range(counts[name])]


def test_page_lists_unknown_topics_only_when_named() -> None:
    known = {"b": topic("b", 1)}
    named = paginate(["a", "b"], known.get, None, 10, include_unknown=True)
    assert [(e.name, e.topic is None) for e in named.entries] == [("a", True), ("b", False)]
    everything = paginate(["a", "b"], known.get, None, 10, include_unknown=False)
    assert [e.name for e in everything.entries] == ["b"]


def test_full_page_points_at_next_topic_even_unknown() -> None:
    known = {"a": topic("a", 2)}
    page = paginate(["a", "b"], known.get, None, 2, include_unknown=True)
    assert [e.name for e in page.entries] == ["a"]
    assert page.next_cursor == ("b", 0)


def test_cursor_past_the_last_partition_describes_none() -> None:
    known = {"a": topic("a", 2)}
    page = paginate(["a"], known.get, ("a", 5), 10, include_unknown=True)
    assert [list(e.partitions) for e in page.entries] == [[]]
    assert page.next_cursor is None


# -- Elections and assignments ----------------------------------------------------------------


def partition(leader: int, replicas: tuple[int, ...], isr: tuple[int, ...]) -> PartitionImage:
    return PartitionImage(0, leader, 4, replicas, isr)


def test_preferred_election() -> None:
    after = elect_leader(partition(2, (1, 2), (1, 2)), ElectionType.PREFERRED, {1, 2})
    assert (after.leader, after.leader_epoch, after.isr) == (1, 5, (1, 2))
    with pytest.raises(ElectionNotNeeded):
        elect_leader(partition(1, (1, 2), (1, 2)), ElectionType.PREFERRED, {1, 2})
    with pytest.raises(PreferredLeaderNotAvailable):  # not in the ISR
        elect_leader(partition(2, (1, 2), (2,)), ElectionType.PREFERRED, {1, 2})
    with pytest.raises(PreferredLeaderNotAvailable):  # not alive
        elect_leader(partition(2, (1, 2), (1, 2)), ElectionType.PREFERRED, {2})


def test_unclean_election() -> None:
    with pytest.raises(ElectionNotNeeded):
        elect_leader(partition(2, (1, 2), (2,)), ElectionType.UNCLEAN, {1, 2})
    in_sync = elect_leader(partition(-1, (1, 2, 3), (3,)), ElectionType.UNCLEAN, {1, 3})
    assert (in_sync.leader, in_sync.isr, in_sync.leader_epoch) == (3, (3,), 5)
    unclean = elect_leader(partition(-1, (1, 2), (3,)), ElectionType.UNCLEAN, {2})
    assert (unclean.leader, unclean.isr) == (2, (2,))
    with pytest.raises(EligibleLeadersNotAvailable):
        elect_leader(partition(-1, (1, 2), (1,)), ElectionType.UNCLEAN, {3})


@pytest.mark.parametrize("replicas", [(), (1, 1), (1, 9)])
def test_invalid_assignments(replicas: tuple[int, ...]) -> None:
    with pytest.raises(InvalidReplicaAssignment):
        validate_assignment(replicas, {1, 2})


def test_valid_assignment_keeps_order() -> None:
    assert validate_assignment([2, 1], {1, 2}) == (2, 1)


@pytest.fixture
def store(tmp_path) -> LocalMetadataStore:
    s = LocalMetadataStore(tmp_path, 1, "cluster", BrokerImage(1, (("PLAINTEXT", "h", 1),)))
    s.create_topic("t", 2, 1)
    return s


def error_codes(results: dict) -> dict:
    return {k: None if v is None else v.error_code for k, v in results.items()}


def test_local_store_elections(store: LocalMetadataStore) -> None:
    results = store.elect_leaders(ElectionType.PREFERRED, [("t", 0), ("t", 2), ("u", 0)])
    assert error_codes(results) == {
        ("t", 0): ErrorCode.election_not_needed,
        ("t", 2): ErrorCode.unknown_topic_or_partition,
        ("u", 0): ErrorCode.unknown_topic_or_partition,
    }
    assert set(store.elect_leaders(ElectionType.UNCLEAN, None)) == {("t", 0), ("t", 1)}


def test_local_store_reassignments(store: LocalMetadataStore) -> None:
    results = store.alter_partition_reassignments(
        {("t", 0): [1], ("t", 1): None, ("t", 5): [1], ("x", 0): [1]}
    )
    assert results[("t", 0)] is None
    assert isinstance(results[("t", 1)], NoReassignmentInProgress)
    assert isinstance(results[("t", 5)], UnknownTopic)
    assert isinstance(results[("x", 0)], UnknownTopic)
    assert isinstance(store.alter_partition_reassignments({("t", 0): [2]})[("t", 0)], KafkaError)
    assert store.list_partition_reassignments(None) == {}
    assert store.topic("t").partitions[0].replicas == (1,)


# -- Authorized operations and features -------------------------------------------------------


def test_bit_fields_match_kafka() -> None:
    # Kafka's values with no authorizer (AclOperation codes as bit positions).
    assert to_bit_field(SUPPORTED_OPERATIONS[ResourceType.TOPIC]) == 3576
    assert to_bit_field(SUPPORTED_OPERATIONS[ResourceType.CLUSTER]) == 8096
    assert to_bit_field(SUPPORTED_OPERATIONS[ResourceType.GROUP]) == 3400


def test_features_on_the_wire() -> None:
    assert finalized_on_wire() == {
        "metadata.version": 25,
        "group.version": 1,
        "transaction.version": 2,
    }
    assert set(supported_on_wire(4)) == {
        "metadata.version",
        "group.version",
        "transaction.version",
        "kraft.version",
    }
    assert set(supported_on_wire(3)) == {"metadata.version"}


# -- Dynamic broker configs -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("names", "per_broker", "refused"),
    [
        (["sasl.kerberos.min.time.before.relogin", "log.retention.ms"], True, None),
        (["num.io.threads", "log.cleaner.threads", "max.connections"], False, None),
        (["listener.name.internal.ssl.keystore.location"], True, None),
        (["listener.name.internal.max.connections"], False, None),
        (["log.dirs"], True, "Cannot update these configs dynamically: log.dirs"),
        (["no.such.config"], True, "Cannot update these configs dynamically"),
        (["ssl.keystore.location"], True, "only per-listener using the listener prefix"),
        (["sasl.kerberos.min.time.before.relogin"], False, "at default cluster level"),
        (["listener.name.internal.ssl.keystore.location"], False, "at default cluster level"),
    ],
)
def test_dynamic_update_rules(names: list[str], per_broker: bool, refused: str | None) -> None:
    if refused is None:
        check_dynamic_update(names, per_broker)
        return
    with pytest.raises(KafkaError, match=refused) as caught:
        check_dynamic_update(names, per_broker)
    assert caught.value.error_code == ErrorCode.invalid_request
