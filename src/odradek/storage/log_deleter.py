"""Deletion of whole partition directories off the event loop, as Kafka's ``kafka-delete-logs`` task.

Deleting a topic only detaches each log and renames its directory to
``<topic>-<partition>.<uuid>-delete`` on the event loop (a rename per partition).
Closing the segment files and removing the directories happens here, in one
thread, ``file.delete.delay.ms`` later: until then a fetch already holding a file
region of the log can still send it. Directories left with the ``-delete`` suffix
by a stop or a crash are handed over at start-up and never loaded as partitions.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import shutil
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from odradek.storage.log import Log, TopicPartition

log = logging.getLogger(__name__)

DELETE_DIR_SUFFIX = "-delete"
#: Longest file name most file systems take (Kafka caps the renamed directory's name at it).
MAX_NAME_LENGTH = 255
#: How long a deletion waits when its log is still in use (being cleaned) before it is tried again.
IN_USE_RETRY_S = 1.0


def delete_dir_name(tp: TopicPartition) -> str:
    """Kafka's ``UnifiedLog.logDeleteDirName``: the topic is cut so the name stays within 255 bytes."""
    suffix = f"-{tp.partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
    return tp.topic[: MAX_NAME_LENGTH - len(suffix)] + suffix


def is_delete_dir(name: str) -> bool:
    return name.endswith(DELETE_DIR_SUFFIX)


class LogDeleter:
    """Removes renamed partition directories in a background thread once their delay has passed.

    ``in_use(log)`` tells whether a log's files are still being read by other
    work (the cleaner); such a deletion waits and is tried again.
    """

    def __init__(self, in_use: Callable[[Log], bool] = lambda lg: False) -> None:
        self._in_use = in_use
        self._queue: list[
            tuple[float, int, Path, Log | None]
        ] = []  # (due, tie-breaker, directory, log)
        self._order = itertools.count()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopped = False

    def schedule(self, directory: Path, lg: Log | None, delay_ms: int) -> None:
        """Close ``lg``'s files (if given) and remove ``directory`` after ``delay_ms``."""
        due = time.monotonic() + delay_ms / 1000
        with self._cond:
            earliest = not self._queue or due < self._queue[0][0]
            heapq.heappush(self._queue, (due, next(self._order), directory, lg))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="kafka-delete-logs", daemon=True
                )
                self._thread.start()
            elif earliest:  # only a new head changes how long the thread sleeps
                self._cond.notify()

    @property
    def pending(self) -> int:
        """Directories scheduled and not yet removed."""
        with self._cond:
            return len(self._queue)

    def stop(self) -> None:
        """Stop the thread (after the deletion in progress) and close the files of logs still waiting.

        Their directories keep the ``-delete`` suffix, so the next start-up finishes them.
        The deleter may be used again afterwards (a new thread starts).
        """
        with self._cond:
            self._stopped = True
            self._cond.notify()
            thread = self._thread
        if thread is not None:
            thread.join()
        with self._cond:
            waiting, self._queue = self._queue, []
            self._thread, self._stopped = None, False  # a later schedule starts a new thread
        for _, _, directory, lg in waiting:
            if lg is not None:
                close_files(lg, directory)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopped and (
                    not self._queue or self._queue[0][0] > time.monotonic()
                ):
                    timeout = self._queue[0][0] - time.monotonic() if self._queue else None
                    self._cond.wait(timeout)
                if self._stopped:
                    return
                _, _, directory, lg = heapq.heappop(self._queue)
            if lg is not None and self._in_use(lg):
                with self._cond:
                    heapq.heappush(
                        self._queue,
                        (time.monotonic() + IN_USE_RETRY_S, next(self._order), directory, lg),
                    )
                continue
            try:
                if lg is not None:
                    close_files(lg, directory)
                shutil.rmtree(directory)
                log.info("deleted log dir %s", directory)
            except FileNotFoundError:
                pass
            except (
                OSError
            ) as exc:  # as Kafka: logged, the directory stays and the next start retries it
                log.error("could not delete %s: %s", directory, exc)
            except Exception:  # never let one log stop the deletion of the others
                log.exception("deleting %s failed", directory)


def close_files(lg: Log, directory: Path) -> None:
    """Point the log's segments at the renamed directory (Kafka's ``renameDir``) and close them."""
    lg.dir = directory
    for seg in lg.segments:
        seg.path = directory / seg.path.name
        seg.offset_index.path = directory / seg.offset_index.path.name
        seg.time_index.path = directory / seg.time_index.path.name
        try:
            seg.close()
        except OSError as exc:
            log.debug("closing a segment of %s: %s", directory, exc)
