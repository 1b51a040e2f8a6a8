"""Source and sink options, parsed and checked as Spark's Kafka connector does.

Everything here is sans-I/O: options in, a frozen description out, or a
ValueError carrying the explanation Spark gives for the same mistake. Option
names are case-insensitive, like every Spark data source option.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

# -2 and -1 in offset JSON, as in Spark and Kafka's ListOffsets.
EARLIEST = -2
LATEST = -1

STRATEGIES = ("subscribe", "subscribepattern", "assign")
_SOURCE_OPTIONS = {
    *STRATEGIES,
    "startingoffsets",
    "endingoffsets",
    "startingtimestamp",
    "endingtimestamp",
    "startingoffsetsbytimestamp",
    "endingoffsetsbytimestamp",
    "startingoffsetsbytimestampstrategy",
    "maxoffsetspertrigger",
    "minoffsetspertrigger",
    "maxtriggerdelay",
    "failondataloss",
    "minpartitions",
    "includeheaders",
    "groupidprefix",
    "kafkaconsumer.polltimeoutms",
    "fetchoffset.numretries",
    "fetchoffset.retryintervalms",
}
_SINK_OPTIONS = {"topic", "includeheaders", "transactional.id.prefix"}
# Options Spark itself adds to a query's options; never the user's mistake.
_SPARK_OPTIONS = {"path", "checkpointlocation"}

_CONSUMER_REJECTED = {
    "auto.offset.reset": (
        "Kafka option 'auto.offset.reset' is not supported. Instead set the source option "
        "'startingOffsets' to 'earliest' or 'latest' to specify where to start. Structured "
        "Streaming manages which offsets are consumed internally, rather than relying on the "
        "kafkaConsumer to do it. This will ensure that no data is missed when new "
        "topics/partitions are dynamically subscribed. Note that 'startingOffsets' only applies "
        "when a new Streaming query is started, and that resuming will always pick up from where "
        "the query left off. See the docs for more details."
    ),
    "key.deserializer": (
        "Kafka option 'key.deserializer' is not supported as keys are deserialized as byte "
        "arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly deserialize "
        "the keys."
    ),
    "value.deserializer": (
        "Kafka option 'value.deserializer' is not supported as values are deserialized as byte "
        "arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly deserialize "
        "the values."
    ),
    "enable.auto.commit": "Kafka option 'enable.auto.commit' is not supported.",
    "interceptor.classes": (
        "Kafka option 'interceptor.classes' is not supported as user-specified consumer "
        "interceptors are not supported by Spark."
    ),
}
_PRODUCER_REJECTED = {
    "key.serializer": (
        "Kafka option 'key.serializer' is not supported as keys are serialized with "
        "ByteArraySerializer."
    ),
    "value.serializer": (
        "Kafka option 'value.serializer' is not supported as value are serialized with "
        "ByteArraySerializer."
    ),
    # One id shared by every task would have each task fence the others.
    "transactional.id": (
        "Kafka option 'transactional.id' is not supported: set the sink option "
        "'transactional.id.prefix' to write exactly once, each task with its own transactional id."
    ),
}

Mode = Literal["batch", "stream"]


@dataclass(frozen=True)
class Subscribe:
    topics: tuple[str, ...]


@dataclass(frozen=True)
class SubscribePattern:
    pattern: str

    def matches(self, topic: str) -> bool:
        return re.fullmatch(self.pattern, topic) is not None


@dataclass(frozen=True)
class Assign:
    partitions: tuple[tuple[str, int], ...]


Strategy = Subscribe | SubscribePattern | Assign


@dataclass(frozen=True)
class OffsetSpec:
    """Where a query starts or ends, before any broker is asked.

    kind is "earliest", "latest", "offsets" (per-partition offsets, -2/-1
    allowed), "timestamp" (one timestamp for all partitions) or
    "timestamps" (per-partition timestamps).
    """

    kind: Literal["earliest", "latest", "offsets", "timestamp", "timestamps"]
    per_partition: tuple[tuple[str, int, int], ...] = ()
    timestamp: int = 0


@dataclass(frozen=True)
class SourceOptions:
    strategy: Strategy
    starting: OffsetSpec
    ending: OffsetSpec
    timestamp_strategy: Literal["error", "latest"] = "error"
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    include_headers: bool = False
    poll_timeout_ms: int = 120_000
    consumer_config: tuple[tuple[str, str], ...] = field(default=())

    def consumer_config_dict(self) -> dict[str, str]:
        return dict(self.consumer_config)


@dataclass(frozen=True)
class SinkOptions:
    topic: str | None
    producer_config: tuple[tuple[str, str], ...]
    #: Exactly-once writing (streaming): tasks' transactional ids start with it (exactly_once.py).
    transactional_id_prefix: str | None = None

    def producer_config_dict(self) -> dict[str, str]:
        return dict(self.producer_config)


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in options.items()}


def _kafka_params(
    options: dict[str, str], rejected: Mapping[str, str | None], original: Mapping[str, str]
) -> tuple[tuple[str, str], ...]:
    """The kafka.* options with the prefix removed, keys kept as the user wrote them."""
    if "kafka.bootstrap.servers" not in options:
        raise ValueError(
            "Option 'kafka.bootstrap.servers' must be specified for configuring Kafka consumer"
            if rejected is _CONSUMER_REJECTED
            else "Option 'kafka.bootstrap.servers' must be specified for configuring Kafka producer"
        )
    params = []
    for key, value in original.items():
        if not key.lower().startswith("kafka."):
            continue
        name = key[len("kafka.") :]
        message = rejected.get(name.lower())
        if message:
            raise ValueError(message)
        params.append((name, value))
    return tuple(sorted(params))


def _check_unknown(options: dict[str, str], known: set[str]) -> None:
    unknown = sorted(
        k
        for k in options
        if not k.startswith("kafka.") and k not in known and k not in _SPARK_OPTIONS
    )
    if unknown:
        raise ValueError(
            f"Unknown option(s) for the odradek format: {', '.join(unknown)}. "
            f"Known options: {', '.join(sorted(known))} and kafka.* client options."
        )


def _positive_int(options: dict[str, str], name: str) -> int | None:
    raw = options.get(name.lower())
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(
            f"Invalid value '{raw}' for option '{name}', must be a positive integer"
        ) from None
    if value <= 0:
        raise ValueError(f"Invalid value '{raw}' for option '{name}', must be a positive integer")
    return value


def _boolean(options: dict[str, str], name: str, default: bool) -> bool:
    raw = options.get(name.lower())
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise ValueError(f"Invalid value '{raw}' for option '{name}', must be true or false")


def parse_duration_ms(text: str) -> int:
    """Spark's interval strings for maxTriggerDelay: '15m', '30s', '100ms', '2h', or plain ms."""
    match = re.fullmatch(r"\s*(\d+)\s*(ms|s|m|min|h|d)?\s*", text.lower())
    if not match:
        raise ValueError(f"Invalid duration '{text}' for option 'maxTriggerDelay'")
    unit = {
        "ms": 1,
        None: 1,
        "s": 1000,
        "m": 60_000,
        "min": 60_000,
        "h": 3_600_000,
        "d": 86_400_000,
    }
    return int(match.group(1)) * unit[match.group(2)]


