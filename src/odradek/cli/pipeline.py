"""`odradek pipeline parquet|aggregate`: run a Spark pipeline on topics, printing progress.

Needs the `spark` extra (pyspark, pyarrow) and Java 17. ``--command-config`` takes the
client.properties of the other tools; its settings reach the source and sink as the kafka.*
options Spark's Kafka connector takes, in librdkafka's names (the data source is a
librdkafka client, whose own Fetch and Produce fast paths are used on PLAINTEXT only).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from odradek.cli.client_options import read_properties
from odradek.cli.client_security import librdkafka_config


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("pipeline", help="run a Spark pipeline (needs the spark extra)")
    kinds = parser.add_subparsers(dest="pipeline", required=True, metavar="PIPELINE")

    parquet = kinds.add_parser(
        "parquet", help="materialise topics into a Parquet table partitioned by date"
    )
    _common(parquet)
    chosen = parquet.add_mutually_exclusive_group(required=True)
    chosen.add_argument("--topic", action="append", help="topic to read (repeatable)")
    chosen.add_argument(
        "--pattern", help="regex of topics to read; new matching topics are picked up"
    )
    parquet.add_argument("--output", required=True, help="Parquet table directory")
    parquet.add_argument(
        "--schema", help='DDL schema of JSON values, e.g. "user string, amount double"'
    )
    parquet.set_defaults(func=_run_parquet)

    aggregate = kinds.add_parser(
        "aggregate", help="windowed counts per key from one topic into another"
    )
    _common(aggregate)
    aggregate.add_argument("--source-topic", required=True, help="topic of keyed records to count")
    aggregate.add_argument("--sink-topic", required=True, help="topic the counts are written to")
    aggregate.add_argument(
        "--window", default="1 minute", help='window length (default "1 minute")'
    )
    aggregate.add_argument(
        "--watermark", default="1 minute", help='allowed lateness (default "1 minute")'
    )
    aggregate.set_defaults(func=_run_aggregate)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap-servers", required=True, help="host:port of the brokers, comma-separated"
    )
    parser.add_argument(
        "--command-config",
        type=Path,
        help="file of client properties (Kafka's Java client settings, as the other tools "
        "take them), given to the source and sink as kafka.* options",
    )
    parser.add_argument(
        "--checkpoint", required=True, help="checkpoint directory (offsets and state)"
    )
    parser.add_argument("--starting-offsets", default="earliest", help="earliest, latest or JSON")
    parser.add_argument("--max-offsets-per-trigger", type=int, help="rate limit per micro-batch")
    parser.add_argument(
        "--trigger", default="5 seconds", help='processing-time trigger (default "5 seconds")'
    )
    parser.add_argument("--available-now", action="store_true", help="drain the backlog, then stop")
    parser.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    parser.add_argument(
        "--progress-interval", type=float, default=5.0, help="seconds between progress lines"
    )
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra source option, e.g. kafka.isolation.level=read_uncommitted",
    )


def _client_options(args: argparse.Namespace) -> dict[str, str]:
    """--command-config's properties, translated for librdkafka, as kafka.* options."""
    if args.command_config is None:
        return {}
    config = librdkafka_config(read_properties(args.command_config))
    config.pop("bootstrap.servers", None)  # --bootstrap-servers names them
    return {f"kafka.{name}": value for name, value in config.items()}


def _source_options(args: argparse.Namespace) -> dict[str, str]:
    options = {**_client_options(args), "startingOffsets": args.starting_offsets}
    if args.max_offsets_per_trigger:
        options["maxOffsetsPerTrigger"] = str(args.max_offsets_per_trigger)
    for item in args.option:
        key, _, value = item.partition("=")
        options[key] = value
    return options


def _session(args: argparse.Namespace):
    from odradek.spark import use_this_python

    use_this_python()
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master(args.master)
        .appName(f"odradek-pipeline-{args.pipeline}")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )


def _trigger(args: argparse.Namespace):
    from odradek.spark.pipelines import Trigger

    return (
        Trigger(available_now=True) if args.available_now else Trigger(processing_time=args.trigger)
    )


def _watch(query, interval: float) -> int:
    """Print a progress line per new micro-batch until the query ends (Ctrl-C stops it)."""
    from odradek.spark.pipelines import progress_summary

    last = None
    try:
        while True:
            finished = query.awaitTermination(interval)
            line = progress_summary(query)
            if line and line != last:
                print(line, flush=True)
                last = line
            if finished:
                break
    except KeyboardInterrupt:
        query.stop()
    error = query.exception()
    if error is not None:
        print(f"pipeline failed: {error}", file=sys.stderr)
        return 1
    return 0


def _run_parquet(args: argparse.Namespace) -> int:
    from odradek.spark.pipelines import materialise_to_parquet

    options = _source_options(args)
    if args.topic:
        options["subscribe"] = ",".join(args.topic)
    else:
        options["subscribePattern"] = args.pattern
    spark = _session(args)
    query = materialise_to_parquet(
        spark,
        bootstrap_servers=args.bootstrap_servers,
        source_options=options,
        output=args.output,
        checkpoint=args.checkpoint,
        value_schema=args.schema,
        trigger=_trigger(args),
    )
    return _watch(query, args.progress_interval)


def _run_aggregate(args: argparse.Namespace) -> int:
    from odradek.spark.pipelines import windowed_counts

    spark = _session(args)
    query = windowed_counts(
        spark,
        bootstrap_servers=args.bootstrap_servers,
        source_topic=args.source_topic,
        sink_topic=args.sink_topic,
        checkpoint=args.checkpoint,
        window=args.window,
        watermark=args.watermark,
        source_options=_source_options(args),
        client_options=_client_options(args),
        trigger=_trigger(args),
    )
    return _watch(query, args.progress_interval)
