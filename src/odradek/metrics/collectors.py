"""The broker's metrics as Prometheus families, computed when scraped.

A ``prometheus_client`` custom Collector: nothing here runs until a scrape, and then
it reads what the broker already keeps (the plain counters of ``metrics.stats``, the
partitions, logs, listeners, purgatory, cleaner and coordinator) on the broker's event
loop, which owns all of it, so the reads need no locks and see one consistent moment.
Gauges per partition (log size, offsets, lag) are therefore never updated on the hot
path: a scrape walks the partitions once.

Names are Kafka's MBeans translated as Prometheus' JMX exporter would (domain, type and
name in snake case, ``_total`` for counters, seconds and bytes as base units); the
mapping table is docs/metrics.md. An all-topics BrokerTopicMetrics series has no
``topic`` label, as Kafka's all-topics MBean has no ``topic`` key.

The broker is taken as ``Any`` (it is server.Broker, or anything with its parts):
this package sits below ``server`` and must not import it.
"""

from __future__ import annotations

import copy
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from odradek.metrics.stats import (
    ISR_CHANGES,
    LOG_FLUSH,
    REBALANCES,
    Histogram,
    RequestStats,
    TopicStats,
)
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.replication.partition import NO_LEADER
from odradek.storage import TopicPartition

#: BrokerTopicMetrics: (Kafka's MBean name, our attribute, help).
TOPIC_METRICS: tuple[tuple[str, str, str], ...] = (
    ("MessagesInPerSec", "messages_in", "Records appended by producers."),
    ("BytesInPerSec", "bytes_in", "Record batch bytes appended by producers."),
    ("BytesOutPerSec", "bytes_out", "Record bytes sent to consumers."),
    ("BytesRejectedPerSec", "bytes_rejected", "Record batch bytes refused as invalid."),
    ("ReplicationBytesInPerSec", "replication_bytes_in", "Record bytes fetched as a follower."),
    ("ReplicationBytesOutPerSec", "replication_bytes_out", "Record bytes sent to followers."),
    (
        "TotalProduceRequestsPerSec",
        "total_produce_requests",
        "Partitions of Produce requests (each partition counts once, as in Kafka).",
    ),
    ("FailedProduceRequestsPerSec", "failed_produce_requests", "Partition appends that failed."),
    ("TotalFetchRequestsPerSec", "total_fetch_requests", "Partitions of consumer Fetch requests."),
    ("FailedFetchRequestsPerSec", "failed_fetch_requests", "Partition reads that failed."),
)

#: BrokerTopicMetrics that Kafka keeps for all topics only (its per-topic MBeans lack them).
ALL_TOPICS_ONLY = frozenset({"replication_bytes_in", "replication_bytes_out"})

#: RequestMetrics time histograms: (our name, Kafka's MBean name, help). Request queue is
#: zero by construction (docs/metrics.md says why); it is exported with every request in
#: the zero bucket so that Kafka dashboards find all the parts.
TIME_HISTOGRAMS = (
    ("total_time", "TotalTimeMs", "From the request's dispatch until its response is written."),
    ("local_time", "LocalTimeMs", "The handler running, decode and encode included."),
    ("remote_time", "RemoteTimeMs", "The handler waiting: purgatory, coordinator writes."),
    (
        "response_queue_time",
        "ResponseQueueTimeMs",
        "The response waiting in its connection for the write that sends it.",
    ),
    ("response_send_time", "ResponseSendTimeMs", "Writing the response, sendfile included."),
    (
        "throttle_time",
        "ThrottleTimeMs",
        "The connection muted afterwards for a client quota (zero without quotas).",
    ),
)
ZERO_TIME_HISTOGRAMS = (
    ("request_queue_time", "RequestQueueTimeMs", "Zero: the connection's task handles its frame."),
)


def request_name(api_key: int) -> str:
    """Kafka's request name for an API key: PRODUCE -> Produce, LIST_OFFSETS -> ListOffsets."""
    try:
        return "".join(part.title() for part in ApiKey(api_key).name.split("_"))
    except ValueError:
        return str(api_key)


def error_name(code: int) -> str:
    """Kafka's error name (Errors.name()): 0 -> NONE, 3 -> UNKNOWN_TOPIC_OR_PARTITION."""
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return str(code)


