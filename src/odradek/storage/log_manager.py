"""LogManager: the log dirs of one broker, their partitions, checkpoints and background work.

Start-up locks every dir, loads (and after an unclean stop recovers) every
partition, in parallel when there are many. A dir whose I/O fails goes offline
alone: its partitions answer KAFKA_STORAGE_ERROR while the others keep serving,
until the broker restarts (as Kafka; see the Log module for the full-disk append,
which takes nothing offline). A checkpoint that finds the disk full is the other
exception: it is written to a temporary file and renamed, so the previous one stays
whole and merely older (a restart after a crash then recovers a little more), and it
is written again at the next interval; the dir stays online.
"""

from __future__ import annotations

import asyncio
import base64
import errno
import fcntl
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from odradek.durable import fsync_dir, write_atomically
from odradek.storage import errors
from odradek.storage.checkpoint import CorruptCheckpoint, read_offsets, write_offsets
from odradek.storage.cleaner import LogCleaner
from odradek.storage.cleaner_checkpoint import forget_cleaner_offset
from odradek.storage.config import LogConfig
from odradek.storage.log import Log, TopicPartition
from odradek.storage.log_deleter import LogDeleter, close_files, delete_dir_name, is_delete_dir

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"
META_PROPERTIES = "meta.properties"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
PARTITION_METADATA = "partition.metadata"


