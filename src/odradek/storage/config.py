"""LogConfig: the topic-level configs of one partition log, with Kafka's names and defaults."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from odradek.storage.errors import InvalidConfig

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1

#: Kafka's BrokerCompressionType names: a codec, or "producer" to keep what the producer sent.
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
#: Kafka's TimestampType names a topic may store.
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
#: Kafka's cleanup policies; a topic may name both.
CLEANUP_POLICIES = ("compact", "delete")


def _parse_bool(value: str) -> bool:
    v = value.strip().lower()
    if v not in ("true", "false"):
        raise ValueError("expected true or false")
    return v == "true"


def _parse_list(value: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in value.split(",") if item.strip())


#: Kafka's ConfigDef.Importance of a config.
Importance = Literal["high", "medium", "low"]


@dataclass(frozen=True, slots=True)
class TopicConfigDef:
    """A topic config as Kafka's documentation lists it."""

    name: str
    #: Kafka's ConfigDef type (long, int, double, string, boolean, list).
    kind: str
    #: The built-in default, formatted as the config's string value.
    default: str
    #: One line saying what the config does.
    doc: str
    importance: Importance
    at_least: float | None
    at_most: float | None
    choices: tuple[str, ...] | None


def _kafka_field(
    kind: str,
    doc: str,
    default: Any,
    at_least: float | None = None,
    choices: tuple[str, ...] | None = None,
    *,
    importance: Importance,
    at_most: float | None = None,
) -> Any:
    return field(
        default=default,
        metadata={
            "kind": kind,
            "doc": doc,
            "at_least": at_least,
            "at_most": at_most,
            "choices": choices,
            "importance": importance,
        },
    )


_PARSERS: dict[str, Callable[[str], Any]] = {
    "long": int,
    "int": int,
    "double": float,
    "string": str,
    "boolean": _parse_bool,
    "list": _parse_list,
}
_FORMATTERS: dict[str, Callable[[Any], str]] = {
    "boolean": lambda v: "true" if v else "false",
    "list": lambda v: ",".join(v),
}


