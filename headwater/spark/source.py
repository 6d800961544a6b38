"""The ``headwater`` data source: Kafka topics for ``spark.read`` and ``spark.readStream``.

Spark runs the pieces in different processes: the DataSource and the readers' planning methods
(offsets, partitions) in Python processes on the driver, ``read`` in Python workers next to the
executors. The stream reader's planning process lives as long as the query, so it keeps one Kafka
client for its metadata and offset lookups; everything else is rebuilt per call.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from .client import EARLIEST, LATEST, KafkaClient
from .options import OptionError, SourceOptions, parse_options
from .planning import OffsetRange, Offsets, from_json, plan_ranges, rate_limit, resolve, subscribed, to_json
from .read import DataLoss, read_range

__all__ = ["HeadwaterDataSource", "kafka_schema"]


def kafka_schema(include_headers: bool = False) -> StructType:
    """The columns of Spark's own Kafka source."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", ArrayType(StructType([StructField("key", StringType()),
                                                                   StructField("value", BinaryType())]))))
    return StructType(fields)


def _client(opts: SourceOptions) -> KafkaClient:
    return KafkaClient(opts.bootstrap, opts.client_id, opts.timeout_s, opts.retries, opts.retry_backoff_s,
                       dict(opts.security))


class HeadwaterDataSource(DataSource):
    """``format("headwater")``: Kafka topics with the columns and options of Spark's Kafka source."""

    def __init__(self, options: Mapping[str, str]) -> None:
        super().__init__(options)  # type: ignore[arg-type]
        # Checked here so that a bad option fails at load(), before any query starts.
        self.settings = parse_options(options)

    @classmethod
    def name(cls) -> str:
        return "headwater"

    def schema(self) -> StructType:
        return kafka_schema(self.settings.include_headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        opts = self.settings
        if opts.starting == "latest" or _has(opts.starting, LATEST):
            raise OptionError("option 'startingOffsets' cannot be latest (-1) for batch queries")
        if opts.ending == "earliest" or _has(opts.ending, EARLIEST):
            raise OptionError("option 'endingOffsets' cannot be earliest (-2) for batch queries")
        return HeadwaterBatchReader(opts)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        if self.settings.ending is not None:
            raise OptionError("option 'endingOffsets' is for batch queries only (spark.read), not for streaming")
        return HeadwaterStreamReader(self.settings)


def _has(spec: Any, code: int) -> bool:
    return isinstance(spec, dict) and any(o == code for parts in spec.values() for o in parts.values())


class HeadwaterBatchReader(DataSourceReader):
    """``spark.read``: from startingOffsets (default earliest) to endingOffsets (default latest), fixed at planning."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts

    def partitions(self) -> list[InputPartition]:
        opts = self.opts
        with _client(opts) as client:
            tps = subscribed(client, opts)
            start = resolve(client, opts, tps, opts.starting or "earliest", "startingOffsets")
            end = resolve(client, opts, tps, opts.ending or "latest", "endingOffsets")
        for tp in tps:
            if start[tp] > end[tp] and opts.fail_on_data_loss:
                raise DataLoss(f"topic-partition {tp[0]}-{tp[1]}: startingOffsets {start[tp]} is after "
                               f"endingOffsets {end[tp]}. Set option 'failOnDataLoss' to false to skip it.")
        return list(plan_ranges(start, end, opts.min_partitions))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, OffsetRange):  # Spark's placeholder when there is nothing to read
            return iter(())
        return read_range(self.opts, partition)


class HeadwaterStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream``: micro-batches of offset ranges, rate-limited by maxOffsetsPerTrigger."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._kafka: KafkaClient | None = None
        self._target: Offsets | None = None  # Trigger.AvailableNow: the ends fixed when the query started
        self._latest: Offsets | None = None  # the last ends seen, for Spark's progress reports

    def __getstate__(self) -> dict[str, Any]:
        # The reader travels to the workers with read(); its connections stay here.
        return {**self.__dict__, "_kafka": None}

    @property
    def client(self) -> KafkaClient:
        if self._kafka is None:
            self._kafka = _client(self.opts)
        return self._kafka

    def initialOffset(self) -> dict:
        tps = subscribed(self.client, self.opts)
        return to_json(resolve(self.client, self.opts, tps, self.opts.starting or "latest", "startingOffsets"))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        tps = subscribed(self.client, self.opts)
        self._target = self.client.list_offsets(tps, LATEST, self.opts.read_committed)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = from_json(start)
        tps = subscribed(self.client, self.opts)
        latest = self.client.list_offsets(tps, LATEST, self.opts.read_committed)
        self._latest = latest
        if self._target is not None:
            # Only what was there when the query started; partitions new since then wait for the next run.
            latest = {tp: min(o, self._target[tp]) for tp, o in latest.items() if tp in self._target}
        # Partitions (and topics) new since the last batch are read from their earliest offset.
        since = {**self._earliest([tp for tp in latest if tp not in begin]), **begin}
        for tp, o in latest.items():
            if o < since[tp]:
                if self.opts.fail_on_data_loss:
                    raise DataLoss(f"topic-partition {tp[0]}-{tp[1]} ends at offset {o}, before offset {since[tp]} "
                                   f"already read; was it truncated or recreated? Set option 'failOnDataLoss' to "
                                   f"false to continue from its end.")
                since[tp] = o
        end = rate_limit(since, latest, limit.max_rows if isinstance(limit, ReadMaxRows) else None)
        for tp, o in begin.items():
            end.setdefault(tp, o)  # a partition no longer seen (topic deleted) keeps its offset
        return to_json(end)

    def reportLatestOffset(self) -> dict | None:
        return to_json(self._latest) if self._latest is not None else None

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        begin, stop = from_json(start), from_json(end)
        begin.update(self._earliest([tp for tp in stop if tp not in begin]))
        return list(plan_ranges(begin, stop, self.opts.min_partitions))

    def _earliest(self, tps: list) -> Offsets:
        return self.client.list_offsets(tps, EARLIEST) if tps else {}

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, OffsetRange)
        return read_range(self.opts, partition)

    def commit(self, end: dict) -> None:
        pass  # offsets live in Spark's checkpoint; nothing is committed to Kafka

    def stop(self) -> None:
        if self._kafka is not None:
            self._kafka.close()
            self._kafka = None
