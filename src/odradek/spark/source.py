"""The "odradek" data source: batch and streaming readers, and the sink's entry points.

Spark discovers it through the top-level module pyspark_odradek, so
spark.read.format("odradek") works with no register call.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from odradek.spark import FORMAT_NAME
from odradek.spark.client import (
    DataLossError,
    OffsetReader,
    consumer_config,
    data_loss_message,
    read_range,
)
from odradek.spark.offsets import (
    OffsetRange,
    PartitionOffsets,
    cap,
    from_json_dict,
    plan_ranges,
    rate_limit,
    records_between,
    to_json_dict,
)
from odradek.spark.options import SourceOptions, parse_sink_options, parse_source_options
from odradek.spark.schema import source_ddl


class RangePartition(InputPartition):
    """One Spark task: one offset range of one topic partition."""

    def __init__(self, offset_range: OffsetRange) -> None:
        super().__init__(offset_range)
        self.offset_range = offset_range


def _read(
    partition: InputPartition, options: SourceOptions, config: dict
) -> Iterator[pa.RecordBatch]:
    # With nothing to read Spark still runs one task, on a plain InputPartition of its own.
    if isinstance(partition, RangePartition):
        yield from read_range(partition.offset_range, options, config)


class OdradekDataSource(DataSource):
    """Topics as DataFrames, with the options and schema of Spark's Kafka source and sink."""

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def schema(self) -> str:
        include = (
            str(_lowered(self.options).get("includeheaders", "false")).strip().lower() == "true"
        )
        return source_ddl(include)

    def reader(self, schema: StructType) -> DataSourceReader:
        return OdradekBatchReader(parse_source_options(self.options, "batch"))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return OdradekStreamReader(parse_source_options(self.options, "stream"))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from odradek.spark.sink import OdradekBatchWriter

        return OdradekBatchWriter(parse_sink_options(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from odradek.spark.sink import OdradekStreamWriter

        return OdradekStreamWriter(parse_sink_options(self.options), schema)


def _lowered(options: Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in options.items()}


def checked_start(
    start: PartitionOffsets, end: PartitionOffsets, offsets: OffsetReader, options: SourceOptions
) -> PartitionOffsets:
    """Start offsets for planning, after the data-loss checks of Spark's Kafka source.

    Partitions new since `start` begin at their earliest offset; partitions
    that vanished, offsets that went backwards and records deleted by retention
    before they were read fail the query, or are skipped when failOnDataLoss
    is false.
    """
    problems = []
    vanished = sorted(set(start) - set(end))
    if vanished:
        problems.append(f"Partitions {vanished} have been deleted.")
    marks = offsets.watermarks(end)
    result = {}
    for tp, until in end.items():
        low = marks[tp][0]
        begin = start.get(tp, low)
        if until < begin:
            problems.append(
                f"Beginning offset {begin} is after the ending offset {until} for {tp[0]}-{tp[1]}: "
                "the offsets given are inconsistent, or the partition's offsets were reset."
            )
            begin = until
        elif begin < low:
            problems.append(
                f"Cannot fetch offset {begin} of {tp[0]}-{tp[1]}; the earliest available offset is {low}."
            )
            begin = min(low, until)
        result[tp] = begin
    if problems and options.fail_on_data_loss:
        raise DataLossError(data_loss_message(" ".join(problems)))
    return result


class OdradekBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.config = consumer_config(options)

    def partitions(self) -> list[RangePartition]:
        offsets = OffsetReader(self.options)
        try:
            tps = offsets.partitions()
            start = offsets.resolve(self.options.starting, tps, starting=True)
            end = offsets.resolve(self.options.ending, tps, starting=False)
            start = checked_start(start, end, offsets, self.options)
        finally:
            offsets.close()
        return [RangePartition(r) for r in plan_ranges(start, end, self.options.min_partitions)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from _read(partition, self.options, self.config)


class OdradekStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches between offsets kept in the checkpoint as JSON.

    Admission control: maxOffsetsPerTrigger becomes Spark's ReadMaxRows,
    minOffsetsPerTrigger (with maxTriggerDelay) ReadMinRows; whatever limit
    Spark passes to latestOffset is obeyed, so Trigger.AvailableNow keeps the
    rate limit while stopping at the offsets that were latest when it began.
    """

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.config = consumer_config(options)
        self.offsets = OffsetReader(options)
        self._available_now_target: PartitionOffsets | None = None
        self._latest: PartitionOffsets = {}
        # As Spark's lastTriggerMillis = 0: the first trigger is never delayed by minOffsetsPerTrigger.
        self._last_trigger: float | None = None

    def initialOffset(self) -> dict:
        tps = self.offsets.partitions()
        return to_json_dict(self.offsets.resolve(self.options.starting, tps, starting=True))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger is not None:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now_target = self.offsets.latest(self.offsets.partitions())

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = from_json_dict(start)
        marks = self.offsets.watermarks(self.offsets.partitions())
        self._latest = {tp: high for tp, (_, high) in marks.items()}
        latest = dict(self._latest)
        if self._available_now_target is not None:
            target = self._available_now_target
            latest = {tp: o for tp, o in cap(latest, target).items() if tp in target or tp in begin}
        # New partitions start at their earliest offset; deleted records are not counted.
        effective = {tp: max(begin.get(tp, low), low) for tp, (low, _) in marks.items()}
        end: PartitionOffsets | None
        if isinstance(limit, ReadAllAvailable):
            end = latest
        else:
            end = self._admitted(effective, latest, limit)
            if end is None:
                return start
        # Partitions that vanished stay out of `end`; planning reports them as data loss.
        return to_json_dict(end)

    def _admitted(
        self, start: PartitionOffsets, latest: PartitionOffsets, limit: ReadLimit
    ) -> PartitionOffsets | None:
        """End offsets under the read limit, or None to skip this trigger (too few records yet).

        Trigger.AvailableNow ignores the minimum: it must drain its target and stop,
        not wait for records that may never come.
        """
        minimum = (
            limit.min_rows
            if isinstance(limit, ReadMinRows)
            else self.options.min_offsets_per_trigger
        )
        if (
            minimum is not None
            and self._available_now_target is None
            and self._delay_batch(minimum, start, latest)
        ):
            return None
        if isinstance(limit, ReadMaxRows):
            return rate_limit(start, latest, limit.max_rows)
        return latest

    def _delay_batch(self, minimum: int, start: PartitionOffsets, latest: PartitionOffsets) -> bool:
        """Spark's delayBatch: wait for `minimum` records unless maxTriggerDelay has passed since the last batch."""
        now = time.monotonic()
        if (
            self._last_trigger is None
            or (now - self._last_trigger) * 1000 >= self.options.max_trigger_delay_ms
        ):
            self._last_trigger = now
            return False
        if records_between(start, latest) < minimum:
            return True
        self._last_trigger = now
        return False

    def reportLatestOffset(self) -> dict | None:
        return to_json_dict(self._latest) if self._latest else None

    def partitions(self, start: dict, end: dict) -> list[RangePartition]:
        begin_map, end_map = from_json_dict(start), from_json_dict(end)
        begin = checked_start(begin_map, end_map, self.offsets, self.options)
        return [RangePartition(r) for r in plan_ranges(begin, end_map, self.options.min_partitions)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from _read(partition, self.options, self.config)

    def commit(self, end: dict) -> None:
        """Nothing to do: the checkpoint, not a consumer group, holds the query's offsets."""

    def stop(self) -> None:
        self.offsets.close()