def _histogram(
    name: str, doc: str, labels: dict[str, str], histogram: Histogram
) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, doc, labels=list(labels))
    family.add_metric(list(labels.values()), histogram.cumulative(), histogram.sum)
    return family


class BrokerCollector:
    """Every family of one broker; register it on a CollectorRegistry of the broker's own."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker

    def collect(self) -> Iterator[Metric]:
        yield from self.read()()

    def read(self) -> Callable[[], list[Metric]]:
        """Read the broker's state (on its event loop); the function returned builds the families
        from what was read, in any thread.

        Reading is copying numbers into tuples; building the families (a labels dict and a
        sample per series) is most of a scrape with thousands of partitions, and needs no loop.
        """
        small = [
            *self._request_metrics(),
            *self._socket_server(),
            *self._purgatory(),
            *self._cleaner(),
            *self._replica_manager(),
            *self._controller(),
            *self._client_quotas(),
        ]
        topics = self._read_topic_metrics()
        logs = self._read_logs()
        groups = self._read_groups()

        def build() -> list[Metric]:
            return [
                *_topic_families(*topics),
                *small,
                *_log_families(logs),
                *_group_families(*groups),
            ]

        return build

    # -- BrokerTopicMetrics --------------------------------------------------------------

    def _read_topic_metrics(self) -> tuple[TopicStats, list[tuple[str, TopicStats]]]:
        """Copies of the all-topics and per-topic counters; deleted topics' counters dropped."""
        stats = self.broker.topic_stats
        known = self.broker.metadata.topics()
        for deleted in [t for t in stats.topics if t not in known]:
            stats.remove_topic(deleted)
        return copy.copy(stats.all_topics), [(t, copy.copy(s)) for t, s in stats.topics.items()]

    # -- RequestMetrics ------------------------------------------------------------------

    def _request_metrics(self) -> Iterator[Metric]:
        metrics = self.broker.request_metrics
        if metrics is None:
            return
        prefix = "kafka_network_requestmetrics_"
        requests = CounterMetricFamily(
            prefix + "requests",
            "Requests answered (RequestsPerSec).",
            labels=["request", "version"],
        )
        errors = CounterMetricFamily(
            prefix + "errors",
            "Error codes in responses, NONE included (ErrorsPerSec).",
            labels=["request", "error"],
        )
        by_error: Counter[tuple[str, str]] = Counter()
        histograms: dict[str, list[tuple[dict[str, str], Histogram]]] = {}
        stats: RequestStats
        for (api_key, version, kind), stats in metrics:
            labels = {"request": request_name(api_key) + kind, "version": str(version)}
            requests.add_metric(list(labels.values()), stats.requests)
            for code, n in stats.errors.items():
                by_error[labels["request"], error_name(code)] += n
            for attribute, _, _ in TIME_HISTOGRAMS:
                histograms.setdefault(attribute, []).append((labels, getattr(stats, attribute)))
            zero = Histogram()
            zero.counts[0] = stats.requests
            for attribute, _, _ in ZERO_TIME_HISTOGRAMS:
                histograms.setdefault(attribute, []).append((labels, zero))
            histograms.setdefault("request_bytes", []).append((labels, stats.request_bytes))
            histograms.setdefault("response_bytes", []).append((labels, stats.response_bytes))
        for (request, error), n in sorted(by_error.items()):
            errors.add_metric([request, error], n)
        yield requests
        yield errors
        docs = {a: f"{doc} Kafka: {mbean}." for a, mbean, doc in TIME_HISTOGRAMS}
        docs.update({a: f"{doc} Kafka: {mbean}." for a, mbean, doc in ZERO_TIME_HISTOGRAMS})
        docs["request_bytes"] = "Request sizes, size prefix included (RequestBytes)."
        docs["response_bytes"] = "Response sizes, size prefix included."
        for attribute, series in histograms.items():
            unit = "bytes" if attribute.endswith("bytes") else "seconds"
            name = prefix + attribute.removesuffix("_bytes") + "_" + unit
            family = HistogramMetricFamily(name, docs[attribute], labels=["request", "version"])
            for labels, histogram in series:
                family.add_metric(list(labels.values()), histogram.cumulative(), histogram.sum)
            yield family

    # -- socket server -------------------------------------------------------------------

    def _client_quotas(self) -> Iterator[Metric]:
        """Kafka's quota sensors (``kafka.server:type=Produce|Fetch|Request|ControllerMutation,
        user=...,client-id=...``): each sensor's rate and its average throttle time over the
        quota windows, per the (user, client id) tags it is kept under ("" where its quota
        leaves a part out). A sensor exists once a quota of its kind is configured and the
        client made a request."""
        now_ms = int(time.time() * 1000)
        for manager in self.broker.client_quotas.managers():
            if not manager.sensors:
                continue
            kind = manager.kind
            prefix = f"kafka_server_{kind.group.lower()}_"  # as kafka_server_replicamanager_
            labels = ["user", "client_id"]
            rate = GaugeMetricFamily(
                prefix + kind.metric.replace("-", "_"),
                f"The {kind.config} quota's measure ({kind.metric}) of each quota entity.",
                labels=labels,
            )
            throttle = GaugeMetricFamily(
                prefix + "throttle_time",
                f"Average throttle time (ms) given for {kind.config} (throttle-time).",
                labels=labels,
            )
            for (user, client_id), sensor in manager.sensors.items():
                rate.add_metric([user, client_id], sensor.value(now_ms))
                throttle.add_metric([user, client_id], sensor.throttle_time_avg(now_ms))
            yield from (rate, throttle)

    def _socket_server(self) -> Iterator[Metric]:
        prefix = "kafka_server_socket_server_metrics_"
        count = GaugeMetricFamily(
            prefix + "connection_count", "Open connections (connection-count).", labels=["listener"]
        )
        created = CounterMetricFamily(
            prefix + "connection_creation",
            "Connections accepted (connection-creation-total).",
            labels=["listener"],
        )
        closed = CounterMetricFamily(
            prefix + "connection_close",
            "Connections closed (connection-close-total).",
            labels=["listener"],
        )
        for listener in self.broker.listeners:
            name = [listener.config.listener_name]
            count.add_metric(name, listener.connection_count)
            created.add_metric(name, listener.connections_created)
            closed.add_metric(name, listener.connections_created - listener.connection_count)
        yield from (count, created, closed)

    # -- purgatory -----------------------------------------------------------------------

    def _purgatory(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "kafka_server_delayedoperationpurgatory_num_delayed_operations",
            "Requests waiting in a purgatory: acks=all produces, long-polling fetches "
            "(NumDelayedOperations).",
            labels=["delayed_operation"],
        )
        family.add_metric(["Produce"], self.broker.replica_manager.produce_purgatory.delayed)
        family.add_metric(["Fetch"], self.broker.fetch_purgatory.delayed)
        yield family

    # -- logs ----------------------------------------------------------------------------

    def _read_logs(self) -> list[tuple[str, int, int, int, int, int]]:
        """(topic, partition, size, segments, log start, log end) of every online log."""
        return [
            (
                lg.topic_partition.topic,
                lg.topic_partition.partition,
                lg.size_in_bytes,
                len(lg.segments),
                lg.log_start_offset,
                lg.log_end_offset,
            )
            for lg in self.broker.log_manager.all_logs()
            if not lg.offline
        ]

    # -- cleaner -------------------------------------------------------------------------

    def _cleaner(self) -> Iterator[Metric]:
        manager = self.broker.log_manager
        uncleanable = GaugeMetricFamily(
            "kafka_log_logcleanermanager_uncleanable_partitions_count",
            "Partitions whose cleaning failed (uncleanable-partitions-count).",
            labels=["log_directory"],
        )
        by_dir: Counter[str] = Counter()
        logs = manager.all_logs()
        for lg in logs:
            if manager.cleaner.is_uncleanable(lg):
                by_dir[str(lg.dir.parent)] += 1
        for d in manager.log_dirs:
            uncleanable.add_metric([str(d)], by_dir[str(d)])
        yield uncleanable
        worst = 0.0
        for lg in logs:
            if lg.offline or not lg.config.compact:
                continue
            inactive = lg.segments[:-1]
            total = sum(s.size for s in inactive)
            if total:
                dirty = sum(s.size for s in inactive if s.next_offset > lg.cleaner_offset)
                worst = max(worst, dirty / total)
        yield GaugeMetricFamily(
            "kafka_log_logcleanermanager_max_dirty_percent",
            "Highest dirty share of a compacted log's inactive segments, in percent "
            "(max-dirty-percent).",
            value=100 * worst,
        )
        last = manager.cleaner_last_run_ms
        yield GaugeMetricFamily(
            "kafka_log_logcleaner_time_since_last_run_seconds",
            "Since the cleaner last looked at the compacted logs (time-since-last-run-ms); "
            "0 before its first pass.",
            value=(time.time() * 1000 - last) / 1000 if last else 0.0,
        )

    # -- ReplicaManager --------------------------------------------------------------------

    def _replica_manager(self) -> Iterator[Metric]:
        prefix = "kafka_server_replicamanager_"
        node_id = self.broker.node_id
        leaders = under_replicated = under_min_isr = 0
        partitions = self.broker.replica_manager.partitions()
        for partition in partitions.values():
            if partition.leader_id != node_id:
                continue
            leaders += 1
            isr = len(partition.isr)
            if isr < len(partition.replicas):
                under_replicated += 1
            if isr < partition.log.config.min_insync_replicas:
                under_min_isr += 1
        gauges = (
            ("partition_count", "Partitions hosted here (PartitionCount).", len(partitions)),
            ("leader_count", "Partitions led here (LeaderCount).", leaders),
            (
                "under_replicated_partitions",
                "Led partitions whose ISR is smaller than their replicas (UnderReplicatedPartitions).",
                under_replicated,
            ),
            (
                "under_min_isr_partition_count",
                "Led partitions whose ISR is below min.insync.replicas (UnderMinIsrPartitionCount).",
                under_min_isr,
            ),
        )
        for name, doc, value in gauges:
            yield GaugeMetricFamily(prefix + name, doc, value=value)
        yield CounterMetricFamily(
            prefix + "isr_shrinks",
            "Committed ISR shrinks (IsrShrinksPerSec).",
            value=ISR_CHANGES.shrinks,
        )
        yield CounterMetricFamily(
            prefix + "isr_expands",
            "Committed ISR expansions (IsrExpandsPerSec).",
            value=ISR_CHANGES.expands,
        )

    # -- controller ------------------------------------------------------------------------

    def _controller(self) -> Iterator[Metric]:
        cluster = self.broker.cluster
        active = cluster is None or (cluster.controller is not None and cluster.controller.active)
        offline = 0
        if active:
            for topic in self.broker.metadata.topics().values():
                offline += sum(1 for p in topic.partitions if p.leader == NO_LEADER)
        prefix = "kafka_controller_kafkacontroller_"
        yield GaugeMetricFamily(
            prefix + "active_controller_count",
            "1 on the active controller (ActiveControllerCount); a single node is its own.",
            value=int(active),
        )
        yield GaugeMetricFamily(
            prefix + "offline_partitions_count",
            "Partitions without a leader, on the active controller (OfflinePartitionsCount).",
            value=offline,
        )

    # -- group coordinator -------------------------------------------------------------------

    def _read_groups(
        self,
    ) -> tuple[Counter[tuple[str, str]], list[tuple[str, str, int, int, int | None]]]:
        """Groups by (protocol, state), and (group, topic, partition, committed, lag or None)."""
        service = self.broker.components.get("group_coordinator")
        groups = service.core.groups if service is not None else {}
        states: Counter[tuple[str, str]] = Counter()
        offsets: list[tuple[str, str, int, int, int | None]] = []
        partitions = self.broker.replica_manager.partitions()
        node_id = self.broker.node_id
        for group_id, group in groups.items():
            if group.protocol_type == "consumer" and hasattr(group, "state_name"):
                states["consumer", group.state_name] += 1
            elif group.state.value != "Dead":
                states["classic", group.state.value] += 1
            else:
                continue
            for (topic, index), offset in group.offsets.items():
                partition = partitions.get(TopicPartition(topic, index))
                lag = None
                if partition is not None and partition.leader_id == node_id:
                    lag = max(0, partition.high_watermark - offset.offset)
                offsets.append((group_id, topic, index, offset.offset, lag))
        return states, offsets