def _strategy(options: dict[str, str]) -> Strategy:
    given = [name for name in STRATEGIES if name in options]
    if not given:
        raise ValueError(
            "One of the following options must be specified for Kafka source: subscribe, "
            "subscribePattern, assign. See the docs for more details."
        )
    if len(given) > 1:
        raise ValueError(
            "Only one of the following options can be specified for Kafka source: subscribe, "
            "subscribePattern, assign. See the docs for more details."
        )
    name, value = given[0], options[given[0]]
    if name == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise ValueError(
                f"No topics to subscribe to as specified value for option 'subscribe' is '{value}'"
            )
        return Subscribe(topics)
    if name == "subscribepattern":
        if not value.strip():
            raise ValueError(
                f"Pattern to subscribe is empty as specified value for option 'subscribePattern' is '{value}'"
            )
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"Invalid subscribePattern '{value}': {exc}") from None
        return SubscribePattern(value.strip())
    parsed = _json_object(value, "assign")
    partitions: list[tuple[str, int]] = []
    for topic, parts in parsed.items():
        if not isinstance(parts, list) or not all(isinstance(p, int) for p in parts):
            raise ValueError(f"""Expected e.g. {{"topicA":[0,1],"topicB":[0,1]}}, got {value}""")
        partitions.extend((topic, p) for p in parts)
    if not partitions:
        raise ValueError(
            f"No topicpartitions to assign as specified value for option 'assign' is '{value}'"
        )
    return Assign(tuple(sorted(partitions)))


def _json_object(value: str, option: str) -> dict:
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        parsed = None
    if not isinstance(parsed, dict):
        raise ValueError(
            f"Invalid JSON for option '{option}': expected e.g. "
            f"""{{"topicA":{{"0":23,"1":-1}},"topicB":{{"0":-2}}}}, got {value}"""
        )
    return parsed


def _per_partition(value: str, option: str) -> tuple[tuple[str, int, int], ...]:
    entries = []
    for topic, parts in _json_object(value, option).items():
        if not isinstance(parts, dict):
            raise ValueError(
                f"Invalid JSON for option '{option}': partitions of '{topic}' must be an object"
            )
        for partition, number in parts.items():
            try:
                entries.append((topic, int(partition), int(number)))
            except (TypeError, ValueError):
                raise ValueError(f"Invalid JSON for option '{option}': {value}") from None
    return tuple(sorted(entries))


