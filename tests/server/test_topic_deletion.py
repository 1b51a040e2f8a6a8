"""Topic deletion as Kafka's LogManager.asyncDelete: rename on the loop, remove in a thread later.

The event loop only detaches each log and renames its directory to
``<topic>-<partition>.<uuid>-delete``; the files are closed and the directory removed
file.delete.delay.ms later by the LogDeleter thread, and a restart in between
finishes the deletion without ever loading the renamed directory as a partition.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from odradek import EmbeddedBroker
from odradek.protocol.records import new_batch, write_varint
from odradek.storage import Log, LogConfig, LogManager, TopicPartition
from odradek.storage.cleaner import LogCleaner
from odradek.storage.log_deleter import LogDeleter, delete_dir_name

DELETE_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)\.[0-9a-f]{32}-delete$")


def one_record_batch(value: bytes = b"v", key: bytes = b"k") -> bytes:
    body = b"\x00" + write_varint(0) + write_varint(0) + write_varint(len(key)) + key
    body += write_varint(len(value)) + value
    body += write_varint(0)  # no headers
    return new_batch(
        write_varint(len(body)) + body,
        attributes=0,
        last_offset_delta=0,
        base_timestamp=1,
        max_timestamp=1,
        records_count=1,
    )


def wait_for(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.05)


def delete_dirs(root: Path, topic: str) -> list[Path]:
    return [p for p in root.iterdir() if (m := DELETE_DIR.match(p.name)) and m["topic"] == topic]


def partition_dirs(root: Path, topic: str) -> list[Path]:
    return [p for p in root.iterdir() if re.fullmatch(re.escape(topic) + r"-\d+", p.name)]


def started(root: Path, delay_ms: int) -> LogManager:
    lm = LogManager([str(root)], LogConfig(file_delete_delay_ms=delay_ms))
    lm.startup()
    return lm


def append_one(lm: LogManager, tp: TopicPartition) -> None:
    lm.get_or_create_log(tp).append(one_record_batch(), leader_epoch=0, now_ms=0)


# -- LogManager and LogDeleter on real files ------------------------------------------------


def test_delete_dir_name_is_kafkas_and_fits_in_255_bytes() -> None:
    assert DELETE_DIR.match(delete_dir_name(TopicPartition("orders", 7)))
    assert delete_dir_name(TopicPartition("orders", 7)).startswith("orders-7.")
    long_name = delete_dir_name(TopicPartition("t" * 249, 12345))
    assert len(long_name) == 255 and long_name.endswith("-12345." + long_name[-39:-7] + "-delete")


def test_delete_renames_now_and_removes_after_the_delay(tmp_path: Path) -> None:
    lm = started(tmp_path, delay_ms=60_000)
    tp = TopicPartition("orders", 0)
    append_one(lm, tp)
    region = lm.get_log(tp).read(0, 1000).regions[0]
    lm.delete_log(tp)
    assert lm.get_log(tp) is None
    assert not partition_dirs(tmp_path, "orders")
    (renamed,) = delete_dirs(tmp_path, "orders")
    assert {p.suffix for p in renamed.iterdir()} >= {".log", ".index", ".timeindex"}
    # A fetch that took a file region before the deletion can still send it: files stay open.
    assert len(region.read_bytes()) == region.length > 0
    assert lm.deleter.pending == 1
    lm.shutdown()  # the deletion is not due: the dir keeps its suffix for the next start
    assert renamed.exists()

    lm = started(tmp_path, delay_ms=0)
    assert lm.all_logs() == []  # never loaded as a partition
    wait_for(lambda: not renamed.exists())
    lm.shutdown()


def test_delay_zero_removes_in_the_background(tmp_path: Path) -> None:
    lm = started(tmp_path, delay_ms=0)
    for p in range(20):
        append_one(lm, TopicPartition("gone", p))
    for p in range(20):
        lm.delete_log(TopicPartition("gone", p))
    assert not partition_dirs(tmp_path, "gone")
    wait_for(lambda: not delete_dirs(tmp_path, "gone") and lm.deleter.pending == 0)
    lm.shutdown()


def test_recreate_the_same_name_right_after_deletion(tmp_path: Path) -> None:
    lm = started(tmp_path, delay_ms=60_000)
    tp = TopicPartition("again", 0)
    for _ in range(3):
        append_one(lm, tp)
    lm.delete_log(tp)
    fresh = lm.get_or_create_log(tp)
    assert fresh.log_end_offset == 0 and fresh.dir == tmp_path / "again-0"
    append_one(lm, tp)
    assert lm.get_log(tp).log_end_offset == 1
    assert len(delete_dirs(tmp_path, "again")) == 1
    lm.shutdown()
    lm = started(tmp_path, delay_ms=0)
    assert lm.get_log(tp).log_end_offset == 1  # the new log survives the old one's removal
    wait_for(lambda: not delete_dirs(tmp_path, "again"))
    assert lm.get_log(tp).log_end_offset == 1
    lm.shutdown()


def test_a_recreated_partition_survives_a_crash_without_the_old_offsets(tmp_path: Path) -> None:
    lm = started(tmp_path, delay_ms=60_000)
    tp = TopicPartition("again", 0)
    for _ in range(10):
        append_one(lm, tp)
    lm.get_log(tp).maybe_increment_log_start_offset(5)
    lm.checkpoint()  # the checkpoints now say: log start 5, recovery point 10
    lm.delete_log(tp)
    for _ in range(2):
        append_one(lm, tp)  # re-created: a new log at offset 0
    lm.deleter.stop()
    lm._unlock_all()  # a crash: no shutdown, no further checkpoint
    lm = started(tmp_path, delay_ms=60_000)
    log = lm.get_log(tp)
    assert (log.log_start_offset, log.log_end_offset) == (0, 2)
    assert log.read(0, 10_000).size > 0
    lm.shutdown()


def test_a_249_character_topic_can_be_deleted(tmp_path: Path) -> None:
    lm = started(tmp_path, delay_ms=60_000)
    tp = TopicPartition("x" * 249, 0)
    append_one(lm, tp)
    lm.delete_log(tp)
    assert not (
        tmp_path / tp.dir_name
    ).exists()  # renamed, though "<topic>-0.<uuid>-delete" would be too long
    assert len(delete_dirs(tmp_path, "x" * 249)) == 0 and len(list(tmp_path.glob("x*-delete"))) == 1
    lm.shutdown()


def test_a_log_in_use_is_removed_only_once_released(tmp_path: Path) -> None:
    lg = Log(tmp_path / "busy-0", LogConfig())
    lg.append(one_record_batch(), leader_epoch=0, now_ms=0)
    doomed = tmp_path / "busy-0.0123-delete"
    lg.dir.rename(doomed)
    busy = threading.Event()
    busy.set()
    deleter = LogDeleter(in_use=lambda log: busy.is_set())
    deleter.schedule(doomed, lg, 0)
    time.sleep(1.5)  # past a retry: still in use, so still there
    assert doomed.exists() and deleter.pending == 1
    busy.clear()
    wait_for(lambda: not doomed.exists())
    assert all(seg.closed for seg in lg.segments)
    deleter.stop()


class GatedCleaner(LogCleaner):
    """The real cleaner, held at the start of its thread until the test lets it go."""

    def __init__(self) -> None:
        super().__init__()
        self.entered, self.proceed = threading.Event(), threading.Event()

    def clean(self, log, cleanable, now_ms):
        self.entered.set()
        assert self.proceed.wait(30)
        return super().clean(log, cleanable, now_ms)


def test_a_log_being_cleaned_is_removed_after_its_cleaning(tmp_path: Path) -> None:
    cfg = LogConfig(
        cleanup_policy=("compact",),
        segment_bytes=400,
        min_cleanable_dirty_ratio=0.01,
        file_delete_delay_ms=0,
    )
    cleaner = GatedCleaner()
    lm = LogManager([str(tmp_path)], cfg, cleaner=cleaner)
    lm.startup()
    tp = TopicPartition("compacted", 0)
    lg = lm.get_or_create_log(tp, cfg)
    for i in range(40):
        lg.append(
            one_record_batch(b"value-%d" % i + b"x" * 40, b"key%d" % (i % 3)),
            leader_epoch=0,
            now_ms=0,
        )

    async def scenario() -> None:
        cleaning = asyncio.create_task(lm.clean_logs(1_000_000))
        await asyncio.to_thread(cleaner.entered.wait, 30)
        lm.delete_log(tp)  # renamed while the cleaner's thread works on it
        (renamed,) = delete_dirs(tmp_path, "compacted")
        await asyncio.sleep(1.5)  # past the deleter's retry: due, but not removed while cleaning
        assert renamed.exists() and lm.deleter.pending == 1
        cleaner.proceed.set()
        await cleaning

    asyncio.run(asyncio.wait_for(scenario(), 60))
    assert not lm.offline_dirs
    wait_for(
        lambda: not delete_dirs(tmp_path, "compacted")
    )  # removed once the cleaning let go of it
    lm.shutdown()


# -- a real broker ----------------------------------------------------------------------------


class LiveTraffic:
    """A producer and a consumer on another topic, running while a big topic is deleted."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap, self.topic = bootstrap, topic
        self.sent = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._produce, daemon=True)

    def __enter__(self) -> LiveTraffic:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)

    def _produce(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 0})

        def report(err, msg) -> None:
            if err is not None:
                self.errors.append(str(err))

        while not self._stop.is_set() or self.sent < 20:
            producer.produce(self.topic, f"m{self.sent}".encode(), on_delivery=report)
            self.sent += 1
            producer.poll(0.01)
        if producer.flush(30):
            self.errors.append("unflushed messages")

    def consume_all(self) -> list[bytes]:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"g-{uuid.uuid4().hex[:6]}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        consumer.subscribe([self.topic])
        values: list[bytes] = []
        deadline = time.monotonic() + 60
        try:
            while len(values) < self.sent and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is not None and msg.error() is None:
                    values.append(msg.value())
        finally:
            consumer.close()
        return values


