"""The ReplicaManager tells a topic's LeadershipListeners when this broker starts and stops
leading its partitions: what moves a coordinator's keys between brokers."""

from __future__ import annotations

import uuid
from pathlib import Path

from odradek.metadata.image import PartitionImage, TopicImage
from odradek.replication.replica_manager import ReplicaManager
from odradek.storage import LogConfig
from odradek.storage.log_manager import LogManager

NODE = 1


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, int, int | None]] = []

    def on_election(self, partition: int, leader_epoch: int) -> None:
        self.events.append(("election", partition, leader_epoch))

    def on_resignation(self, partition: int) -> None:
        self.events.append(("resignation", partition, None))


def topic(name: str, *leaders_and_epochs: tuple[int, int]) -> TopicImage:
    return TopicImage(
        name,
        uuid.UUID(int=1),
        tuple(
            PartitionImage(i, leader, epoch, (NODE, 2), (NODE, 2))
            for i, (leader, epoch) in enumerate(leaders_and_epochs)
        ),
    )


class NoMetadata:
    def topics(self) -> dict:
        return {}

    def subscribe(self, listener) -> None:
        pass


def test_listeners_follow_elections_and_resignations_of_their_topic(tmp_path: Path) -> None:
    config = LogConfig()
    manager = ReplicaManager(LogManager([str(tmp_path)], config), NoMetadata(), NODE, config)  # type: ignore[arg-type]
    offsets, other = Recorder(), Recorder()
    manager.on_topic_changed(None, topic("offsets", (NODE, 0), (2, 0)))
    # Added later: told at once of the partitions led here already.
    manager.add_leadership_listener("offsets", offsets)
    manager.add_leadership_listener("elsewhere", other)
    assert offsets.events == [("election", 0, 0)]

    before = topic("offsets", (NODE, 0), (2, 0))
    after = topic("offsets", (2, 1), (NODE, 1))
    manager.on_topic_changed(before, after)
    assert offsets.events[1:] == [("resignation", 0, None), ("election", 1, 1)]

    # A stale image (older epochs) changes no role and tells nobody.
    manager.on_topic_changed(after, topic("offsets", (NODE, 0), (2, 0)))
    assert len(offsets.events) == 3

    manager.on_topic_changed(after, None)  # deleted
    assert offsets.events[3:] == [("resignation", 1, None)]
    assert other.events == []
