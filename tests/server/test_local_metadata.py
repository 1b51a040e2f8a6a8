"""LocalMetadataStore: topics with ids, partitions and configs survive a reopen; listeners hear changes."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.metadata.image import BrokerImage, TopicImage
from odradek.metadata.local import LocalMetadataStore
from odradek.metadata.store import (
    InvalidPartitions,
    InvalidReplicationFactor,
    TopicExists,
    UnknownTopic,
)


def open_store(path: Path) -> LocalMetadataStore:
    return LocalMetadataStore(
        path, node_id=1, cluster_id="c1", broker=BrokerImage(1, (("PLAINTEXT", "127.0.0.1", 9092),))
    )


def test_topics_persist_across_reopen(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    created = store.create_topic("t", 3, 1, {"retention.ms": "1000"})
    store.create_partitions("t", 5)
    store.set_topic_configs("t", {"cleanup.policy": "compact"})
    store.set_broker_configs({"log.retention.ms": "5"})
    reopened = open_store(tmp_path)
    topic = reopened.topic("t")
    assert topic is not None
    assert topic.topic_id == created.topic_id
    assert [p.partition for p in topic.partitions] == [0, 1, 2, 3, 4]
    assert all(p.leader == 1 and p.isr == (1,) for p in topic.partitions)
    assert reopened.topic_configs("t") == {"cleanup.policy": "compact"}
    assert reopened.broker_configs() == {"log.retention.ms": "5"}
    assert reopened.topic_by_id(created.topic_id) == topic
    reopened.delete_topic("t")
    assert open_store(tmp_path).topics() == {}


def test_errors(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    store.create_topic("t", 1, 1)
    with pytest.raises(TopicExists):
        store.create_topic("t", 1, 1)
    with pytest.raises(InvalidReplicationFactor):
        store.create_topic("u", 1, 2)
    with pytest.raises(InvalidPartitions):
        store.create_topic("u", 0, 1)
    with pytest.raises(InvalidPartitions):
        store.create_partitions("t", 1)
    with pytest.raises(UnknownTopic):
        store.delete_topic("nope")


def test_listeners_hear_every_change(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    heard: list[tuple[TopicImage | None, TopicImage | None]] = []

    class Listener:
        def on_topic_changed(self, before, after) -> None:
            heard.append((before, after))

    store.subscribe(Listener())
    created = store.create_topic("t", 1, 1)
    grown = store.create_partitions("t", 2)
    store.delete_topic("t")
    assert heard == [(None, created), (created, grown), (grown, None)]


def test_broker_configs_per_resource_persist(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    store.set_broker_configs({"log.retention.ms": "5"})
    store.set_broker_configs({"log.retention.ms": "7", "log.retention.bytes": "9"}, "1")
    reopened = open_store(tmp_path)
    assert reopened.broker_configs() == {"log.retention.ms": "5"}
    assert reopened.broker_configs("1") == {"log.retention.ms": "7", "log.retention.bytes": "9"}
    assert reopened.broker_configs("2") == {}
    reopened.set_broker_configs({}, "1")
    assert open_store(tmp_path).broker_configs("1") == {}


def test_a_reserved_topic_is_invisible_and_taken(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    heard: list = []

    class Listener:
        def on_topic_changed(self, before, after) -> None:
            heard.append(after)

    store.subscribe(Listener())
    image = store.new_topic("t", 3, 1)
    assert store.topic("t") is None and store.pending_topics() == {"t"} and heard == []
    with pytest.raises(TopicExists):
        store.new_topic("t", 1, 1)
    store.abandon_new_topic("t")
    image = store.new_topic("t", 3, 1)
    assert store.commit_new_topic(image) == store.topic("t") == open_store(tmp_path).topic("t")
    assert heard == [image] and store.pending_topics() == set()


def test_grown_partitions_commit_only_onto_the_same_topic(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    store.create_topic("t", 1, 1)
    grown = store.grown_topic("t", 3)
    assert len(store.topic("t").partitions) == 1
    store.delete_topic("t")
    store.create_topic("t", 1, 1)
    with pytest.raises(UnknownTopic):
        store.commit_partitions(grown)
    assert len(store.commit_partitions(store.grown_topic("t", 2)).partitions) == 2


def test_lookup_by_id_follows_every_change(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    first = store.create_topic("t", 1, 1)
    store.create_partitions("t", 2)
    altered = store.set_topic_configs("t", {"retention.ms": "7"})
    assert store.topic_by_id(first.topic_id) == altered == store.topic("t")
    store.delete_topic("t")
    assert store.topic_by_id(first.topic_id) is None and store.topic("t") is None
    second = store.create_topic("t", 1, 1)
    assert store.topic_by_id(first.topic_id) is None
    assert store.topic_by_id(second.topic_id) == second


def test_scram_credentials_persist_across_reopen_and_removal(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    text = "salt=AA==,stored_key=AQ==,server_key=Ag==,iterations=4096"
    store.set_scram_credentials("alice", {"SCRAM-SHA-256": text})
    store.set_scram_credentials("bob", {"SCRAM-SHA-512": text})
    reopened = open_store(tmp_path)
    assert reopened.scram_credentials() == {
        "alice": {"SCRAM-SHA-256": text},
        "bob": {"SCRAM-SHA-512": text},
    }
    assert reopened.user_scram_credentials("alice") == {"SCRAM-SHA-256": text}
    reopened.set_scram_credentials("alice", {})
    assert open_store(tmp_path).user_scram_credentials("alice") == {}