@dataclass(frozen=True, slots=True)
class LogConfig:
    """One field per Kafka topic config (dots become underscores), Kafka's defaults."""

    cleanup_policy: tuple[str, ...] = _kafka_field(
        "list",
        "What happens to old segments: delete them, compact them by key, or both.",
        ("delete",),
        choices=CLEANUP_POLICIES,
        importance="medium",
    )
    compression_type: str = _kafka_field(
        "string",
        "Final compression of the topic; 'producer' keeps what the producer sent.",
        "producer",
        choices=COMPRESSION_TYPES,
        importance="high",
    )
    compression_gzip_level: int = _kafka_field(
        "int",
        "gzip level when the broker compresses (1-9, or -1 for the codec's default).",
        -1,
        -1,
        importance="medium",
        at_most=9,
    )
    compression_lz4_level: int = _kafka_field(
        "int", "lz4 level when the broker compresses (1-17).", 9, 1, importance="medium", at_most=17
    )
    compression_zstd_level: int = _kafka_field(
        "int",
        "zstd level when the broker compresses (up to 22).",
        3,
        -131072,
        importance="medium",
        at_most=22,
    )
    delete_retention_ms: int = _kafka_field(
        "long",
        "How long tombstones (null-value records) stay in a compacted log after cleaning.",
        86400000,
        0,
        importance="medium",
    )
    file_delete_delay_ms: int = _kafka_field(
        "long",
        "How long a deleted segment's files stay on disk (renamed .deleted) before removal.",
        60000,
        0,
        importance="medium",
    )
    flush_messages: int = _kafka_field(
        "long",
        "Force an fsync of the log after this many records; the page cache and replication make it rarely needed.",
        LONG_MAX,
        1,
        importance="medium",
    )
    flush_ms: int = _kafka_field(
        "long",
        "Force an fsync of the log when its oldest unflushed record is this old.",
        LONG_MAX,
        0,
        importance="medium",
    )
    index_interval_bytes: int = _kafka_field(
        "int",
        "Bytes of records between two offset index entries: smaller means a denser index.",
        4096,
        0,
        importance="medium",
    )
    max_compaction_lag_ms: int = _kafka_field(
        "long",
        "Longest time a record may stay in the log uncompacted (a compacted topic).",
        LONG_MAX,
        1,
        importance="medium",
    )
    max_message_bytes: int = _kafka_field(
        "int",
        "Largest record batch (after compression) the topic accepts.",
        1048588,
        0,
        importance="medium",
    )
    message_timestamp_after_max_ms: int = _kafka_field(
        "long",
        "How far a CreateTime timestamp may lie ahead of the broker's clock.",
        3600000,
        0,
        importance="medium",
    )
    message_timestamp_before_max_ms: int = _kafka_field(
        "long",
        "How far a CreateTime timestamp may lie behind the broker's clock.",
        LONG_MAX,
        0,
        importance="medium",
    )
    message_timestamp_type: str = _kafka_field(
        "string",
        "Whether a record's timestamp is the producer's CreateTime or the broker's LogAppendTime.",
        "CreateTime",
        choices=TIMESTAMP_TYPES,
        importance="medium",
    )
    min_cleanable_dirty_ratio: float = _kafka_field(
        "double",
        "Share of the log not yet compacted above which the cleaner compacts it.",
        0.5,
        0,
        importance="medium",
        at_most=1,
    )
    min_compaction_lag_ms: int = _kafka_field(
        "long",
        "Shortest time a record stays in the log before compaction may remove it.",
        0,
        0,
        importance="medium",
    )
    min_insync_replicas: int = _kafka_field(
        "int", "In-sync replicas needed for an acks=all write to succeed.", 1, 1, importance="high"
    )
    preallocate: bool = _kafka_field(
        "boolean", "Create segment files at their full size.", False, importance="medium"
    )
    retention_bytes: int = _kafka_field(
        "long",
        "Largest size of a partition's log before old segments are deleted; -1 for no limit.",
        -1,
        -1,
        importance="medium",
    )
    retention_ms: int = _kafka_field(
        "long",
        "How long records are kept before their segment is deleted; -1 for no limit.",
        604800000,
        -1,
        importance="medium",
    )
    segment_bytes: int = _kafka_field(
        "int",
        "Size at which the active segment file is closed and a new one started.",
        1073741824,
        14,
        importance="medium",
    )
    segment_index_bytes: int = _kafka_field(
        "int",
        "Preallocated size of a segment's offset and time index files.",
        10485760,
        4,
        importance="medium",
    )
    segment_jitter_ms: int = _kafka_field(
        "long",
        "Random jitter subtracted from segment.ms so that segments do not all roll at once.",
        0,
        0,
        importance="medium",
    )
    segment_ms: int = _kafka_field(
        "long",
        "Age at which the active segment is closed and a new one started, even when not full.",
        604800000,
        1,
        importance="medium",
    )
    unclean_leader_election_enable: bool = _kafka_field(
        "boolean",
        "Let a replica outside the ISR become leader when no ISR member is live (may lose data).",
        False,
        importance="high",
    )

    def __post_init__(self) -> None:
        for policy in self.cleanup_policy:
            if policy not in CLEANUP_POLICIES:
                raise InvalidConfig(f"cleanup.policy: unknown policy {policy!r}")
        if self.compression_gzip_level == 0 or self.compression_gzip_level > 9:
            raise InvalidConfig("compression.gzip.level must be -1 or between 1 and 9")
        for f in dataclasses.fields(self):  # upper bounds hold however the config was built
            at_most = f.metadata["at_most"]
            if at_most is not None and getattr(self, f.name) > at_most:
                raise InvalidConfig(f"{_kafka_name(f)} must be at most {at_most}")

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @classmethod
    def config_defs(cls) -> list[TopicConfigDef]:
        """Every topic config's definition, in field order."""
        return [
            TopicConfigDef(
                _kafka_name(f),
                f.metadata["kind"],
                _format(f, f.default),
                f.metadata["doc"],
                f.metadata["importance"],
                f.metadata["at_least"],
                f.metadata["at_most"],
                f.metadata["choices"],
            )
            for f in dataclasses.fields(cls)
        ]

    @classmethod
    def definitions(cls) -> list[tuple[str, str, str, str]]:
        """(kafka name, type, default as a string, doc) of every topic config, for DescribeConfigs."""
        return [(d.name, d.kind, d.default, d.doc) for d in cls.config_defs()]

    @classmethod
    def from_properties(
        cls, props: Mapping[str, str | None], base: LogConfig | None = None
    ) -> LogConfig:
        """A config from Kafka-named string properties over ``base`` (or the defaults).

        Raises InvalidConfig naming the key for an unknown key or a bad value; a
        None value keeps the base value.
        """
        by_name = {_kafka_name(f): f for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        for key, raw in props.items():
            f = by_name.get(key)
            if f is None:
                raise InvalidConfig(f"Unknown topic config name: {key}")
            if raw is None:
                continue
            meta = f.metadata
            try:
                value = _PARSERS[meta["kind"]](raw)
            except ValueError as exc:
                raise InvalidConfig(
                    f"Invalid value {raw!r} for configuration {key}: {exc}"
                ) from None
            if meta["at_least"] is not None and value < meta["at_least"]:
                raise InvalidConfig(
                    f"Invalid value {raw} for configuration {key}: must be at least {meta['at_least']}"
                )
            items = value if meta["kind"] == "list" else (value,)
            if meta["choices"] and any(item not in meta["choices"] for item in items):
                raise InvalidConfig(
                    f"Invalid value {raw} for configuration {key}: must be one of {meta['choices']}"
                )
            values[f.name] = value
        return dataclasses.replace(base if base is not None else cls(), **values)

    def to_properties(self) -> dict[str, str]:
        return {_kafka_name(f): _format(f, getattr(self, f.name)) for f in dataclasses.fields(self)}


def _kafka_name(f: dataclasses.Field[Any]) -> str:
    return f.name.replace("_", ".")


def _format(f: dataclasses.Field[Any], value: Any) -> str:
    return _FORMATTERS.get(f.metadata["kind"], str)(value)