class LogManager:
    def __init__(
        self,
        log_dirs: list[str],
        default_config: LogConfig,
        *,
        retention_check_interval_ms: int = 300000,
        checkpoint_interval_ms: int = 60000,
        producer_id_expiration_ms: int = 86400000,
        producer_id_expiration_check_interval_ms: int = 600000,
        cleaner: LogCleaner | None = None,
        cleaner_enable: bool = True,
        cleaner_threads: int = 1,
        cleaner_backoff_ms: int = 15000,
    ) -> None:
        self.log_dirs = [Path(d).resolve() for d in log_dirs]
        self.default_config = default_config
        self.retention_check_interval_ms = retention_check_interval_ms
        self.checkpoint_interval_ms = checkpoint_interval_ms
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producer_id_expiration_check_interval_ms = producer_id_expiration_check_interval_ms
        #: The broker sets this to give replication-offset-checkpoint its high watermarks, and
        #: retention and the cleaner their upper bound (neither goes past the high watermark).
        self.high_watermark: Callable[[TopicPartition], int | None] | None = None
        #: The high watermarks replication-offset-checkpoint held at start-up, for the
        #: partitions to start from (Kafka's ReplicaManager reads them the same way).
        self.checkpointed_high_watermarks: dict[TopicPartition, int] = {}
        self.offline_dirs: set[Path] = set()
        self._logs: dict[TopicPartition, Log] = {}
        self._lock_fds: dict[Path, int] = {}
        self._dir_counts: dict[Path, int] = {}  # partitions per dir, to place new ones
        #: The broker sizes it from log.cleaner.dedupe.buffer.size and log.cleaner.io.buffer.*.
        self.cleaner = cleaner if cleaner is not None else LogCleaner()
        #: log.cleaner.enable: false leaves compacted logs uncleaned (retention of delete,compact still runs).
        self.cleaner_enable = cleaner_enable
        #: log.cleaner.threads: how many logs are cleaned at once (0: none).
        self.cleaner_threads = cleaner_threads
        #: log.cleaner.backoff.ms: how long the cleaner rests after finding nothing to clean.
        self.cleaner_backoff_ms = cleaner_backoff_ms
        self._cleaner_idle_until_ms = 0
        #: When the cleaner last looked at the compacted logs (Kafka's time-since-last-run-ms); 0: never.
        self.cleaner_last_run_ms = 0
        #: Logs whose cleaning is under way in a thread; their deletion waits for it.
        self._cleaning: set[Log] = set()
        #: Closes deleted logs' files and removes their renamed dirs, file.delete.delay.ms later.
        self.deleter = LogDeleter(in_use=lambda lg: lg in self._cleaning)
        #: Partitions deleted since the checkpoints were last written: their entries there are stale.
        self._deleted_since_checkpoint: set[TopicPartition] = set()
        #: checkpoint() runs in the background thread, a creating thread and at shutdown (one temp file each).
        self._checkpoint_lock = threading.Lock()

    # -- start-up ----------------------------------------------------------------
    def startup(self) -> None:
        """Lock every dir and load its partitions; a dir that fails with an I/O error goes offline."""
        for d in self.log_dirs:
            d.mkdir(parents=True, exist_ok=True)
            self._lock(d)
        for d in self.log_dirs:
            try:
                self._load_dir(d)
            except OSError as exc:
                log.error("log dir %s failed to load, taking it offline: %s", d, exc)
                self._mark_offline(d)

    def _lock(self, d: Path) -> None:
        fd = os.open(d / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            self._unlock_all()
            raise errors.LogDirLocked(f"log dir {d} is locked by another process") from None
        self._lock_fds[d] = fd

    def _unlock_all(self) -> None:
        for fd in self._lock_fds.values():
            os.close(fd)  # closing releases the flock
        self._lock_fds.clear()

    def _load_dir(self, d: Path) -> None:
        marker = d / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        recovery_points = self._read_checkpoint(d / RECOVERY_POINT_CHECKPOINT)
        start_offsets = self._read_checkpoint(d / LOG_START_OFFSET_CHECKPOINT)
        self.checkpointed_high_watermarks.update(
            self._read_checkpoint(d / REPLICATION_OFFSET_CHECKPOINT)
        )
        partition_dirs = []
        with os.scandir(d) as listing:  # file types come with the listing: no stat per partition
            entries = sorted((entry.name, entry.is_dir()) for entry in listing)
        for name, is_dir in entries:
            if not is_dir:
                continue
            if is_delete_dir(
                name
            ):  # a deletion a stop or crash interrupted: finish it, never load it
                self.deleter.schedule(d / name, None, self.default_config.file_delete_delay_ms)
                continue
            try:
                tp = TopicPartition.from_dir_name(name)
            except ValueError:
                continue
            partition_dirs.append((tp, d / name))

        def load(item: tuple[TopicPartition, Path]) -> Log:
            tp, path = item
            return Log(
                path,
                self.default_config,
                log_start_offset=start_offsets.get(tp, 0),
                recovery_point=recovery_points.get(tp, 0),
                clean_shutdown=clean,
                producer_id_expiration_ms=self.producer_id_expiration_ms,
                on_io_error=self._mark_offline,
            )

        # A clean load trusts the indexes and checkpoints: per partition it is short system calls
        # and some Python, which threads only make contend for the GIL (1,050 partitions loaded
        # in about 0.4 s in one thread and 1.4-1.9 s in eight). Recovery reads and checksums
        # whole segments, where threads overlap the reads.
        workers = 1 if clean else min(8, max(1, len(partition_dirs) // 4))
        if workers > 1:
            with ThreadPoolExecutor(workers, thread_name_prefix="log-recovery") as pool:
                loaded = list(pool.map(load, partition_dirs))
        else:
            loaded = [load(item) for item in partition_dirs]
        for lg in loaded:
            self._add_log(lg)
        if loaded:
            log.info(
                "loaded %d partitions from %s (%s shutdown)",
                len(loaded),
                d,
                "clean" if clean else "unclean",
            )
        else:  # a new dir has no marker, yet nothing in it was cut short
            log.info("log dir %s holds no partitions", d)
        marker.unlink(missing_ok=True)

    @staticmethod
    def _read_checkpoint(path: Path) -> dict[TopicPartition, int]:
        try:
            return {TopicPartition(t, p): o for (t, p), o in read_offsets(path).items()}
        except (CorruptCheckpoint, ValueError) as exc:
            log.warning("ignoring corrupt checkpoint %s: %s", path, exc)
            return {}

    # -- meta.properties -----------------------------------------------------------
    def ensure_meta_properties(
        self, node_id: int | None, cluster_id: str | None
    ) -> tuple[int, str]:
        """Agree node id and cluster id with every dir's meta.properties, writing them where missing."""
        found: dict[str, str] = {}
        for d in self.online_dirs:
            props = _read_properties(d / META_PROPERTIES)
            for key in ("node.id", "cluster.id"):
                value = props.get(key) or (props.get("broker.id") if key == "node.id" else None)
                if value is None:
                    continue
                if found.setdefault(key, value) != value:
                    raise errors.InconsistentMetaProperties(
                        f"{key} differs between log dirs: {found[key]} and {value}"
                    )
        if (
            node_id is not None
            and node_id >= 0
            and "node.id" in found
            and int(found["node.id"]) != node_id
        ):
            raise errors.InconsistentMetaProperties(
                f"node.id {node_id} does not match {found['node.id']} in meta.properties"
            )
        if cluster_id and "cluster.id" in found and found["cluster.id"] != cluster_id:
            raise errors.InconsistentMetaProperties(
                f"cluster.id {cluster_id} does not match {found['cluster.id']} in meta.properties"
            )
        node = node_id if node_id is not None and node_id >= 0 else int(found.get("node.id", 1))
        cluster = cluster_id or found.get("cluster.id") or _new_cluster_id()
        text = f"#\n#{time.strftime('%a %b %d %H:%M:%S %Z %Y')}\nnode.id={node}\nversion=1\ncluster.id={cluster}\n"
        for d in self.online_dirs:
            path = d / META_PROPERTIES
            if not path.exists():
                write_atomically(path, text)
        return node, cluster

    # -- partitions ----------------------------------------------------------------
    @property
    def online_dirs(self) -> list[Path]:
        return [d for d in self.log_dirs if d not in self.offline_dirs]

    def get_log(self, tp: TopicPartition) -> Log | None:
        return self._logs.get(tp)

    def get_or_create_log(
        self, tp: TopicPartition, config: LogConfig | None = None, topic_id: str | None = None
    ) -> Log:
        """The partition's log, created in the online dir holding the fewest partitions.

        With ``topic_id`` (Kafka's base64 topic UUID) a new log gets its partition.metadata.
        """
        return self.get_or_create_logs([tp], config, topic_id)[0]

    def get_or_create_logs(
        self,
        tps: list[TopicPartition],
        config: LogConfig | None = None,
        topic_id: str | None = None,
    ) -> list[Log]:
        """get_or_create_log for many partitions of one topic, with one fsync per log dir.

        A new partition dir is durable once its parent dir is fsynced; doing that
        once after the whole batch rather than per partition is what makes
        creating a topic with thousands of partitions affordable. Every created
        dir is synced before this returns (so before any CreateTopics response).

        The ReplicaManager calls this from one worker thread at a time while the
        event loop runs, so the loop's walks over the logs go through
        ``all_logs()`` (a snapshot) rather than iterating the dict.
        """
        logs: list[Log] = []
        touched: set[Path] = set()
        try:
            for tp in tps:
                existing = self._logs.get(tp)
                if existing is not None:
                    if existing.offline:
                        raise errors.KafkaStorageError(f"the log dir of {tp} is offline")
                    if config is not None and config != existing.config:
                        existing.update_config(config)
                    logs.append(existing)
                    continue
                lg = self._create_log(tp, config, topic_id)
                touched.add(lg.dir.parent)
                logs.append(lg)
        finally:
            for target in touched:
                try:
                    fsync_dir(target)
                except OSError as exc:
                    self._mark_offline(target)
                    raise errors.KafkaStorageError(f"cannot sync {target}: {exc}") from exc
        if touched and not self._deleted_since_checkpoint.isdisjoint(tps):
            # A partition re-created after a deletion: the checkpoints still hold the old log's
            # recovery point and log start offset, which a restart after a crash would give the
            # new log (hiding its records). Kafka rewrites them on deletion; here it happens when
            # it matters, off the event loop like the creation itself.
            self.checkpoint()
        return logs

    def _create_log(
        self, tp: TopicPartition, config: LogConfig | None, topic_id: str | None
    ) -> Log:
        """A new log in the online dir holding the fewest partitions; the caller fsyncs that dir."""
        dirs = self.online_dirs
        if not dirs:
            raise errors.KafkaStorageError("every log dir is offline")
        target = min(dirs, key=lambda d: self._dir_counts.get(d, 0))
        try:
            lg = Log(
                target / tp.dir_name,
                config or self.default_config,
                producer_id_expiration_ms=self.producer_id_expiration_ms,
                on_io_error=self._mark_offline,
            )
            if topic_id is not None:
                write_atomically(lg.dir / PARTITION_METADATA, f"version: 0\ntopic_id: {topic_id}")
        except OSError as exc:
            self._mark_offline(target)
            raise errors.KafkaStorageError(f"cannot create {tp} in {target}: {exc}") from exc
        self._add_log(lg)
        return lg

    def _add_log(self, lg: Log) -> None:
        self._logs[lg.topic_partition] = lg
        parent = lg.dir.parent
        self._dir_counts[parent] = self._dir_counts.get(parent, 0) + 1

    def delete_log(self, tp: TopicPartition) -> None:
        """Detach the log and rename its dir to ``<topic>-<partition>.<uuid>-delete``, as Kafka's asyncDelete.

        Only that happens on the caller's (the event loop's) time: the files are closed
        and the dir removed by the LogDeleter's thread after file.delete.delay.ms, and a
        dir still carrying the suffix at the next start-up is removed then.
        """
        lg = self._logs.pop(tp, None)
        if lg is None:
            return
        self._dir_counts[lg.dir.parent] -= 1
        if lg.cleaner_offset:  # only a log the cleaner has been through has an entry to drop
            forget_cleaner_offset(lg.dir)
        self._deleted_since_checkpoint.add(tp)
        lg.deleted = lg.offline = True  # any holder of the object now gets KafkaStorageError
        doomed = lg.dir.with_name(delete_dir_name(tp))
        try:
            os.rename(lg.dir, doomed)
        except (
            OSError
        ) as exc:  # as Kafka, a failed rename takes the dir offline (and nothing is removed)
            log.error("could not rename %s for deletion: %s", lg.dir, exc)
            self._mark_offline(lg.dir.parent)
            close_files(lg, lg.dir)
            return
        self.deleter.schedule(doomed, lg, self.default_config.file_delete_delay_ms)

    def all_logs(self) -> list[Log]:
        return list(self._logs.values())

    def _mark_offline(self, d: Path) -> None:
        d = Path(d)
        if d in self.offline_dirs:
            return
        log.error("log dir %s is offline; its partitions answer KAFKA_STORAGE_ERROR", d)
        self.offline_dirs.add(d)
        for lg in self.all_logs():
            if lg.dir.parent == d:
                lg.offline = True

    # -- checkpoints and background work -------------------------------------------
    def checkpoint(self) -> None:
        """Write recovery points, log start offsets and high watermarks of every online dir."""
        with self._checkpoint_lock:
            self._deleted_since_checkpoint = (
                set()
            )  # deletions from now on are not in what is written
            self._write_checkpoints()

    def _write_checkpoints(self) -> None:
        for d in self.online_dirs:
            logs = [lg for lg in self.all_logs() if lg.dir.parent == d and not lg.offline]
            try:
                write_offsets(
                    d / RECOVERY_POINT_CHECKPOINT,
                    {lg.topic_partition: lg.recovery_point for lg in logs},
                )
                write_offsets(
                    d / LOG_START_OFFSET_CHECKPOINT,
                    {lg.topic_partition: lg.log_start_offset for lg in logs},
                )
                hws: dict[tuple[str, int], int] = {}
                if self.high_watermark is not None:
                    for lg in logs:
                        hw = self.high_watermark(lg.topic_partition)
                        if hw is not None:
                            hws[lg.topic_partition] = hw
                write_offsets(d / REPLICATION_OFFSET_CHECKPOINT, hws)
            except OSError as exc:
                log.error("checkpoint of %s failed: %s", d, exc)
                if exc.errno != errno.ENOSPC:
                    self._mark_offline(d)

    def cleanup_logs(self, now_ms: int) -> int:
        """Retention on every log, and removal of .deleted files past file.delete.delay.ms."""
        deleted = 0
        for lg in self.all_logs():
            if lg.offline:
                continue
            hw = self.high_watermark(lg.topic_partition) if self.high_watermark else None
            try:
                deleted += lg.delete_old_segments(now_ms, hw)
                lg.remove_deleted_files(now_ms)
            except errors.KafkaStorageError:
                continue
        return deleted

    def flush_dirty_logs(self, now_ms: int) -> None:
        """fsync logs whose flush.ms passed, and segments left behind by a roll (run in a thread)."""
        for lg in self.all_logs():
            if lg.offline:
                continue
            rolled = lg.recovery_point < lg.active.base_offset
            due = (
                now_ms - lg.last_flush_ms >= lg.config.flush_ms
                and lg.recovery_point < lg.log_end_offset
            )
            if rolled or due:
                try:
                    lg.flush(now_ms)
                except errors.KafkaStorageError:
                    continue

    async def clean_logs(self, now_ms: int) -> None:
        """Compact the logs that need it: segments are rewritten in threads, swapped in here.

        As Kafka's cleaner threads: at most log.cleaner.threads logs are cleaned at once,
        and a pass that finds nothing to clean rests for log.cleaner.backoff.ms.
        """
        if (
            not self.cleaner_enable
            or self.cleaner_threads < 1
            or now_ms < self._cleaner_idle_until_ms
        ):
            return
        slots = asyncio.Semaphore(self.cleaner_threads)
        logs = [lg for lg in self.all_logs() if not lg.offline and lg.config.compact]
        cleaned = await asyncio.gather(*(self._clean_log(lg, now_ms, slots) for lg in logs))
        self.cleaner_last_run_ms = now_ms
        if not any(cleaned):
            self._cleaner_idle_until_ms = now_ms + self.cleaner_backoff_ms

    async def _clean_log(self, lg: Log, now_ms: int, slots: asyncio.Semaphore) -> bool:
        """Clean one log when it needs it (holding one of the slots); whether it needed it."""
        async with slots:
            if lg.offline:
                return False
            try:
                hw = (
                    self.high_watermark(lg.topic_partition)
                    if self.high_watermark is not None
                    else None
                )
                cleanable = self.cleaner.cleanable_range(
                    lg, now_ms, hw
                )  # cheap: no thread for clean logs
                if cleanable is None:
                    return False
                self._cleaning.add(lg)
                try:
                    plan = await asyncio.to_thread(self.cleaner.clean, lg, cleanable, now_ms)
                finally:
                    self._cleaning.discard(lg)
                if plan is not None:
                    self.cleaner.install(lg, plan, now_ms)
                    log.info(
                        "cleaned %s: %d -> %d bytes",
                        lg.topic_partition,
                        plan.bytes_before,
                        plan.bytes_after,
                    )
            except OSError as exc:
                log.error("cleaning %s failed: %s", lg.dir, exc)
                self._mark_offline(lg.dir.parent)
            except errors.KafkaStorageError:
                pass
            return True

    async def run_background(self) -> None:
        """Retention, flushes, checkpoints and producer id expiration until cancelled."""
        now = _now_ms()
        next_retention = now + self.retention_check_interval_ms
        next_checkpoint = now + self.checkpoint_interval_ms
        next_expiration = now + self.producer_id_expiration_check_interval_ms
        while True:
            await asyncio.sleep(1.0)
            now = _now_ms()
            await asyncio.to_thread(self.flush_dirty_logs, now)
            for lg in self.all_logs():
                lg.remove_deleted_files(now)
            if now >= next_retention:
                self.cleanup_logs(now)
                next_retention = now + self.retention_check_interval_ms
            if now >= next_expiration:
                for lg in self.all_logs():
                    lg.producer_state.remove_expired(now)
                next_expiration = now + self.producer_id_expiration_check_interval_ms
            await self.clean_logs(now)
            if now >= next_checkpoint:
                await asyncio.to_thread(self.checkpoint)
                next_checkpoint = now + self.checkpoint_interval_ms

    def shutdown(self) -> None:
        """Close every log (flush, producer snapshots), write checkpoints and the clean-shutdown marker.

        Deleted logs still waiting for their delay only have their files closed: their
        ``-delete`` dirs are removed after the next start-up.
        """
        self.deleter.stop()

        def close(lg: Log) -> None:
            try:
                lg.close()
            except (OSError, errors.KafkaStorageError) as exc:
                log.error("closing %s failed: %s", lg.dir, exc)
                self._mark_offline(lg.dir.parent)

        logs = self.all_logs()
        if len(logs) > 4:  # closing is fsync-bound: overlap them
            with ThreadPoolExecutor(8, thread_name_prefix="log-close") as pool:
                list(pool.map(close, logs))
        else:
            for lg in logs:
                close(lg)
        self.checkpoint()
        for d in self.online_dirs:
            try:
                write_atomically(d / CLEAN_SHUTDOWN_FILE, "")
            except OSError as exc:
                log.error("cannot write the clean-shutdown marker in %s: %s", d, exc)
        self._logs.clear()
        self._dir_counts.clear()
        self._unlock_all()


def _read_properties(path: Path) -> dict[str, str]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    props = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            k, _, v = line.partition("=")
            props[k.strip()] = v.strip()
    return props


def _new_cluster_id() -> str:
    """A random UUID in Kafka's URL-safe base64 form (22 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def _now_ms() -> int:
    return int(time.time() * 1000)