def _topic_families(
    everything: TopicStats, topics: list[tuple[str, TopicStats]]
) -> Iterator[Metric]:
    """BrokerTopicMetrics: the all-topics series without a topic label, then one per topic."""
    topics = sorted(topics, key=lambda item: item[0])
    for mbean, attribute, doc in TOPIC_METRICS:
        name = "kafka_server_brokertopicmetrics_" + _snake(mbean.removesuffix("PerSec"))
        family = Metric(name, f"{doc} Kafka: BrokerTopicMetrics {mbean}.", "counter")
        family.add_sample(name + "_total", {}, getattr(everything, attribute))
        for topic, topic_stats in [] if attribute in ALL_TOPICS_ONLY else topics:
            family.add_sample(name + "_total", {"topic": topic}, getattr(topic_stats, attribute))
        yield family


def _log_families(rows: list[tuple[str, int, int, int, int, int]]) -> Iterator[Metric]:
    labels = ["topic", "partition"]
    families = [
        GaugeMetricFamily("kafka_log_log_size_bytes", "Bytes of the log (Size).", labels=labels),
        GaugeMetricFamily(
            "kafka_log_log_num_log_segments", "Segments of the log (NumLogSegments).", labels=labels
        ),
        GaugeMetricFamily(
            "kafka_log_log_log_start_offset", "First offset (LogStartOffset).", labels=labels
        ),
        GaugeMetricFamily(
            "kafka_log_log_log_end_offset", "Next offset to append (LogEndOffset).", labels=labels
        ),
    ]
    for topic, partition, *values in sorted(rows):
        key = [topic, str(partition)]
        for family, value in zip(families, values, strict=True):
            family.add_metric(key, value)
    yield from families
    yield _histogram(
        "kafka_log_logflushstats_log_flush_time_seconds",
        "fsyncs of logs and their time (LogFlushRateAndTimeMs).",
        {},
        LOG_FLUSH,
    )


