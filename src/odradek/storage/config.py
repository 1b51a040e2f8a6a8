"""LogConfig: the topic-level configs of one partition log, with Kafka's names and defaults."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from odradek.storage.errors import InvalidConfig

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


def _parse_bool(value: str) -> bool:
    v = value.strip().lower()
    if v not in ("true", "false"):
        raise ValueError("expected true or false")
    return v == "true"


def _parse_list(value: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in value.split(",") if item.strip())


def _kafka_field(
    kind: str,
    doc: str,
    default: Any,
    at_least: float | None = None,
    choices: tuple[str, ...] | None = None,
) -> Any:
    return field(
        default=default,
        metadata={"kind": kind, "doc": doc, "at_least": at_least, "choices": choices},
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

    cleanup_policy: tuple[str, ...] = _kafka_field("list", "delete, compact, or both.", ("delete",))
    compression_type: str = _kafka_field(
        "string",
        "Final compression of the topic; 'producer' keeps what the producer sent.",
        "producer",
        choices=("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"),
    )
    compression_gzip_level: int = _kafka_field(
        "int", "gzip level when the broker compresses (1-9, or -1 for the codec's default).", -1, -1
    )
    compression_lz4_level: int = _kafka_field(
        "int", "lz4 level when the broker compresses (1-17).", 9, 1
    )
    compression_zstd_level: int = _kafka_field(
        "int", "zstd level when the broker compresses (up to 22).", 3, -131072
    )
    delete_retention_ms: int = _kafka_field(
        "long", "How long tombstones stay in a compacted log.", 86400000, 0
    )
    file_delete_delay_ms: int = _kafka_field(
        "long", "Delay before a .deleted file is removed.", 60000, 0
    )
    flush_messages: int = _kafka_field("long", "fsync after this many messages.", LONG_MAX, 1)
    flush_ms: int = _kafka_field("long", "fsync after this many ms.", LONG_MAX, 0)
    index_interval_bytes: int = _kafka_field("int", "Bytes between offset index entries.", 4096, 0)
    max_compaction_lag_ms: int = _kafka_field(
        "long", "Longest a record stays uncompacted.", LONG_MAX, 1
    )
    max_message_bytes: int = _kafka_field("int", "Largest record batch accepted.", 1048588, 0)
    message_timestamp_after_max_ms: int = _kafka_field(
        "long", "How far a CreateTime timestamp may lie ahead of the broker's clock.", 3600000, 0
    )
    message_timestamp_before_max_ms: int = _kafka_field(
        "long", "How far a CreateTime timestamp may lie behind the broker's clock.", LONG_MAX, 0
    )
    message_timestamp_type: str = _kafka_field(
        "string",
        "CreateTime or LogAppendTime.",
        "CreateTime",
        choices=("CreateTime", "LogAppendTime"),
    )
    min_cleanable_dirty_ratio: float = _kafka_field(
        "double", "Dirty ratio that makes a log cleanable.", 0.5, 0
    )
    min_compaction_lag_ms: int = _kafka_field("long", "Shortest a record stays uncompacted.", 0, 0)
    min_insync_replicas: int = _kafka_field("int", "Replicas that must ack for acks=all.", 1, 1)
    preallocate: bool = _kafka_field("boolean", "Preallocate segment files.", False)
    retention_bytes: int = _kafka_field("long", "Size limit of the log; -1 for none.", -1, -1)
    retention_ms: int = _kafka_field("long", "Age limit of a segment; -1 for none.", 604800000, -1)
    segment_bytes: int = _kafka_field("int", "Size of a segment file.", 1073741824, 14)
    segment_index_bytes: int = _kafka_field(
        "int", "Preallocated size of an index file.", 10485760, 4
    )
    segment_jitter_ms: int = _kafka_field("long", "Random jitter subtracted from segment.ms.", 0, 0)
    segment_ms: int = _kafka_field("long", "Roll a segment after this long.", 604800000, 1)
    unclean_leader_election_enable: bool = _kafka_field(
        "boolean", "Allow out-of-sync replicas to lead.", False
    )

    def __post_init__(self) -> None:
        for policy in self.cleanup_policy:
            if policy not in ("delete", "compact"):
                raise InvalidConfig(f"cleanup.policy: unknown policy {policy!r}")
        if self.min_cleanable_dirty_ratio > 1:
            raise InvalidConfig("min.cleanable.dirty.ratio must be at most 1")
        if self.compression_gzip_level == 0 or self.compression_gzip_level > 9:
            raise InvalidConfig("compression.gzip.level must be -1 or between 1 and 9")
        if self.compression_lz4_level > 17:
            raise InvalidConfig("compression.lz4.level must be at most 17")
        if self.compression_zstd_level > 22:
            raise InvalidConfig("compression.zstd.level must be at most 22")

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
    def definitions(cls) -> list[tuple[str, str, str, str]]:
        """(kafka name, type, default as a string, doc) of every topic config, for DescribeConfigs."""
        return [
            (_kafka_name(f), f.metadata["kind"], _format(f, f.default), f.metadata["doc"])
            for f in dataclasses.fields(cls)
        ]

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
            if meta["choices"] and value not in meta["choices"]:
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