def _offset_spec(
    options: dict[str, str], which: Literal["starting", "ending"], default: str
) -> OffsetSpec:
    """Global timestamp first, then per-partition timestamps, then offsets: Spark's precedence."""
    if f"{which}timestamp" in options:
        raw = options[f"{which}timestamp"]
        try:
            return OffsetSpec("timestamp", timestamp=int(raw))
        except ValueError:
            raise ValueError(
                f"Invalid value '{raw}' for option '{which}Timestamp', must be a long"
            ) from None
    if f"{which}offsetsbytimestamp" in options:
        return OffsetSpec(
            "timestamps",
            per_partition=_per_partition(
                options[f"{which}offsetsbytimestamp"], f"{which}OffsetsByTimestamp"
            ),
        )
    raw = options.get(f"{which}offsets", default).strip()
    if raw.lower() in ("earliest", "latest"):
        return OffsetSpec(raw.lower())  # type: ignore[arg-type]  # mypy does not narrow str by `in`
    return OffsetSpec("offsets", per_partition=_per_partition(raw, f"{which}Offsets"))


def _check_batch_offsets(starting: OffsetSpec, ending: OffsetSpec) -> None:
    if starting.kind == "latest":
        raise ValueError("starting offset can't be latest for batch queries on Kafka")
    if ending.kind == "earliest":
        raise ValueError("ending offset can't be earliest for batch queries on Kafka")
    for topic, partition, offset in starting.per_partition if starting.kind == "offsets" else ():
        if offset == LATEST:
            raise ValueError(
                f"startingOffsets for {topic}-{partition} can't be latest for batch queries on Kafka"
            )
    for topic, partition, offset in ending.per_partition if ending.kind == "offsets" else ():
        if offset == EARLIEST:
            raise ValueError(
                f"ending offset for {topic}-{partition} can't be earliest for batch queries on Kafka"
            )


def parse_source_options(raw: Mapping[str, str], mode: Mode) -> SourceOptions:
    """Check a source's options once, at query start, as Spark's KafkaSourceProvider does."""
    options = _lower(raw)
    _check_unknown(options, _SOURCE_OPTIONS)
    consumer_config = _kafka_params(options, _CONSUMER_REJECTED, raw)
    strategy = _strategy(options)
    starting = _offset_spec(options, "starting", "earliest" if mode == "batch" else "latest")
    ending_given = any(
        k in options for k in ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp")
    )
    if mode == "stream" and ending_given:
        raise ValueError("Ending offset not valid in streaming queries")
    ending = _offset_spec(options, "ending", "latest")
    if mode == "batch":
        _check_batch_offsets(starting, ending)
    timestamp_strategy = options.get("startingoffsetsbytimestampstrategy", "error").lower()
    if timestamp_strategy not in ("error", "latest"):
        raise ValueError(
            f"Invalid value '{timestamp_strategy}' for option 'startingOffsetsByTimestampStrategy', "
            "must be 'error' or 'latest'"
        )
    max_offsets = _positive_int(options, "maxOffsetsPerTrigger")
    min_offsets = _positive_int(options, "minOffsetsPerTrigger")
    if max_offsets is not None and min_offsets is not None and min_offsets > max_offsets:
        raise ValueError(
            f"The value of minOffsetPerTrigger({min_offsets}) is higher than the "
            f"maxOffsetsPerTrigger({max_offsets})."
        )
    if mode == "batch":
        for name in ("maxoffsetspertrigger", "minoffsetspertrigger", "maxtriggerdelay"):
            if name in options:
                raise ValueError(f"Option '{name}' only applies to streaming queries")
    delay = (
        parse_duration_ms(options["maxtriggerdelay"])
        if "maxtriggerdelay" in options
        else 15 * 60 * 1000
    )
    poll_timeout = _positive_int(options, "kafkaConsumer.pollTimeoutMs") or 120_000
    return SourceOptions(
        strategy=strategy,
        starting=starting,
        ending=ending,
        timestamp_strategy=timestamp_strategy,  # type: ignore[arg-type]  # checked above
        max_offsets_per_trigger=max_offsets,
        min_offsets_per_trigger=min_offsets,
        max_trigger_delay_ms=delay,
        fail_on_data_loss=_boolean(options, "failOnDataLoss", True),
        min_partitions=_positive_int(options, "minPartitions"),
        include_headers=_boolean(options, "includeHeaders", False),
        poll_timeout_ms=poll_timeout,
        consumer_config=consumer_config,
    )


def parse_sink_options(raw: Mapping[str, str]) -> SinkOptions:
    options = _lower(raw)
    _check_unknown(options, _SINK_OPTIONS)
    producer_config = _kafka_params(options, _PRODUCER_REJECTED, raw)
    topic = options.get("topic")
    prefix = options.get("transactional.id.prefix")
    if prefix is not None and not prefix.strip():
        raise ValueError("Option 'transactional.id.prefix' must not be empty")
    return SinkOptions(
        topic=topic.strip() if topic else None,
        producer_config=producer_config,
        transactional_id_prefix=prefix.strip() if prefix else None,
    )