def create(admin: AdminClient, name: str, partitions: int) -> None:
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(60)


def test_broker_deletes_a_big_topic_while_another_is_served(tmp_path: Path) -> None:
    with EmbeddedBroker(
        data_dir=tmp_path / "data", config={"log.segment.delete.delay.ms": "0"}
    ) as broker:
        root = broker.data_dir
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        create(admin, "live", 1)
        create(admin, "big", 300)
        with LiveTraffic(broker.bootstrap_servers, "live") as traffic:
            admin.delete_topics(["big"])["big"].result(60)
            assert not partition_dirs(root, "big")  # renamed before the response
            create(admin, "big", 2)  # the name is free again at once
        assert sorted(p.name for p in partition_dirs(root, "big")) == ["big-0", "big-1"]
        wait_for(lambda: not delete_dirs(root, "big"))
        assert traffic.errors == []
        values = traffic.consume_all()
        assert values == [f"m{i}".encode() for i in range(traffic.sent)]


def test_restart_finishes_a_pending_deletion(tmp_path: Path) -> None:
    with EmbeddedBroker(data_dir=tmp_path / "data") as broker:  # file.delete.delay.ms: Kafka's 60 s
        root = broker.data_dir
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        create(admin, "doomed", 50)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
        for p in range(50):
            producer.produce("doomed", b"x", partition=p)
        assert producer.flush(30) == 0
        admin.delete_topics(["doomed"])["doomed"].result(60)
        assert not partition_dirs(root, "doomed")
        assert sorted(
            int(DELETE_DIR.match(p.name)["partition"]) for p in delete_dirs(root, "doomed")
        ) == list(range(50))
        broker.config["log.segment.delete.delay.ms"] = "0"
        broker.restart()
        wait_for(lambda: not delete_dirs(root, "doomed"))
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        assert "doomed" not in admin.list_topics(timeout=30).topics
        assert not partition_dirs(root, "doomed")


def test_a_dynamic_broker_delete_delay_applies_to_later_deletions(tmp_path: Path) -> None:
    """log.segment.delete.delay.ms altered at run time is the delay of the next deletion
    (Kafka's reconfigured default log config), not the value the broker started with."""
    with EmbeddedBroker(data_dir=tmp_path / "data") as broker:  # starts with Kafka's 60 s
        root = broker.data_dir
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        node_id = str(admin.describe_cluster().result(30).nodes[0].id)
        resource = ConfigResource(
            ResourceType.BROKER,
            node_id,
            incremental_configs=[
                ConfigEntry(
                    "log.segment.delete.delay.ms", "0", incremental_operation=AlterConfigOpType.SET
                )
            ],
        )
        (future,) = admin.incremental_alter_configs([resource]).values()
        future.result(30)
        create(admin, "brief", 3)
        admin.delete_topics(["brief"])["brief"].result(60)
        assert not partition_dirs(root, "brief")
        wait_for(
            lambda: not delete_dirs(root, "brief"), timeout=30
        )  # well under the 60 s start-up value
