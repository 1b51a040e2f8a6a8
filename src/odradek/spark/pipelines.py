"""Ready-made streaming pipelines on the "odradek" source and sink.

materialise_to_parquet: topics -> a Parquet table partitioned by date,
exactly-once through Spark's file sink and checkpoint (the source's offsets
and the file sink's log are committed together by Spark).

windowed_counts: one topic -> windowed counts per key, with a watermark,
written to another topic through the at-least-once sink (per micro-batch,
in update mode: each trigger sends the windows whose counts changed).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

from odradek.spark import FORMAT_NAME


@dataclass(frozen=True)
class Trigger:
    """processing_time like "10 seconds", or available_now to drain the backlog and stop."""

    processing_time: str | None = None
    available_now: bool = False

    def apply(self, writer: DataStreamWriter) -> DataStreamWriter:
        if self.available_now:
            return writer.trigger(availableNow=True)
        if self.processing_time:
            return writer.trigger(processingTime=self.processing_time)
        return writer


def read_topics(
    spark: SparkSession, bootstrap_servers: str, source_options: Mapping[str, str]
) -> DataFrame:
    reader = spark.readStream.format(FORMAT_NAME).option(
        "kafka.bootstrap.servers", bootstrap_servers
    )
    return reader.options(**source_options).load()


def materialise_to_parquet(
    spark: SparkSession,
    *,
    bootstrap_servers: str,
    source_options: Mapping[str, str],
    output: str,
    checkpoint: str,
    value_schema: str | None = None,
    trigger: Trigger = Trigger(),
) -> StreamingQuery:
    """Stream records into output/date=YYYY-MM-DD/*.parquet.

    With value_schema (a DDL string), JSON values become columns; otherwise
    key and value stay binary. topic, partition, offset and timestamp are kept
    so every row can be traced to its record.
    """
    records = read_topics(spark, bootstrap_servers, source_options)
    meta = [F.col("topic"), F.col("partition"), F.col("offset"), F.col("timestamp")]
    if value_schema:
        parsed = F.from_json(F.col("value").cast("string"), value_schema).alias("data")
        table = records.select(parsed, *meta).select(
            "data.*", "topic", "partition", "offset", "timestamp"
        )
    else:
        table = records.select(F.col("key"), F.col("value"), *meta)
    table = table.withColumn("date", F.to_date(F.col("timestamp")))
    writer = (
        table.writeStream.format("parquet")
        .option("path", output)
        .option("checkpointLocation", checkpoint)
        .partitionBy("date")
        .outputMode("append")
    )
    return trigger.apply(writer).start()


def windowed_counts(
    spark: SparkSession,
    *,
    bootstrap_servers: str,
    source_topic: str,
    sink_topic: str,
    checkpoint: str,
    window: str = "1 minute",
    watermark: str = "1 minute",
    source_options: Mapping[str, str] | None = None,
    client_options: Mapping[str, str] | None = None,
    trigger: Trigger = Trigger(),
) -> StreamingQuery:
    """Counts per key per event-time window, emitted as JSON to sink_topic, keyed by the record key.

    Output mode is update: each trigger sends the windows whose counts changed;
    windows older than the watermark are dropped from state. ``client_options`` are
    kafka.* options of both the source and the sink (security settings, client.id).
    """
    records = read_topics(
        spark,
        bootstrap_servers,
        {"subscribe": source_topic, **(client_options or {}), **(source_options or {})},
    )
    counts = (
        records.withWatermark("timestamp", watermark)
        .groupBy(F.window("timestamp", window), F.col("key"))
        .count()
    )
    out = counts.select(
        F.col("key"),
        F.to_json(
            F.struct(
                F.col("window.start").alias("window_start"),
                F.col("window.end").alias("window_end"),
                F.col("key").cast("string").alias("key"),
                F.col("count"),
            )
        ).alias("value"),
    )

    def send(batch: DataFrame, batch_id: int) -> None:
        (
            batch.write.format(FORMAT_NAME)
            .option("kafka.bootstrap.servers", bootstrap_servers)
            .options(**(client_options or {}))
            .option("topic", sink_topic)
            .mode("append")
            .save()
        )

    # Python streaming sinks accept append mode only; update mode goes through
    # foreachBatch and the batch sink, with the same at-least-once guarantee.
    writer = (
        out.writeStream.foreachBatch(send)
        .option("checkpointLocation", checkpoint)
        .outputMode("update")
    )
    return trigger.apply(writer).start()


def progress_summary(query: StreamingQuery) -> str | None:
    """One line from the last micro-batch: batch id, rows, records/s and offsets behind the latest."""
    progress = query.lastProgress
    if progress is None:
        return None
    data = progress if isinstance(progress, dict) else json.loads(progress.json)
    behind = 0
    for source in data.get("sources", []):
        end, latest = _offsets(source.get("endOffset")), _offsets(source.get("latestOffset"))
        for topic, parts in latest.items():
            for partition, offset in parts.items():
                behind += max(0, int(offset) - int(end.get(topic, {}).get(partition, offset)))
    rate = data.get("processedRowsPerSecond") or 0.0
    return (
        f"batch {data.get('batchId')}: {data.get('numInputRows', 0)} rows, "
        f"{rate:.0f} records/s, {behind} offsets behind latest"
    )


def _offsets(value: object) -> dict:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return {}
    return value if isinstance(value, dict) else {}