def _group_families(
    states: Counter[tuple[str, str]], offsets: list[tuple[str, str, int, int, int | None]]
) -> Iterator[Metric]:
    prefix = "kafka_server_group_coordinator_metrics_"
    count = GaugeMetricFamily(
        prefix + "group_count",
        "Groups this coordinator owns, by protocol and state (group-count).",
        labels=["protocol", "state"],
    )
    for (protocol, state), n in sorted(states.items()):
        count.add_metric([protocol, state], n)
    yield count
    rebalances = CounterMetricFamily(
        prefix + "group_rebalance",
        "Rebalances: classic generations, consumer group epochs (group-rebalance-count).",
        labels=["protocol"],
    )
    rebalances.add_metric(["classic"], REBALANCES.classic)
    rebalances.add_metric(["consumer"], REBALANCES.consumer)
    yield rebalances
    labels = ["group", "topic", "partition"]
    committed = GaugeMetricFamily(
        "kafka_consumergroup_current_offset", "The group's committed offset.", labels=labels
    )
    lag = GaugeMetricFamily(
        "kafka_consumergroup_lag",
        "High watermark minus the committed offset, per partition led here.",
        labels=labels,
    )
    for group_id, topic, index, offset, behind in sorted(offsets):
        key = [group_id, topic, str(index)]
        committed.add_metric(key, offset)
        if behind is not None:
            lag.add_metric(key, behind)
    yield committed
    yield lag


class ScrapeCollector:
    """What the previous scrape cost: seconds holding the event loop, seconds formatting."""

    def __init__(self, server: Any) -> None:
        self.server = server

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "odradek_metrics_last_scrape_collect_seconds",
            "The previous scrape's walk over the broker's state, on its event loop.",
            value=self.server.last_collect_s,
        )
        yield GaugeMetricFamily(
            "odradek_metrics_last_scrape_format_seconds",
            "The previous scrape's text formatting, in a worker thread.",
            value=self.server.last_format_s,
        )


def _snake(camel: str) -> str:
    """MessagesIn -> messages_in."""
    return "".join(f"_{c.lower()}" if c.isupper() and i else c.lower() for i, c in enumerate(camel))
