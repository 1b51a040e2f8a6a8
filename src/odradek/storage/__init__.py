"""Odradek storage layer: Kafka's on-disk partition log.

On disk, exactly as Kafka lays it out: one ``<topic>-<partition>`` directory per
partition under each log dir, segments named by the 20-digit base offset
(``.log`` v2 batches as received, ``.index``, ``.timeindex``, ``.snapshot``),
``leader-epoch-checkpoint`` per partition, and per log dir
``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
``replication-offset-checkpoint``, ``cleaner-offset-checkpoint``,
``meta.properties``, ``.lock`` and the ``.kafka_cleanshutdown`` marker.

Modules: config (LogConfig), index (OffsetIndex, TimeIndex), segment
(LogSegment, FileRegion), log (Log), producer_state, leader_epoch, cleaner
(LogCleaner) with offset_map, records_builder and cleaner_checkpoint,
compression (the batch codecs) and recompress (compression.type on append),
log_manager (LogManager), checkpoint (text checkpoint files), errors (typed
errors with Kafka error codes).

Threading: a Log is owned by the event loop; the LogManager runs fsync and the
cleaner's segment rewriting in threads and installs results on the loop. Log.flush
is the one entry point meant for another thread: it fsyncs private descriptors
taken under each segment's close lock (never the index maps the loop remaps), skips
segments closed meanwhile, writes the leader-epoch checkpoint, and does not move the
recovery point past a truncation that happened while it ran.
"""

from odradek.storage.config import LogConfig
from odradek.storage.log import FetchDataInfo, Log, LogAppendInfo, TopicPartition
from odradek.storage.log_manager import LogManager
from odradek.storage.segment import FileRegion

__all__ = [
    "FetchDataInfo",
    "FileRegion",
    "Log",
    "LogAppendInfo",
    "LogConfig",
    "LogManager",
    "TopicPartition",
]
