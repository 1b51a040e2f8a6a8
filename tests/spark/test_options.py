"""Source and sink options are checked at query start with Spark's explanations."""

from __future__ import annotations

import pytest

from odradek.spark.options import (
    Assign,
    OffsetSpec,
    Subscribe,
    SubscribePattern,
    parse_duration_ms,
    parse_sink_options,
    parse_source_options,
)

BOOT = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def source(mode="batch", **options):
    return parse_source_options({**BOOT, **options}, mode)


def test_exactly_one_strategy():
    with pytest.raises(ValueError, match="One of the following options must be specified"):
        source()
    with pytest.raises(ValueError, match="Only one of the following options can be specified"):
        source(subscribe="a", subscribePattern="a.*")
    assert source(subscribe="a, b").strategy == Subscribe(("a", "b"))
    assert source(SUBSCRIBEPATTERN="ev-.*").strategy == SubscribePattern("ev-.*")
    assert source(assign='{"t":[1,0]}').strategy == Assign((("t", 0), ("t", 1)))


def test_pattern_matches_whole_names():
    pattern = source(subscribePattern="ev-[0-9]+").strategy
    assert pattern.matches("ev-12") and not pattern.matches("ev-12x")


def test_bootstrap_servers_required():
    with pytest.raises(ValueError, match="'kafka.bootstrap.servers' must be specified"):
        parse_source_options({"subscribe": "t"}, "batch")


@pytest.mark.parametrize(
    "name, fragment",
    [
        ("kafka.auto.offset.reset", "startingOffsets"),
        ("kafka.key.deserializer", "ByteArrayDeserializer"),
        ("kafka.value.deserializer", "ByteArrayDeserializer"),
        ("kafka.enable.auto.commit", "enable.auto.commit"),
        ("kafka.interceptor.classes", "interceptors"),
    ],
)
def test_consumer_options_spark_rejects(name, fragment):
    with pytest.raises(ValueError, match=fragment):
        source(subscribe="t", **{name: "x"})


def test_kafka_options_reach_the_client_without_prefix():
    opts = source(subscribe="t", **{"kafka.isolation.level": "read_uncommitted"})
    assert opts.consumer_config_dict() == {
        "bootstrap.servers": "127.0.0.1:9092",
        "isolation.level": "read_uncommitted",
    }


def test_unknown_option_fails_clearly():
    with pytest.raises(ValueError, match="Unknown option.*startingoffset\\b"):
        source(subscribe="t", startingOffset="earliest")


def test_offsets_defaults_by_mode():
    assert source(subscribe="t").starting == OffsetSpec("earliest")
    assert source("stream", subscribe="t").starting == OffsetSpec("latest")
    assert source(subscribe="t").ending == OffsetSpec("latest")


def test_batch_rejects_latest_start_and_earliest_end():
    with pytest.raises(ValueError, match="starting offset can't be latest"):
        source(subscribe="t", startingOffsets="latest")
    with pytest.raises(ValueError, match="ending offset can't be earliest"):
        source(subscribe="t", endingOffsets="earliest")
    with pytest.raises(ValueError, match="t-1 can't be latest"):
        source(subscribe="t", startingOffsets='{"t":{"0":-2,"1":-1}}')
    with pytest.raises(ValueError, match="t-0 can't be earliest"):
        source(subscribe="t", endingOffsets='{"t":{"0":-2}}')


def test_streaming_rejects_ending_offsets():
    with pytest.raises(ValueError, match="Ending offset not valid in streaming queries"):
        source("stream", subscribe="t", endingOffsets="latest")


def test_timestamp_precedence_over_offsets():
    opts = source(
        subscribe="t",
        startingOffsets="earliest",
        startingOffsetsByTimestamp='{"t":{"0":5}}',
        startingTimestamp="1000",
    )
    assert opts.starting == OffsetSpec("timestamp", timestamp=1000)
    opts = source(
        subscribe="t", startingOffsets="earliest", startingOffsetsByTimestamp='{"t":{"0":5}}'
    )
    assert opts.starting == OffsetSpec("timestamps", per_partition=(("t", 0, 5),))


