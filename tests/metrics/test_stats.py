"""The plain counters, the request timer, error counting and the ready line, without a broker."""

from __future__ import annotations

import asyncio
import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.schema.delete_topics.v6.response import (
    DeletableTopicResult,
    DeleteTopicsResponse,
)
from kio.schema.types import TopicName
from kio.static.primitive import i32Timedelta

from odradek.metrics.collectors import error_name, request_name
from odradek.metrics.stats import (
    BrokerTopicStats,
    Histogram,
    IsrChangeStats,
    RequestStats,
)
from odradek.protocol.error_counts import error_counts
from odradek.protocol.errors import ErrorCode
from odradek.protocol.response import EncodedResponse
from odradek.server.ready import parse_ready_line, ready_line
from odradek.server.request_channel import timed


@given(st.lists(st.floats(min_value=0, max_value=100, allow_nan=False)))
def test_histogram_buckets_are_cumulative_and_end_with_every_observation(values):
    histogram = Histogram()
    for v in values:
        histogram.observe(v)
    buckets = histogram.cumulative()
    assert buckets[-1] == ("+Inf", len(values))
    assert [n for _, n in buckets] == sorted(n for _, n in buckets)
    for le, n in buckets[:-1]:
        assert n == sum(1 for v in values if v <= float(le))
    assert histogram.count == len(values)
    assert histogram.sum == pytest.approx(sum(values))


def test_topic_stats_count_per_topic_and_in_total():
    stats = BrokerTopicStats()
    stats.appended("a", 100, 3)
    stats.appended("b", 50, 1)
    stats.append_failed("a", rejected_bytes=70)
    stats.fetched([("a", 0, 100), ("b", 6, 0), ("nope", 3, 0)])
    a, b, everything = stats.topic("a"), stats.topic("b"), stats.all_topics
    assert (a.messages_in, a.bytes_in, a.total_produce_requests) == (3, 100, 2)
    assert (a.failed_produce_requests, a.bytes_rejected, a.bytes_out) == (1, 70, 100)
    assert (b.total_fetch_requests, b.failed_fetch_requests, b.bytes_out) == (1, 1, 0)
    assert (everything.messages_in, everything.bytes_in, everything.bytes_out) == (4, 150, 100)
    assert everything.total_fetch_requests == 2
    assert "nope" not in stats.topics  # an unknown topic gets no series
    stats.fetched([("a", 0, 40)], follower=True)
    # A follower's fetch is a fetch request of its topic, but its bytes are not BytesOut and,
    # as in Kafka, replication bytes are counted for all topics only.
    assert (a.replication_bytes_out, a.bytes_out, a.total_fetch_requests) == (0, 100, 2)
    assert (everything.replication_bytes_out, everything.bytes_out) == (40, 100)
    stats.replicated(25)
    assert (everything.replication_bytes_in, a.replication_bytes_in, a.bytes_in) == (25, 0, 100)
    stats.remove_topic("a")
    assert "a" not in stats.topics and everything.messages_in == 4


def test_request_stats_split_total_into_its_parts():
    stats = RequestStats()
    stats.record(0.3, 0.2, 0.01, 0.04, 100, 40, {0: 2, 3: 1})
    stats.record(0.001, 0.0, 0.0, 0.0, 100, 40, {0: 1})
    assert stats.requests == 2
    assert stats.errors == {0: 3, 3: 1}
    assert stats.total_time.sum == pytest.approx(0.301)
    assert stats.local_time.sum == pytest.approx(0.051)
    assert stats.remote_time.sum == pytest.approx(0.2)
    assert stats.response_queue_time.sum == pytest.approx(0.01)
    assert stats.response_send_time.sum == pytest.approx(0.04)
    assert stats.response_send_time.count == stats.response_queue_time.count == 2
    assert stats.request_bytes.count == stats.response_bytes.count == 2


def test_isr_changes_count_shrinks_and_expands():
    isr = IsrChangeStats()
    isr.changed(frozenset({1, 2, 3}), frozenset({1, 2}))
    isr.changed(frozenset({1, 2}), frozenset({1, 2, 3}))
    isr.changed(frozenset({1, 2}), frozenset({1, 3}))
    isr.changed(frozenset({1}), frozenset({1}))
    assert (isr.shrinks, isr.expands) == (2, 2)


def test_timed_returns_the_result_and_no_wait_for_a_handler_that_never_waits():
    async def handler() -> str:
        return "done"

    async def main():
        return await timed(handler())

    assert asyncio.run(main()) == ("done", 0.0)


def test_timed_follows_a_handler_through_its_waits_and_errors():
    async def handler(future: asyncio.Future[int]) -> int:
        got = await future
        await asyncio.sleep(0)
        return got + 1

    async def failing(future: asyncio.Future[int]) -> int:
        await future
        raise KeyError("boom")

    async def main():
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        loop.call_soon(future.set_result, 41)
        result, waited = await timed(handler(future))
        assert result == 42 and waited >= 0
        future = loop.create_future()
        loop.call_soon(future.set_result, 0)
        with pytest.raises(KeyError):
            await timed(failing(future))

    asyncio.run(main())


def test_timed_passes_cancellation_into_the_handler():
    cleaned = []

    async def handler(future: asyncio.Future[None]) -> None:
        try:
            await future
        finally:
            cleaned.append(True)

    async def main():
        future = asyncio.get_running_loop().create_future()
        task = asyncio.ensure_future(timed(handler(future)))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert cleaned == [True]


def test_error_counts_of_a_kio_response_count_every_error_code_field():
    response = DeleteTopicsResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
        responses=(
            DeletableTopicResult(
                name=TopicName("a"), topic_id=None, error_code=ErrorCode.none, error_message=None
            ),
            DeletableTopicResult(
                name=TopicName("b"),
                topic_id=None,
                error_code=ErrorCode.unknown_topic_or_partition,
                error_message=None,
            ),
            DeletableTopicResult(
                name=TopicName("c"), topic_id=None, error_code=ErrorCode.none, error_message=None
            ),
        ),
    )
    assert error_counts(response) == {0: 2, 3: 1}
    assert error_counts(EncodedResponse(error_counts={0: 5})) == {0: 5}
    assert error_counts(EncodedResponse()) is None


def test_kafka_names_of_requests_and_errors():
    assert request_name(0) == "Produce"
    assert request_name(2) == "ListOffsets"
    assert request_name(18) == "ApiVersions"
    assert error_name(0) == "NONE"
    assert error_name(3) == "UNKNOWN_TOPIC_OR_PARTITION"
    assert error_name(32767) == "32767"


def test_the_ready_line_names_the_metrics_url_only_when_serving_it():
    args = (("127.0.0.1", 9092), 1, "cid", ["/data"], {"PLAINTEXT": ("127.0.0.1", 9092)})
    plain = parse_ready_line(ready_line(*args))
    assert plain is not None and plain.metrics_url is None
    assert plain.listeners == {"PLAINTEXT": "127.0.0.1:9092"}
    with_metrics = parse_ready_line(ready_line(*args, "http://127.0.0.1:9644/metrics"))
    assert with_metrics is not None
    assert with_metrics.metrics_url == "http://127.0.0.1:9644/metrics"
    assert with_metrics.listeners == plain.listeners
    assert with_metrics.bootstrap_servers == "127.0.0.1:9092"
