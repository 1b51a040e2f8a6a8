"""The counters the broker updates while it works: plain ints, read at scrape time.

Why not prometheus_client's Counter and Histogram on the hot path: each ``inc`` and
``observe`` takes a lock (the library is thread safe), and a broker's produce and fetch
paths run on one event loop thread that needs none. A request here costs a few integer
additions and one ``bisect`` per histogram; the ``metrics`` collectors turn these objects
into Prometheus families only when someone scrapes.

This module imports nothing of ours, so every layer may count into it: storage (log
flushes, from its flush thread), replication (ISR changes, bytes fetched as a follower),
the coordinator (rebalances), the server's handlers (topic and request counts). The process-wide
objects at the bottom are Kafka's static stats (``LogFlushStats``, the ISR rates of
``ReplicaManager``, the group coordinator's rebalance sensors): one per broker process.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Iterable, Iterator

#: Latency buckets in seconds: 0.5 ms to 30 s, about 2.5x apart, as Prometheus client defaults
#: are, with the low end finer because most broker requests finish within a few milliseconds.
LATENCY_BUCKETS: tuple[float, ...] = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)
#: Size buckets in bytes: 64 B to 64 MiB, powers of 4 (request.max.bytes is 100 MiB).
SIZE_BUCKETS: tuple[float, ...] = tuple(float(64 * 4**i) for i in range(11))
#: Kafka's error code 3 (this module imports nothing, so not protocol.errors' ErrorCode).
UNKNOWN_TOPIC_OR_PARTITION = 3


class Histogram:
    """Observations counted per bucket (``counts[i]``: values <= ``bounds[i]``; the last is +Inf).

    Not thread safe: owned by the event loop. ``LockedHistogram`` is for threads.
    """

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...] = LATENCY_BUCKETS) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[str, int]]:
        """(le, observations <= le) pairs ending with +Inf, as Prometheus exposes buckets."""
        out, running = [], 0
        for bound, n in zip((*self.bounds, float("inf")), self.counts, strict=True):
            running += n
            out.append(("+Inf" if bound == float("inf") else repr(bound), running))
        return out


class LockedHistogram(Histogram):
    """A Histogram observed from several threads (log flushes run in the LogManager's threads)."""

    __slots__ = ("_lock",)

    def __init__(self, bounds: tuple[float, ...] = LATENCY_BUCKETS) -> None:
        super().__init__(bounds)
        self._lock = threading.Lock()

    def observe(self, value: float) -> None:
        with self._lock:
            super().observe(value)


class TopicStats:
    """One topic's BrokerTopicMetrics (or all topics' together), as running totals."""

    __slots__ = (
        "bytes_in",
        "bytes_out",
        "bytes_rejected",
        "failed_fetch_requests",
        "failed_produce_requests",
        "messages_in",
        "replication_bytes_in",
        "replication_bytes_out",
        "total_fetch_requests",
        "total_produce_requests",
    )

    def __init__(self) -> None:
        self.messages_in = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.bytes_rejected = 0
        #: Replication bytes are counted in the all-topics stats only, as Kafka's are.
        self.replication_bytes_in = 0
        self.replication_bytes_out = 0
        self.total_produce_requests = 0
        self.failed_produce_requests = 0
        self.total_fetch_requests = 0
        self.failed_fetch_requests = 0


class BrokerTopicStats:
    """Kafka's BrokerTopicStats: per-topic counters and their all-topics rollup.

    As Kafka counts them, a "request" here is one partition of a Produce or Fetch
    request (ReplicaManager marks the topic's rate once per partition it appends to
    or reads). Bytes out count what consumers were sent, file regions included.
    """

    def __init__(self) -> None:
        self.all_topics = TopicStats()
        self.topics: dict[str, TopicStats] = {}

    def topic(self, name: str) -> TopicStats:
        stats = self.topics.get(name)
        if stats is None:
            stats = self.topics[name] = TopicStats()
        return stats

    def remove_topic(self, name: str) -> None:
        """Forget a deleted topic's series (its counts stay in the all-topics rollup, as in Kafka)."""
        self.topics.pop(name, None)

    def appended(self, topic: str, size: int, messages: int) -> None:
        """A partition's batches were appended: ``size`` bytes holding ``messages`` records."""
        for stats in (self.topic(topic), self.all_topics):
            stats.total_produce_requests += 1
            stats.bytes_in += size
            stats.messages_in += messages

    def append_failed(self, topic: str, rejected_bytes: int = 0) -> None:
        """A partition's append failed; ``rejected_bytes`` when its records were refused as invalid."""
        for stats in (self.topic(topic), self.all_topics):
            stats.total_produce_requests += 1
            stats.failed_produce_requests += 1
            stats.bytes_rejected += rejected_bytes

    def fetched(self, reads: Iterable[tuple[str, int, int]], follower: bool = False) -> None:
        """(topic, error code, bytes sent) of every partition a Fetch read; a follower's bytes are
        ReplicationBytesOut (all topics only), a consumer's BytesOut (both count as fetch
        requests, as in Kafka)."""
        everything = self.all_topics
        for topic, error_code, size in reads:
            if error_code == UNKNOWN_TOPIC_OR_PARTITION:
                continue  # as Kafka: no series for every name a client gets wrong
            stats = self.topic(topic)
            stats.total_fetch_requests += 1
            everything.total_fetch_requests += 1
            if error_code:
                stats.failed_fetch_requests += 1
                everything.failed_fetch_requests += 1
            elif follower:
                everything.replication_bytes_out += size
            else:
                stats.bytes_out += size
                everything.bytes_out += size

    def replicated(self, size: int) -> None:
        """A follower appended ``size`` bytes fetched from a leader (ReplicationBytesInPerSec)."""
        self.all_topics.replication_bytes_in += size


class RequestStats:
    """RequestMetrics of one API version: count, errors by code, time and size histograms.

    Times are Kafka's split of a request's life, as far as the pipeline has the parts
    (docs/metrics.md): ``local`` is the handler running (decode and encode included),
    ``remote`` the handler waiting (a long poll in the purgatory, a coordinator's log
    write), ``response_queue`` the encoded response waiting in its connection for the
    write that sends it (responses are coalesced), ``response_send`` that write (for a
    Fetch, its sendfile), ``total`` all of them. ``throttle`` is the time a client quota
    then muted the connection (Kafka's ThrottleTimeMs; zero for most requests).
    """

    __slots__ = (
        "errors",
        "local_time",
        "remote_time",
        "request_bytes",
        "requests",
        "response_bytes",
        "response_queue_time",
        "response_send_time",
        "throttle_time",
        "total_time",
    )

    def __init__(self) -> None:
        self.requests = 0
        #: error code -> responses' count of it (Kafka's errorCounts, NONE included).
        self.errors: dict[int, int] = {}
        self.total_time = Histogram()
        self.local_time = Histogram()
        self.remote_time = Histogram()
        self.response_queue_time = Histogram()
        self.response_send_time = Histogram()
        self.throttle_time = Histogram()
        self.request_bytes = Histogram(SIZE_BUCKETS)
        self.response_bytes = Histogram(SIZE_BUCKETS)

    def record(
        self,
        total: float,
        remote: float,
        response_queue: float,
        response_send: float,
        request_size: int,
        response_size: int,
        errors: dict[int, int] | None,
        throttle_ms: int = 0,
    ) -> None:
        """One request answered: its ``total`` time and the parts of it that were not the
        handler running (so local is what remains)."""
        self.requests += 1
        self.total_time.observe(total)
        self.local_time.observe(total - remote - response_queue - response_send)
        self.remote_time.observe(remote)
        self.response_queue_time.observe(response_queue)
        self.response_send_time.observe(response_send)
        self.throttle_time.observe(throttle_ms / 1000)
        self.request_bytes.observe(request_size)
        self.response_bytes.observe(response_size)
        if errors:
            mine = self.errors
            for code, n in errors.items():
                mine[code] = mine.get(code, 0) + n


class RequestMetrics:
    """RequestStats by (api key, version, kind), created on first use.

    ``kind`` is '' for every request, and "Consumer" or "Follower" for the second count Kafka
    keeps of each Fetch (its FetchConsumer and FetchFollower request metrics).
    """

    def __init__(self) -> None:
        self.by_version: dict[tuple[int, int, str], RequestStats] = {}

    def stats(self, api_key: int, api_version: int, kind: str = "") -> RequestStats:
        key = (api_key, api_version, kind)
        stats = self.by_version.get(key)
        if stats is None:
            stats = self.by_version[key] = RequestStats()
        return stats

    def __iter__(self) -> Iterator[tuple[tuple[int, int, str], RequestStats]]:
        return iter(sorted(self.by_version.items()))


class IsrChangeStats:
    """Kafka's IsrShrinksPerSec and IsrExpandsPerSec: committed ISR changes of partitions led here."""

    __slots__ = ("expands", "shrinks")

    def __init__(self) -> None:
        self.shrinks = 0
        self.expands = 0

    def changed(self, before: frozenset[int], after: frozenset[int]) -> None:
        """One committed change; a change that both removes and adds replicas counts as both."""
        if before - after:
            self.shrinks += 1
        if after - before:
            self.expands += 1


class RebalanceStats:
    """Rebalances the group coordinator ran: classic generations and consumer group epochs."""

    __slots__ = ("classic", "consumer")

    def __init__(self) -> None:
        self.classic = 0
        self.consumer = 0


#: LogFlushStats.logFlushTimer: every fsync of a log (flush.ms, flush.messages, rolls).
LOG_FLUSH = LockedHistogram()
#: Committed ISR changes of partitions this broker leads.
ISR_CHANGES = IsrChangeStats()
#: Group rebalances this broker's coordinator ran.
REBALANCES = RebalanceStats()
