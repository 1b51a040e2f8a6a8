"""Which broker configs give a topic config its default (Kafka's ServerTopicConfigSynonyms).

For historical reasons a topic config and the broker config that supplies its
default have different names (retention.ms <- log.retention.ms, log.retention.minutes,
log.retention.hours). The first synonym that is set wins; some are converted
(hours to milliseconds). DescribeConfigs reports these as the config's synonyms.
Only broker configs that server/config.py declares are read, so a broker config reaches
topics once it is declared there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass


def _same(value: str) -> str:
    return value


def _hours_to_ms(value: str) -> str:
    hours = int(value)
    return str(hours * 3_600_000 if hours >= 0 else -1)  # -1 means "no limit" in any unit


def _minutes_to_ms(value: str) -> str:
    minutes = int(value)
    return str(minutes * 60_000 if minutes >= 0 else -1)


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    """A broker config name and how its value converts to the topic config's unit."""

    name: str
    convert: Callable[[str], str] = _same


def _log(*names: str) -> tuple[ConfigSynonym, ...]:
    return tuple(ConfigSynonym("log." + n) for n in names)


TOPIC_CONFIG_SYNONYMS: Mapping[str, tuple[ConfigSynonym, ...]] = {
    "segment.bytes": _log("segment.bytes"),
    "segment.ms": (ConfigSynonym("log.roll.ms"), ConfigSynonym("log.roll.hours", _hours_to_ms)),
    "segment.jitter.ms": (
        ConfigSynonym("log.roll.jitter.ms"),
        ConfigSynonym("log.roll.jitter.hours", _hours_to_ms),
    ),
    "segment.index.bytes": _log("index.size.max.bytes"),
    "flush.messages": _log("flush.interval.messages"),
    "flush.ms": _log("flush.interval.ms", "flush.scheduler.interval.ms"),
    "retention.bytes": _log("retention.bytes"),
    "retention.ms": (
        ConfigSynonym("log.retention.ms"),
        ConfigSynonym("log.retention.minutes", _minutes_to_ms),
        ConfigSynonym("log.retention.hours", _hours_to_ms),
    ),
    "max.message.bytes": (ConfigSynonym("message.max.bytes"),),
    "index.interval.bytes": _log("index.interval.bytes"),
    "delete.retention.ms": _log("cleaner.delete.retention.ms"),
    "min.compaction.lag.ms": _log("cleaner.min.compaction.lag.ms"),
    "max.compaction.lag.ms": _log("cleaner.max.compaction.lag.ms"),
    "file.delete.delay.ms": _log("segment.delete.delay.ms"),
    "min.cleanable.dirty.ratio": _log("cleaner.min.cleanable.ratio"),
    "cleanup.policy": _log("cleanup.policy"),
    "unclean.leader.election.enable": (ConfigSynonym("unclean.leader.election.enable"),),
    "min.insync.replicas": (ConfigSynonym("min.insync.replicas"),),
    "compression.type": (ConfigSynonym("compression.type"),),
    "compression.gzip.level": (ConfigSynonym("compression.gzip.level"),),
    "compression.lz4.level": (ConfigSynonym("compression.lz4.level"),),
    "compression.zstd.level": (ConfigSynonym("compression.zstd.level"),),
    "preallocate": _log("preallocate"),
    "message.timestamp.type": _log("message.timestamp.type"),
    "message.timestamp.before.max.ms": _log("message.timestamp.before.max.ms"),
    "message.timestamp.after.max.ms": _log("message.timestamp.after.max.ms"),
    "local.retention.ms": _log("local.retention.ms"),
    "local.retention.bytes": _log("local.retention.bytes"),
}

#: Broker config name -> the topic config it supplies a default for.
BROKER_TO_TOPIC: Mapping[str, str] = {
    synonym.name: topic for topic, synonyms in TOPIC_CONFIG_SYNONYMS.items() for synonym in synonyms
}


def topic_defaults_from_broker(broker_props: Mapping[str, str]) -> dict[str, str]:
    """Topic config values implied by the broker configs that are set (first synonym wins)."""
    defaults: dict[str, str] = {}
    for topic_name, synonyms in TOPIC_CONFIG_SYNONYMS.items():
        for synonym in synonyms:
            if synonym.name in broker_props:
                defaults[topic_name] = synonym.convert(broker_props[synonym.name])
                break
    return defaults
