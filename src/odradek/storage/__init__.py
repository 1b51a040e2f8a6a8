"""Odradek storage layer: Kafka's on-disk partition log (see docs/ARCHITECTURE.md)."""

from odradek.storage.config import LogConfig
from odradek.storage.log import FetchDataInfo, Log, LogAppendInfo, TopicPartition
from odradek.storage.log_manager import LogManager
from odradek.storage.segment import FileRegion

__all__ = ["FetchDataInfo", "FileRegion", "Log", "LogAppendInfo", "LogConfig", "LogManager", "TopicPartition"]
