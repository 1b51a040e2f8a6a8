"""The client calls behind the console's pages, blocking, with errors a user can read.

Each method makes the few requests its page needs with confluent-kafka (AdminClient for
metadata, configs, offsets and groups; a Consumer assigned to partitions, never in a group,
for the message browser; one shared Producer for the produce form) and returns plain
dataclasses for the templates. The methods block, so the web app runs them in threads;
librdkafka's clients are thread-safe and the AdminClient completes its futures on its own
background thread, so one AdminClient serves every request.

Every failure becomes ``ConsoleError`` with an HTTP status and one sentence: an unknown topic
or group is 404, a request the cluster refuses is 400 with Kafka's error name, a cluster that
does not answer within the request timeout is 502. The page shows the sentence, never a
traceback.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from odradek.cli.broker_calls import error_text
from odradek.cli.groups import state_name
from odradek.console.errors import ConsoleError
from odradek.console.live import LiveTail
from odradek.console.paging import Page, paginate
from odradek.console.payload import Message, message_of

#: Most records the message browser reads for one page.
MAX_MESSAGES = 500
#: Without a partition filter the browser reads every partition of a topic up to this many;
#: beyond it a partition must be chosen (10,000 partitions would be 10,000 fetches).
MAX_BROWSED_PARTITIONS = 100

#: How much longer than its request timeout a call is awaited.
_GRACE_S = 1.0

_NOT_FOUND = frozenset(
    {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.GROUP_ID_NOT_FOUND, KafkaError._UNKNOWN_TOPIC}
)
_UNREACHABLE = frozenset(
    {KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN}
)


@dataclass(frozen=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None
    leaders: int
    is_controller: bool


@dataclass(frozen=True)
class Overview:
    cluster_id: str | None
    controller_id: int | None
    brokers: list[BrokerInfo]
    topics: int
    partitions: int
    under_replicated: int
    offline: int


@dataclass(frozen=True)
class TopicSummary:
    name: str
    partitions: int
    replication_factor: int
    under_replicated: int
    internal: bool


@dataclass(frozen=True)
class PartitionInfo:
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]
    start_offset: int | None = None
    end_offset: int | None = None

    @property
    def messages(self) -> int | None:
        if self.start_offset is None or self.end_offset is None:
            return None
        return self.end_offset - self.start_offset


@dataclass(frozen=True)
class ConfigEntryInfo:
    name: str
    value: str | None
    source: str
    is_default: bool
    is_sensitive: bool


@dataclass
class Browse:
    """What the message browser read, and notes for the reader (offsets out of range)."""

    messages: list[Message] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class GroupSummary:
    group_id: str
    type: str
    state: str


@dataclass(frozen=True)
class PartitionLag:
    topic: str
    partition: int
    committed: int
    end_offset: int
    lag: int
    member: str | None


@dataclass(frozen=True)
class MemberInfo:
    member_id: str
    client_id: str
    host: str
    assignment: list[str]


@dataclass(frozen=True)
class GroupDetail:
    group_id: str
    state: str
    type: str
    coordinator: int | None
    assignor: str
    members: list[MemberInfo]
    lags: list[PartitionLag]

    @property
    def total_lag(self) -> int:
        return sum(lag.lag for lag in self.lags)


def _status_of(exc: KafkaException) -> int:
    error = exc.args[0]
    if not isinstance(error, KafkaError):
        return 400
    if error.code() in _NOT_FOUND:
        return 404
    if error.code() in _UNREACHABLE:
        return 502
    return 400


class Cluster:
    """The console's window on one cluster: a shared AdminClient and a lazily made Producer."""

    def __init__(self, config: Mapping[str, Any], timeout_s: float = 10.0) -> None:
        self.bootstrap_servers = str(config.get("bootstrap.servers", ""))
        self.timeout_s = timeout_s
        # librdkafka's own log lines (a line per failed reconnect) would flood the console's
        # output; its errors reach the pages through the calls that fail.
        self.config = {"log_level": 0, **config}
        self._admin = AdminClient(dict(self.config))
        self._producer: Producer | None = None
        self._producer_lock = threading.Lock()

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(self.timeout_s)

    # -- waiting ------------------------------------------------------------------------

    def _result(self, future: Future, what: str) -> Any:
        try:
            # A moment longer than the request timeout every call passes: the client's own
            # answer (which broker, what error) comes first when it has one.
            return future.result(timeout=self.timeout_s + _GRACE_S)
        except FutureTimeout:
            raise self._unreachable(what) from None
        except KafkaException as exc:
            if _status_of(exc) == 502:
                raise self._unreachable(what) from None
            raise ConsoleError(f"{what}: {error_text(exc)}", _status_of(exc)) from None

    def _unreachable(self, what: str) -> ConsoleError:
        return ConsoleError(
            f"{what}: no answer from the cluster at {self.bootstrap_servers} within "
            f"{self.timeout_s:g} s (is a broker running there?)",
            502,
        )

    def _metadata(self, topic: str | None = None) -> Any:
        try:
            return self._admin.list_topics(topic, timeout=self.timeout_s)
        except KafkaException as exc:
            if _status_of(exc) == 502:
                raise self._unreachable("metadata") from None
            raise ConsoleError(f"metadata: {error_text(exc)}", _status_of(exc)) from None

    def _describe_topic(self, topic: str) -> Any:
        """DescribeTopics of one topic: unlike a Metadata request for a named topic, it never
        creates the topic on a broker with auto.create.topics.enable (Kafka's default)."""
        future = self._admin.describe_topics(
            TopicCollection([topic]), request_timeout=self.timeout_s
        )[topic]
        return self._result(future, f"topic {topic!r}")

    def _offsets(
        self, partitions: Iterable[tuple[str, int]], spec: Any
    ) -> dict[tuple[str, int], int]:
        request = {TopicPartition(t, p): spec for t, p in partitions}
        if not request:
            return {}
        futures = self._admin.list_offsets(request, request_timeout=self.timeout_s)
        return {
            (tp.topic, tp.partition): self._result(f, f"offsets of {tp.topic}").offset
            for tp, f in futures.items()
        }

    # -- cluster and topics -------------------------------------------------------------

    def overview(self) -> Overview:
        described = self._result(
            self._admin.describe_cluster(request_timeout=self.timeout_s), "describing the cluster"
        )
        metadata = self._metadata()
        leaders: Counter[int] = Counter()
        partitions = under_replicated = offline = 0
        for topic in metadata.topics.values():
            for p in topic.partitions.values():
                partitions += 1
                leaders[p.leader] += 1
                under_replicated += len(p.isrs) < len(p.replicas)
                offline += p.leader < 0
        controller = described.controller.id if described.controller is not None else None
        brokers = [
            BrokerInfo(n.id, n.host, n.port, n.rack, leaders[n.id], n.id == controller)
            for n in sorted(described.nodes, key=lambda n: n.id)
        ]
        return Overview(
            described.cluster_id,
            controller,
            brokers,
            len(metadata.topics),
            partitions,
            under_replicated,
            offline,
        )

    def topics(self) -> list[TopicSummary]:
        out = []
        for name, topic in self._metadata().topics.items():
            if topic.error is not None:
                continue
            parts = list(topic.partitions.values())
            out.append(
                TopicSummary(
                    name,
                    len(parts),
                    len(parts[0].replicas) if parts else 0,
                    sum(len(p.isrs) < len(p.replicas) for p in parts),
                    name.startswith("__"),
                )
            )
        return sorted(out, key=lambda t: t.name)

    def partition_page(self, topic: str, number: int, size: int) -> Page[PartitionInfo]:
        """Page ``number`` of ``topic``'s partitions, with log start and end offsets.

        One describe names every partition (the page needs their count), but only the shown
        ones become ``PartitionInfo`` and cost an offsets request: with 10,000 partitions,
        building all of them took longer than the request itself.
        """
        described = sorted(self._describe_topic(topic).partitions, key=lambda p: p.id)
        page = paginate(described, number, size)
        keys = [(topic, p.id) for p in page.items]
        starts = self._offsets(keys, OffsetSpec.earliest())
        ends = self._offsets(keys, OffsetSpec.latest())
        shown = [
            PartitionInfo(
                p.id,
                p.leader.id if p.leader is not None else -1,
                [n.id for n in p.replicas],
                [n.id for n in p.isr],
                starts[(topic, p.id)],
                ends[(topic, p.id)],
            )
            for p in page.items
        ]
        return Page(shown, page.number, page.count, page.total)

    def topic_configs(self, topic: str) -> list[ConfigEntryInfo]:
        resource = ConfigResource(ResourceType.TOPIC, topic)
        future = self._admin.describe_configs([resource], request_timeout=self.timeout_s)[resource]
        entries = self._result(future, f"configs of topic {topic}")
        return [
            ConfigEntryInfo(
                e.name,
                None if e.is_sensitive else e.value,
                ConfigSource(e.source).name,
                bool(e.is_default),
                bool(e.is_sensitive),
            )
            for e in sorted(entries.values(), key=lambda e: e.name)
        ]

    def create_topic(
        self, name: str, partitions: int, replication_factor: int, configs: Mapping[str, str]
    ) -> None:
        new = NewTopic(
            name,
            num_partitions=partitions,
            replication_factor=replication_factor,
            config=dict(configs),
        )
        future = self._admin.create_topics([new], request_timeout=self.timeout_s)[name]
        self._result(future, f"creating topic {name}")

    def delete_topic(self, name: str) -> None:
        future = self._admin.delete_topics([name], request_timeout=self.timeout_s)[name]
        self._result(future, f"deleting topic {name}")

    def add_partitions(self, name: str, total: int) -> None:
        future = self._admin.create_partitions(
            [NewPartitions(name, total)], request_timeout=self.timeout_s
        )[name]
        self._result(future, f"adding partitions to {name}")

    # -- messages -------------------------------------------------------------------------

    def browse(
        self,
        topic: str,
        partition: int | None,
        offset: int | None,
        timestamp_ms: int | None,
        limit: int,
    ) -> Browse:
        """Up to ``limit`` records: from ``offset`` or ``timestamp_ms`` on, else the newest.

        The range of each partition is fixed before reading (its start and end offsets at
        that moment), so a busy topic does not keep the page reading; records are shown
        in timestamp order across partitions.
        """
        limit = min(max(limit, 1), MAX_MESSAGES)
        chosen = self._chosen_partitions(topic, partition)
        keys = [(topic, p) for p in chosen]
        starts = self._offsets(keys, OffsetSpec.earliest())
        ends = self._offsets(keys, OffsetSpec.latest())
        result = Browse()
        if timestamp_ms is not None:
            by_time = self._offsets(keys, OffsetSpec.for_timestamp(timestamp_ms))
        begin: dict[int, int] = {}
        for key in keys:
            p, low, high = key[1], starts[key], ends[key]
            if offset is not None:
                if offset >= high:
                    result.notes.append(
                        f"partition {p}: offset {offset} is at or past its end offset {high}; "
                        "nothing to read"
                    )
                elif offset < low:
                    result.notes.append(
                        f"partition {p}: offset {offset} is before its start offset {low}; "
                        f"reading from {low}"
                    )
                begin[p] = min(max(offset, low), high)
            elif timestamp_ms is not None:
                # No record at or after the time: nothing to read in this partition.
                begin[p] = high if by_time[key] < 0 else max(by_time[key], low)
            else:
                begin[p] = max(low, high - limit)
        todo = {p: ends[(topic, p)] for p in chosen if begin[p] < ends[(topic, p)]}
        if todo:
            messages = self._read(topic, begin, todo, limit)
            if offset is None and timestamp_ms is None:
                messages = sorted(messages, key=_order)[-limit:]
            else:
                messages = sorted(messages, key=_order)[:limit]
            result.messages = messages
        return result

    def _chosen_partitions(self, topic: str, partition: int | None) -> list[int]:
        """The partitions the browser reads: the one asked for, else all (up to a limit)."""
        known = sorted(p.id for p in self._describe_topic(topic).partitions)
        if partition is not None:
            if partition not in known:
                raise ConsoleError(
                    f"topic {topic!r} has no partition {partition} (it has {len(known)})", 404
                )
            return [partition]
        if len(known) > MAX_BROWSED_PARTITIONS:
            raise ConsoleError(
                f"topic {topic!r} has {len(known)} partitions: choose one to browse", 400
            )
        return known

    def _read(
        self, topic: str, begin: Mapping[int, int], ends: dict[int, int], limit: int
    ) -> list[Message]:
        consumer = self._reader()
        messages: list[Message] = []
        taken: Counter[int] = Counter()
        try:
            consumer.assign([TopicPartition(topic, p, begin[p]) for p in ends])
            deadline = time.monotonic() + self.timeout_s
            while ends:
                if time.monotonic() >= deadline:
                    raise self._unreachable(f"reading {topic}")
                for record in consumer.consume(500, timeout=0.2):
                    error = record.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            continue
                        raise ConsoleError(f"reading {topic}: {error.name()}: {error.str()}", 502)
                    p, at = record.partition(), record.offset()
                    if p is None or at is None or p not in ends or at >= ends[p]:
                        continue
                    messages.append(message_of(record))
                    taken[p] += 1
                    if at + 1 >= ends[p] or taken[p] >= limit:
                        del ends[p]
                for p in list(ends):
                    position = consumer.position([TopicPartition(topic, p)])[0].offset
                    if position >= ends[p]:  # past a compacted or aborted tail
                        del ends[p]
        finally:
            consumer.close()
        return messages

    def _reader(self) -> Consumer:
        """A Consumer for assigned partitions only: it never joins its group or commits."""
        return Consumer(
            {
                **self.config,
                "group.id": f"odradek-console-{uuid.uuid4()}",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "isolation.level": "read_uncommitted",
                # A live tail keeps its consumer for as long as the page is open: bound what
                # librdkafka prefetches for it (the default is 64 MiB per consumer).
                "queued.max.messages.kbytes": 4096,
            }
        )

    def live_tail(self, topic: str, partition: int | None, resume: Mapping[int, int]) -> LiveTail:
        """A LiveTail of ``topic`` (or of one partition): from the end offsets of now, or for
        partitions named in ``resume``, from the offsets it gives (a reconnecting page's)."""
        chosen = self._chosen_partitions(topic, partition)
        keys = [(topic, p) for p in chosen if p not in resume]
        ends = self._offsets(keys, OffsetSpec.latest())
        positions = {p: resume[p] if p in resume else ends[(topic, p)] for p in chosen}
        return LiveTail(self._reader(), topic, positions)

    # -- groups ---------------------------------------------------------------------------

    def groups(self) -> list[GroupSummary]:
        result = self._result(
            self._admin.list_consumer_groups(request_timeout=self.timeout_s), "listing groups"
        )
        # A broker that did not answer is an error of the result, not of the call: the list
        # would be incomplete, or empty when none answered, so it is not shown.
        # (confluent-kafka documents KafkaExceptions there and gives KafkaErrors.)
        errors = [e.args[0] if isinstance(e, KafkaException) else e for e in result.errors]
        if errors:
            if any(e.code() in _UNREACHABLE for e in errors):
                raise self._unreachable("listing groups")
            reasons = "; ".join(f"{e.name()}: {e.str()}" for e in errors)
            raise ConsoleError(f"listing groups: {reasons}", 502)
        return sorted(
            (
                GroupSummary(g.group_id, g.type.name.lower(), state_name(g.state))
                for g in result.valid
            ),
            key=lambda g: g.group_id,
        )

    def group(self, group_id: str) -> GroupDetail:
        description = self._result(
            self._admin.describe_consumer_groups([group_id], request_timeout=self.timeout_s)[
                group_id
            ],
            f"group {group_id}",
        )
        state = state_name(description.state)
        if state == "Dead":  # Kafka's answer for a group it does not have
            raise ConsoleError(f"consumer group {group_id!r} does not exist", 404)
        owners: dict[tuple[str, int], str] = {}
        members = []
        for m in description.members:
            assigned = m.assignment.topic_partitions if m.assignment else []
            for tp in assigned:
                owners[(tp.topic, tp.partition)] = m.member_id
            members.append(
                MemberInfo(
                    m.member_id,
                    m.client_id,
                    m.host,
                    [f"{tp.topic}-{tp.partition}" for tp in assigned],
                )
            )
        lags = self._lags(group_id, owners)
        coordinator = description.coordinator.id if description.coordinator else None
        group_type = getattr(description, "type", None)
        return GroupDetail(
            group_id,
            state,
            group_type.name.lower() if group_type is not None else "classic",
            coordinator,
            description.partition_assignor or "",
            members,
            lags,
        )

    def group_total_lag(self, group_id: str) -> int:
        """The group's lag summed over its committed partitions (0 for a group without any)."""
        return sum(lag.lag for lag in self._lags(group_id, {}))

    def _lags(self, group_id: str, owners: Mapping[tuple[str, int], str]) -> list[PartitionLag]:
        """Committed offset, end offset and lag of each partition the group committed."""
        future = self._admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group_id)], request_timeout=self.timeout_s
        )[group_id]
        committed = [
            tp
            for tp in self._result(future, f"offsets of group {group_id}").topic_partitions
            if tp.offset >= 0
        ]
        ends = self._offsets(((tp.topic, tp.partition) for tp in committed), OffsetSpec.latest())
        return [
            PartitionLag(
                tp.topic,
                tp.partition,
                tp.offset,
                ends[(tp.topic, tp.partition)],
                max(ends[(tp.topic, tp.partition)] - tp.offset, 0),
                owners.get((tp.topic, tp.partition)),
            )
            for tp in sorted(committed, key=lambda tp: (tp.topic, tp.partition))
        ]

    # -- produce --------------------------------------------------------------------------

    def produce(
        self,
        topic: str,
        partition: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes]],
    ) -> tuple[int, int]:
        """Write one record and wait for its acknowledgement: (partition, offset)."""
        self._describe_topic(topic)  # an unknown topic is a 404, not a delivery timeout
        producer = self._shared_producer()
        outcome: Future = Future()

        def delivered(error: KafkaError | None, record: Any) -> None:
            if error is not None:
                outcome.set_exception(KafkaException(error))
            else:
                outcome.set_result((record.partition(), record.offset()))

        kwargs: dict[str, Any] = {"key": key, "value": value, "on_delivery": delivered}
        if partition is not None:
            kwargs["partition"] = partition
        if headers:
            kwargs["headers"] = list(headers)
        try:
            producer.produce(topic, **kwargs)
        except (KafkaException, BufferError) as exc:
            raise ConsoleError(f"producing to {topic}: {exc}", 400) from None
        deadline = time.monotonic() + self.timeout_s
        while not outcome.done():
            if time.monotonic() >= deadline:
                raise self._unreachable(f"producing to {topic}")
            producer.poll(0.05)
        return self._result(outcome, f"producing to {topic}")

    def _shared_producer(self) -> Producer:
        with self._producer_lock:
            if self._producer is None:
                self._producer = Producer(
                    {**self.config, "message.timeout.ms": int(self.timeout_s * 1000)}
                )
            return self._producer


def _order(message: Message) -> tuple[int, int, int]:
    return (message.timestamp_ms or 0, message.partition, message.offset)