def test_json_offsets_parse():
    opts = source(subscribe="t", startingOffsets='{"t":{"1":7,"0":-2}}')
    assert opts.starting == OffsetSpec("offsets", per_partition=(("t", 0, -2), ("t", 1, 7)))
    with pytest.raises(ValueError, match="Invalid JSON for option 'startingOffsets'"):
        source(subscribe="t", startingOffsets="{nope")


def test_rate_limits():
    opts = source("stream", subscribe="t", maxOffsetsPerTrigger="100", minOffsetsPerTrigger="10")
    assert (opts.max_offsets_per_trigger, opts.min_offsets_per_trigger) == (100, 10)
    with pytest.raises(ValueError, match="higher than the maxOffsetsPerTrigger"):
        source("stream", subscribe="t", maxOffsetsPerTrigger="5", minOffsetsPerTrigger="10")
    with pytest.raises(ValueError, match="must be a positive integer"):
        source("stream", subscribe="t", maxOffsetsPerTrigger="0")
    with pytest.raises(ValueError, match="only applies to streaming"):
        source(subscribe="t", maxOffsetsPerTrigger="5")


def test_booleans_and_strategy():
    opts = source(subscribe="t", failOnDataLoss="FALSE", includeHeaders="true")
    assert not opts.fail_on_data_loss and opts.include_headers
    with pytest.raises(ValueError, match="must be true or false"):
        source(subscribe="t", failOnDataLoss="maybe")
    with pytest.raises(ValueError, match="startingOffsetsByTimestampStrategy"):
        source(subscribe="t", startingOffsetsByTimestampStrategy="closest")


def test_durations():
    assert parse_duration_ms("15m") == 900_000
    assert parse_duration_ms("250ms") == 250
    assert parse_duration_ms("2s") == 2000


def test_sink_options():
    opts = parse_sink_options({**BOOT, "topic": "out", "kafka.acks": "all"})
    assert opts.topic == "out"
    assert opts.producer_config_dict() == {"bootstrap.servers": "127.0.0.1:9092", "acks": "all"}
    with pytest.raises(ValueError, match="'value.serializer' is not supported"):
        parse_sink_options({**BOOT, "kafka.value.serializer": "x"})
    with pytest.raises(ValueError, match="configuring Kafka producer"):
        parse_sink_options({"topic": "x"})


def test_only_options_the_fetch_reader_honours_keep_it():
    from odradek.spark.fetcher import can_fetch

    assert can_fetch(source(subscribe="t", **{"kafka.isolation.level": "read_uncommitted"}))
    assert can_fetch(source(subscribe="t", **{"kafka.security.protocol": "PLAINTEXT"}))
    assert not can_fetch(source(subscribe="t", **{"kafka.security.protocol": "SSL"}))
    assert not can_fetch(source(subscribe="t", **{"kafka.sasl.mechanism": "PLAIN"}))


def test_exactly_once_option():
    from odradek.spark.sink import check_exactly_once

    opts = parse_sink_options({**BOOT, "topic": "out", "Transactional.Id.Prefix": " q1 "})
    assert opts.transactional_id_prefix == "q1"
    assert parse_sink_options({**BOOT, "topic": "out"}).transactional_id_prefix is None
    check_exactly_once(opts, streaming=True)
    with pytest.raises(ValueError, match="streaming queries only"):
        check_exactly_once(opts, streaming=False)
    librdkafka_only = parse_sink_options(
        {**BOOT, "transactional.id.prefix": "q1", "kafka.queue.buffering.max.messages": "9"}
    )
    with pytest.raises(ValueError, match="sink's own producer"):
        check_exactly_once(librdkafka_only, streaming=True)
    with pytest.raises(ValueError, match="must not be empty"):
        parse_sink_options({**BOOT, "transactional.id.prefix": " "})
    with pytest.raises(ValueError, match="transactional.id.prefix"):
        parse_sink_options({**BOOT, "kafka.transactional.id": "shared"})
