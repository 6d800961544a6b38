"""SparkParquetSink: topics into a Parquet lake through Spark DataFrames, exactly once.

Records are buffered per topic-partition and committed together (a "flush") when ``flush.size``
records are buffered, their times span ``rotate.interval.ms``, or the wall clock passes a
``rotate.schedule.interval.ms`` boundary. A flush builds Arrow tables, writes them as Parquet (with
pyarrow when the lake is a local folder and Spark runs locally, ``buckets.py``; else Spark's
``createDataFrame`` from Arrow and its writer) and commits through the lake's commit log (``lake.py``); the
offsets Kafka Connect commits to the group are only ever those the lake has, and a task seeks each
partition it is given to what the lake says.

``cdc.mode``:

- ``append``: each value as a row (a struct's fields are the columns); files
  ``<topic>+<partition>+<first offset>+<last offset>.<codec>.parquet`` under the partitioner's folders.
- ``changelog``: Debezium envelopes flattened: the row (``after``, or ``before`` for a delete) and
  ``_op``, ``_lsn``, ``_ts_ms``, ``_deleted``.
- ``upsert``: a current-state table keyed by the record key. A flush keeps the latest change per
  key (by source position, then Kafka offset), reads the buckets those keys live in, drops the
  changed keys, adds the new rows and stages the buckets' new contents; the commit swaps the
  staged buckets in. Bucket ``_bucket = kafka partition * cdc.buckets + blake2b(key) % cdc.buckets``:
  a partition's keys never share a bucket with another partition's, so tasks never rewrite each
  other's buckets, and a key stays in one bucket as long as its topic keeps its partition count.
"""

from __future__ import annotations

import bisect
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.compute as pc

from headwater.connect.api import (
    ConnectException,
    EncodedSinkBatch,
    SinkBatch,
    SinkConnector,
    SinkConnectorConfig,
    SinkRecord,
    SinkTask,
    TopicPartition,
)
from headwater.connect.api.data import Schema, SchemaType, Struct
from headwater.connect.api.sandbox import local_path
from headwater.connectors.envelope import Unavailable
from headwater.connectors.envelope import get as _get
from headwater.connectors.envelope import is_envelope as _is_envelope

from .buckets import local_folder, rewrite_bucket, storable_schema, write_file
from .changes import ChangeDecoder, bucket_of, latest
from .config import SparkSinkConfig
from .encoded import JsonPayloads
from .lake import CommitEntry, Lake, LocalLake
from .partitioner import Partitioner, floor_in_zone, timestamp_extractor
from .rows import TableShape, TypeConflict, infer_type, plain, row_fields, spark_frame
from .session import SparkUnavailable, shared_session

__all__ = ["SparkParquetSink", "SparkParquetSinkTask"]

log = logging.getLogger(__name__)

BUCKET = "_bucket"
FILE = "_hw_file"  # while staging: which file a row goes to
KEY_COLUMN = "_key"  # the record key, for tables whose key is not a struct
_WAKE_S = 0.05  # how often the task looks for a buffer whose scheduled rotation is due
CHANGELOG_COLUMNS = {"_op": pa.string(), "_lsn": pa.int64(), "_ts_ms": pa.int64(), "_deleted": pa.bool_()}


class SparkParquetSink(SinkConnector):
    config_class: ClassVar[type[SinkConnectorConfig]] = SparkSinkConfig
    aliases: ClassVar[tuple[str, ...]] = ("SparkParquetSinkConnector",
                                          "headwater.connectors.spark.SparkParquetSinkConnector")

    def start(self, config: SparkSinkConfig) -> None:
        self.config = config

    def task_class(self) -> type[SinkTask]:
        return SparkParquetSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [self.config.originals() for _ in range(max_tasks)]


# -- one record ------------------------------------------------------------------------------------------


def _row(value: Any) -> tuple[dict[str, Any], Schema | None]:
    """A value as a row: a struct's or map's fields, or a single ``value`` column."""
    if isinstance(value, Struct):
        return value.values, value.schema
    if isinstance(value, dict):
        return value, None
    return {"value": value}, None


@dataclass(slots=True)
class _Change:
    """An upsert-mode change: the row to write, or None to delete the key."""

    key: str  # canonical JSON: the identity of the key
    ident: Any  # the key as plain values (its columns' values)
    bucket: int
    position: int
    offset: int
    row: dict[str, Any] | None
    missing: tuple[str, ...] = ()  # columns whose value the source did not have (unchanged TOAST): kept


@dataclass
class _Buffer:
    """A topic-partition's records since its last commit."""

    topic: str
    partition: int
    rows: list[dict[str, Any]] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    folders: list[str] = field(default_factory=list)  # append/changelog: the partitioner's folder per row
    changes: list[_Change] = field(default_factory=list)  # upsert
    tables: list[pa.Table] = field(default_factory=list)  # append, read by the encoded path (no rows then)
    first_time: int | None = None  # rotate.interval.ms: the first record's time
    deadline: float | None = None  # rotate.schedule.interval.ms: wall-clock time of the next rotation

    def __len__(self) -> int:
        return len(self.offsets)


class _Table:
    """What the task knows of one table folder: its columns and, in upsert mode, its key columns."""

    def __init__(self, path: str, shape: TableShape) -> None:
        self.path = path
        self.shape = shape
        self.key_columns: list[str] | None = None
        self.key_types: dict[str, pa.DataType] | None = None  # upsert's encoded path: the keys as parsed
        self.checked: dict[int, Schema] = {}  # Connect schemas already merged into the shape (kept alive)


class SparkParquetSinkTask(SinkTask):
    def start(self, config: dict[str, str]) -> None:
        self.config = c = SparkSinkConfig.model_validate(config)
        self.name = config.get("name", "")
        self.mode = c.cdc_mode
        self.partitioner = Partitioner(c)
        self.when = timestamp_extractor(c)
        self.buffers: dict[TopicPartition, _Buffer] = {}
        self.full: dict[TopicPartition, list[_Buffer]] = {}  # buffers that reached a rotation, oldest first
        self.inflight: dict[TopicPartition, Future[None]] = {}  # each partition's flush being written
        self.committed: dict[TopicPartition, int] = {}
        self.tables: dict[str, _Table] = {}  # by table name
        self.topic_tables: dict[str, _Table] = {}  # by topic
        self.figures = {"flushes": 0, "files": 0, "rows.written": 0, "records.skipped": 0, "last.flush.ms": 0.0,
                        "rows.unavailable.values": 0, "records.encoded": 0}
        self.reporter = self.context.errant_record_reporter() if getattr(self, "context", None) else None
        self.unavailable = Unavailable(c.unavailable_value_placeholder)
        # A local lake written by a local Spark (lake.writer=auto): the task writes the Parquet files itself
        # (pyarrow; a job's fixed cost is most of Spark's time for a flush) and commits with the operating
        # system's calls, so Spark starts only when a flush needs it (a restarted task reaches its partitions
        # without waiting for a JVM). A cluster's executors do the work otherwise, and its session starts here.
        local = local_path(c.lake_path)
        self.direct = c.lake_writer == "auto" and bool(local) and c.spark_master.startswith("local")
        self._spark: Any = None
        self._spark_lock = threading.Lock()
        if not self.direct:
            _ = self.spark  # a Spark master that does not answer fails the task now, naming it
        try:
            self.lake = LocalLake(local) if local and self.direct else Lake(self.spark, c.lake_path)
            self.lake.mkdirs(self.lake.path("_headwater", "log"))
            probe = self.lake.path("_headwater", f".probe-{uuid.uuid4().hex}")
            self.lake.write_bytes(probe, b"")
            self.lake.delete(probe)
        except Exception as exc:
            raise ConnectException(f"lake.path {c.lake_path!r} is not writable: {_java_message(exc)}") from exc
        self.pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix=f"spark-flush-{self.name}")
        self.stopping = threading.Event()
        if c.rotate_schedule_interval_ms > 0 and getattr(self, "context", None) is not None:
            threading.Thread(target=self._wake_when_due, name=f"spark-rotate-{self.name}", daemon=True).start()

    @property
    def spark(self) -> Any:
        """The worker's Spark session, started on first use."""
        with self._spark_lock:
            if self._spark is None:
                c = self.config
                try:
                    self._spark = shared_session(c.spark_master, c.spark_conf(), c.spark_app_name)
                except SparkUnavailable as exc:
                    raise ConnectException(f"spark.master {c.spark_master}: {exc}") from exc
            return self._spark

    # -- partitions --------------------------------------------------------------------------------------

    def open(self, partitions: list[TopicPartition]) -> None:
        """Finish or drop what an earlier owner left, then seek to what the lake committed."""
        seek = {}
        self._wait(partitions)
        for tp in partitions:
            self.buffers.pop(tp, None)
            self.full.pop(tp, None)
            entry = self.lake.recover(tp.topic, tp.partition)
            if entry is None:
                continue
            self.committed[tp] = entry.next
            seek[tp] = entry.next
            table = self._table(tp.topic)
            if entry.columns:
                # the lake's columns, as they were after this partition's last flush
                table.shape.absorb(dict(TableShape.from_json(entry.columns).columns))
        if seek:
            log.info("%s: seeking to the lake's commits: %s", self.name,
                     ", ".join(f"{tp.topic}-{tp.partition}@{o}" for tp, o in seek.items()))
            self.context.offset(seek)

    def close(self, partitions: list[TopicPartition]) -> None:
        # A flush in flight finishes before the partition goes (its next owner must not race it); what
        # was buffered is read again by the next owner, from the lake's offset.
        try:
            self._wait(partitions)
        finally:
            for tp in partitions:
                self.buffers.pop(tp, None)
                self.full.pop(tp, None)
                self.committed.pop(tp, None)

    def _table(self, topic: str) -> _Table:
        """The topic's table (topics whose ``table.name.format`` gives one name share it)."""
        table = self.topic_tables.get(topic)
        if table is None:
            name = self.config.table_name_format.replace("${topic}", topic)
            table = self.tables.get(name)
            if table is None:
                table = self.tables[name] = _Table(self.lake.path(self.config.topics_dir, name), TableShape())
            self.topic_tables[topic] = table
        return table

    # -- records in ----------------------------------------------------------------------------------------

    def put(self, records: list[SinkRecord]) -> None:
        for r in records:
            self._add(r.topic, r.kafka_partition or 0, r.kafka_offset, r.timestamp, r.key, r.value, r.value_schema,
                      _given(r))
        self._rotate()

    def put_batch(self, batch: SinkBatch) -> None:
        topic, partition, schema = batch.topic, batch.kafka_partition, batch.value_schema
        keys, values, offsets, stamps = batch.keys, batch.values, batch.offsets, batch.timestamps
        key_schema = batch.key_schema
        for i, value in enumerate(values):
            def record(i: int = i) -> SinkRecord:
                return SinkRecord(topic, values[i], keys[i], partition, key_schema, schema, stamps[i], [],
                                  offsets[i])

            self._add(topic, partition, offsets[i], stamps[i], keys[i], value, schema, record)
        self._rotate()

    def _add(self, topic: str, partition: int, offset: int, timestamp: int | None, key: Any, value: Any,
             schema: Schema | None, record: Callable[[], SinkRecord]) -> None:
        tp = TopicPartition(topic, partition)
        if offset < self.committed.get(tp, 0):
            return  # the lake has it already
        buffer = self._buffer(tp, tables=False)
        table = self._table(topic)
        try:
            if self.mode == "upsert":
                change = self._change(table, partition, offset, key, value)
                folder = ""
            else:
                row = self._append_row(table, value, schema)
                if row is None:
                    return  # a tombstone: nothing to append
                folder = self.partitioner.encoded(partition, value, timestamp)
            if self.config.rotate_interval_ms > 0:
                moment = self.when(value, timestamp)
        except (ConnectException, TypeConflict, KeyError, ValueError) as exc:
            failure = ConnectException(f"record {topic}-{partition}@{offset} cannot be written to "
                                       f"{table.path}: {exc}")
            if self.reporter is None:
                raise failure from exc
            self.reporter(record(), failure)  # raises unless errors.tolerance=all
            self.figures["records.skipped"] += 1
            return
        if self.config.rotate_interval_ms > 0:
            # Confluent's rule: a record whose time is rotate.interval.ms past the buffer's first one
            # starts the next file
            if buffer.first_time is not None and moment - buffer.first_time >= self.config.rotate_interval_ms:
                self.full.setdefault(tp, []).append(self.buffers.pop(tp))
                buffer = self._buffer(tp, tables=False)
            if buffer.first_time is None:
                buffer.first_time = moment
        buffer.offsets.append(offset)
        if self.mode == "upsert":
            if change is not None:
                buffer.changes.append(change)
        elif row is not None:
            buffer.rows.append(row)
            buffer.folders.append(folder)
        if len(buffer.offsets) >= self.config.flush_size:
            # exactly flush.size records per flush: the full buffer waits for the end of this put
            self.full.setdefault(tp, []).append(self.buffers.pop(tp))

    def _buffer(self, tp: TopicPartition, tables: bool) -> _Buffer:
        """The partition's open buffer; one holding the other kind of data (rows or Arrow tables) is
        set aside to be committed first, so a buffer holds one kind."""
        buffer = self.buffers.get(tp)
        if buffer is not None and len(buffer) and bool(buffer.tables) != tables:
            self.full.setdefault(tp, []).append(self.buffers.pop(tp))
            buffer = None
        if buffer is None:
            buffer = self.buffers[tp] = _Buffer(tp.topic, tp.partition)
            if self.config.rotate_schedule_interval_ms > 0:
                buffer.deadline = _next_boundary(self.config.rotate_schedule_interval_ms, self.partitioner)
        return buffer

    # -- the encoded path (append mode, JsonConverter with schemas) ------------------------------------------

    def decode_with(self, key_converter: Any, value_converter: Any) -> bool:
        from headwater.connect.converters.json import JsonConverter

        if not isinstance(value_converter, JsonConverter) or self.config.rotate_interval_ms > 0:
            return False
        if self.mode == "upsert":
            # Debezium envelopes keyed by JSON objects: parsed into Arrow, merged without a dict per change
            if not isinstance(key_converter, JsonConverter):
                return False
            self.changes = ChangeDecoder(key_converter, value_converter, self.unavailable.text)
            return True
        if self.mode != "append" or self.partitioner.kind != "default" or not value_converter.schemas_enable:
            return False
        self.payloads = JsonPayloads(value_converter)
        return True

    def put_encoded(self, batch: EncodedSinkBatch) -> bool:
        tp = TopicPartition(batch.topic, batch.kafka_partition)
        offsets, values = batch.offsets, batch.values
        floor = self.committed.get(tp, 0)
        if offsets[0] < floor:  # the lake has some of them already
            skip = bisect.bisect_left(offsets, floor)
            offsets, values = offsets[skip:], values[skip:]
            if not offsets:
                return True
        if self.mode == "upsert":
            return self._put_changes(tp, batch.keys[len(batch.offsets) - len(offsets):], values, offsets)
        decoded = self.payloads.decode(tp.topic, values)
        if decoded is None:
            return False
        arrow, schema = decoded
        table = self._table(tp.topic)
        try:
            self._fields(table, {}, schema)
        except TypeConflict:
            return False  # the record path names the records that conflict
        done = 0
        while done < len(offsets):
            buffer = self._buffer(tp, tables=True)
            take = min(self.config.flush_size - len(buffer), len(offsets) - done)
            buffer.tables.append(arrow.slice(done, take))
            buffer.offsets.extend(offsets[done:done + take])
            done += take
            if len(buffer) >= self.config.flush_size:
                self.full.setdefault(tp, []).append(self.buffers.pop(tp))
        self.figures["records.encoded"] += len(offsets)
        self._rotate()
        return True

    def _put_changes(self, tp: TopicPartition, keys: list[bytes | None], values: list[bytes | None],
                     offsets: list[int]) -> bool:
        """upsert's encoded path: the batch's changes as one Arrow table (False: the record path takes it)."""
        decoded = self.changes.decode(tp.topic, keys, values, offsets)
        if decoded is None:
            return False
        table = self._table(tp.topic)
        names = list(decoded.key_types)
        if table.key_columns is not None and table.key_columns != names:
            return False  # the record path names the record whose key differs
        if table.key_types is not None and table.key_types != decoded.key_types:
            return False
        try:
            if decoded.row_schema is not None:
                self._fields(table, {}, decoded.row_schema)
            else:
                table.shape.absorb(decoded.row_types)
        except TypeConflict:
            return False  # the record path names the records that conflict
        if decoded.table.num_rows and not all(k in table.shape.columns for k in names):
            return False  # rows lacking their key's fields: the record path names them
        table.key_columns, table.key_types = names, decoded.key_types
        buffer = self._buffer(tp, tables=True)
        buffer.tables.append(decoded.table)
        self.figures["records.encoded"] += len(offsets)
        buffer.offsets.extend(offsets)
        if len(buffer) >= self.config.flush_size:
            self.full.setdefault(tp, []).append(self.buffers.pop(tp))
        self._rotate()
        return True

    def _fields(self, table: _Table, row: dict[str, Any], schema: Schema | None,
                extra: dict[str, pa.DataType] | None = None) -> None:
        """Merge the row's columns into the table's; TypeConflict when one does not fit."""
        if schema is not None and schema.type == SchemaType.STRUCT:
            if id(schema) in table.checked and not extra:
                return
            fields: dict[str, Any] = dict(row_fields(schema))
            if extra:
                fields.update(extra)
            table.shape.absorb(fields)
            if not extra:
                table.checked[id(schema)] = schema
            return
        inferred = {name: infer_type(v) for name, v in row.items()}
        if extra:
            inferred.update(extra)
        table.shape.absorb(inferred)

    def _append_row(self, table: _Table, value: Any, schema: Schema | None) -> dict[str, Any] | None:
        if value is None:
            return None
        if self.mode == "append":
            row, row_schema = _row(value)
            self._fields(table, row, row_schema if isinstance(value, Struct) else None)
            return row
        if not _is_envelope(value):  # a plain row in a changelog: a create
            row, row_schema = _row(value)
            self._fields(table, row, row_schema if isinstance(value, Struct) else None, CHANGELOG_COLUMNS)
            return {**row, "_op": "c", "_lsn": None, "_ts_ms": None, "_deleted": False}
        op = _get(value, "op")
        image = _get(value, "before") if op == "d" else _get(value, "after")
        source = _get(value, "source")
        row, row_schema = _row(image) if image is not None else ({}, None)
        self._fields(table, row, row_schema if isinstance(image, Struct) else None, CHANGELOG_COLUMNS)
        return {**row, "_op": op, "_lsn": _get(source, "lsn") if source is not None else None,
                "_ts_ms": _get(value, "ts_ms"), "_deleted": op == "d"}

    def _change(self, table: _Table, partition: int, offset: int, key: Any, value: Any) -> _Change | None:
        if key is None:
            raise ConnectException("the record has no key: cdc.mode=upsert keys the table by the record key")
        key_row = key.values if isinstance(key, Struct) else key if isinstance(key, dict) else None
        columns = sorted(key_row) if key_row is not None else [KEY_COLUMN]
        if table.key_columns is None:
            table.key_columns = columns
        elif table.key_columns != columns:
            raise ConnectException(f"the record key has fields {columns}, the table is keyed by {table.key_columns}")
        ident = plain(key)
        canonical = json.dumps(ident, sort_keys=True, default=str, separators=(",", ":"))
        bucket = bucket_of(canonical, partition, self.config.cdc_buckets)
        position = -1
        if value is None:
            return _Change(canonical, ident, bucket, position, offset, None)
        before = None
        if _is_envelope(value):
            op = _get(value, "op")
            source = _get(value, "source")
            lsn = _get(source, "lsn") if source is not None else None
            position = lsn if isinstance(lsn, int) else -1
            if op == "d":
                return _Change(canonical, ident, bucket, position, offset, None)
            if op not in ("c", "r", "u"):
                return None  # truncate and message events carry no row
            before = _get(value, "before")
            value = _get(value, "after")
            if value is None:
                return None
        row, row_schema = _row(value)
        missing = self.unavailable.columns(row)
        if missing:
            # unchanged TOAST values: from the before image when it has them (REPLICA IDENTITY FULL),
            # else kept from the row the flush merges this one into
            row, missing = self.unavailable.fill(row, missing, before)
        if key_row is None:
            row = {**row, KEY_COLUMN: plain(key)}
            self._fields(table, row, None)
        else:
            lacking = [c for c in columns if c not in row]
            if lacking:
                raise ConnectException(f"the row lacks the key fields {lacking}")
            self._fields(table, row, row_schema if isinstance(value, Struct) else None)
        return _Change(canonical, ident, bucket, position, offset, row, missing)

    # -- rotation -------------------------------------------------------------------------------------

    def _rotate(self) -> None:
        """Hand the buffers that are full or due to the flusher threads: one flush at a time per partition
        (in offset order), partitions side by side. ``put`` goes on reading while Spark writes; a
        partition whose previous flush is still running waits for it (so at most one buffer per
        partition is in flight), and a flush's failure is raised here, by the next ``put`` or
        ``pre_commit``."""
        self._raise_failed()
        now = time.time()
        for tp, b in list(self.buffers.items()):
            if len(b) and b.deadline is not None and now >= b.deadline:
                self.full.setdefault(tp, []).append(self.buffers.pop(tp))
        if not self.full:
            return
        ready, self.full = self.full, {}
        for tp, buffers in ready.items():
            previous = self.inflight.get(tp)
            if previous is not None:
                previous.result()  # raises that flush's failure
            self.inflight[tp] = self.pool.submit(self._flush_all, tp, buffers)

    def _wake_when_due(self) -> None:
        """Scheduled rotation without new records: the worker calls ``put`` only when records come, so when a
        buffer's rotation is due the task asks for an offset commit, whose ``pre_commit`` rotates it (Kafka
        Connect's own worker calls ``put`` with no records instead)."""
        while not self.stopping.wait(_WAKE_S):
            now = time.time()
            if any(len(b) and b.deadline is not None and now >= b.deadline for b in list(self.buffers.values())):
                self.context.request_commit()

    def _flush_all(self, tp: TopicPartition, buffers: list[_Buffer]) -> None:
        for buffer in buffers:
            self._flush(tp, buffer)

    def _raise_failed(self) -> None:
        for tp, future in list(self.inflight.items()):
            if future.done():
                del self.inflight[tp]
                future.result()

    def _wait(self, partitions: list[TopicPartition] | None = None) -> None:
        """Wait for the flushes in flight (of these partitions); raise the first failure."""
        failure: BaseException | None = None
        for tp in list(self.inflight) if partitions is None else partitions:
            future = self.inflight.pop(tp, None)
            if future is None:
                continue
            try:
                future.result()
            except BaseException as exc:
                failure = failure or exc
        if failure is not None:
            raise failure

    def pre_commit(self, offsets: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        self._rotate()
        return {tp: self.committed[tp] for tp in offsets if tp in self.committed}

    def _flush(self, tp: TopicPartition, buffer: _Buffer) -> None:
        if not buffer.offsets:
            return
        started = time.monotonic()
        log.info("%s: flushing %s-%d offsets %d..%d", self.name, tp.topic, tp.partition, buffer.offsets[0],
                 buffer.offsets[-1])
        table = self._table(tp.topic)
        flush_dir = f"{self.lake.staging(tp.topic, tp.partition)}/{uuid.uuid4().hex}"
        if self.mode == "upsert":
            entry, rows = self._stage_upsert(tp, buffer, table, flush_dir)
        else:
            entry, rows = self._stage_files(tp, buffer, table, flush_dir)
        if entry is None:
            self.committed[tp] = buffer.offsets[-1] + 1
            return
        entry.columns = table.shape.to_json()
        self.lake.commit(entry)
        self.lake.delete(flush_dir)
        self.committed[tp] = entry.next
        elapsed = (time.monotonic() - started) * 1000
        self.figures["flushes"] += 1
        self.figures["files"] += len(entry.moves)
        self.figures["rows.written"] += rows
        self.figures["last.flush.ms"] = round(elapsed, 1)
        log.info("%s: committed %s-%d offsets %d..%d (%d rows, %d paths) in %.0f ms", self.name, tp.topic,
                 tp.partition, entry.start, entry.next - 1, rows, len(entry.moves), elapsed)

    def _arrow(self, table: _Table, rows: list[dict[str, Any]], extra: dict[str, tuple[pa.DataType, list[Any]]]
               ) -> pa.Table:
        arrays, names = [], []
        for name, type_ in table.shape.columns.items():
            nested = pa.types.is_nested(type_)
            column = [plain(r.get(name)) for r in rows] if nested else [r.get(name) for r in rows]
            arrays.append(pa.array(column, type=type_))
            names.append(name)
        for name, (type_, values) in extra.items():
            arrays.append(pa.array(values, type=type_))
            names.append(name)
        return pa.Table.from_arrays(arrays, names=names)

    def _aligned(self, table: _Table, parts: list[pa.Table]) -> pa.Table:
        """Arrow tables of the encoded path with the table's columns, in its order (nulls where a part
        lacks a column)."""
        schema = table.shape.schema()
        out = []
        for part in parts:
            columns = [part.column(f.name).cast(f.type) if f.name in part.column_names
                       else pa.nulls(part.num_rows, f.type) for f in schema]
            out.append(pa.Table.from_arrays(columns, schema=schema))
        return pa.concat_tables(out)

    def _stage_files(self, tp: TopicPartition, buffer: _Buffer, table: _Table, flush_dir: str
                     ) -> tuple[CommitEntry | None, int]:
        """append/changelog: one file per partitioner folder, written by one Spark job."""
        groups: dict[str, list[int]] = {}
        for i, folder in enumerate(buffer.folders):
            groups.setdefault(folder, []).append(i)
        codec = self.config.parquet_codec
        if buffer.tables:  # the encoded path: default partitioner, one folder
            groups = {f"partition={tp.partition}": [0, len(buffer) - 1]}
        staging = local_folder(flush_dir) if self.direct else None
        if len(groups) == 1 and staging is not None:
            # a local lake: one Parquet file written by pyarrow, as Spark would write it (no Spark job)
            whole = self._aligned(table, buffer.tables) if buffer.tables else self._arrow(table, buffer.rows, {})
            staged = [f"{flush_dir}/{write_file(staging, whole, codec)}"]
        elif len(groups) == 1:
            whole = self._aligned(table, buffer.tables) if buffer.tables else self._arrow(table, buffer.rows, {})
            spark_frame(self.spark, whole).coalesce(1).write.mode("overwrite").option(
                "compression", codec).parquet(flush_dir)
            staged = [f"{flush_dir}/{n}" for n in self.lake.list(flush_dir) if n.startswith("part-")]
        else:
            # One shuffle puts each folder's rows in one Spark task, so each folder gets one file.
            index = {folder: i for i, folder in enumerate(groups)}
            whole = self._arrow(table, buffer.rows, {FILE: (pa.int32(), [index[f] for f in buffer.folders])})
            (spark_frame(self.spark, whole).repartition(len(groups), FILE).write.mode("overwrite")
             .partitionBy(FILE).option("compression", codec).parquet(flush_dir))
            staged = []
            for i in range(len(groups)):
                names = [n for n in self.lake.list(f"{flush_dir}/{FILE}={i}") if n.startswith("part-")]
                staged += [f"{flush_dir}/{FILE}={i}/{n}" for n in names]
        if len(staged) != len(groups):
            raise ConnectException(f"Spark wrote {len(staged)} files for {len(groups)} folders into {flush_dir}")
        ext = ".parquet" if codec == "none" else f".{codec}.parquet"
        moves = []
        for path, (folder, indices) in zip(staged, groups.items(), strict=True):
            first, last = buffer.offsets[indices[0]], buffer.offsets[indices[-1]]
            name = f"{tp.topic}+{tp.partition}+{first:010d}+{last:010d}{ext}"
            moves.append((path, f"{table.path}/{folder}/{name}"))
        return CommitEntry(tp.topic, tp.partition, buffer.offsets[0], buffer.offsets[-1] + 1, moves,
                           table.path), len(buffer)

    def _stage_upsert(self, tp: TopicPartition, buffer: _Buffer, table: _Table, flush_dir: str
                      ) -> tuple[CommitEntry | None, int]:
        """upsert: the new contents of every bucket the flush touches."""
        entry = CommitEntry(tp.topic, tp.partition, buffer.offsets[0], buffer.offsets[-1] + 1, [], table.path,
                            replace=True)
        keys = table.key_columns or [KEY_COLUMN]
        if buffer.tables:  # the encoded path
            assert table.key_types is not None
            found = latest(buffer.tables, table.key_types, table.shape.schema(), tp.partition,
                           self.config.cdc_buckets)
            if not found.keys.num_rows:
                return entry, 0
            upserted = pc.invert(found.deleted)
            fresh = found.rows.filter(upserted).append_column(BUCKET, found.buckets.filter(upserted))
            return entry, self._merge(entry, table, keys, found.keys, found.buckets, fresh, flush_dir)
        if not buffer.changes:
            return entry, 0
        latest_of: dict[str, _Change] = {}
        for change in sorted(buffer.changes, key=lambda c: (c.position, c.offset)):
            earlier = latest_of.get(change.key)
            if change.missing and earlier is not None and earlier.row is not None and change.row is not None:
                # unchanged TOAST values of a row changed earlier in this flush: its values
                row, missing = self.unavailable.fill(change.row, change.missing, earlier.row, earlier.missing)
                change = _Change(change.key, change.ident, change.bucket, change.position, change.offset, row,
                                 missing)
            latest_of[change.key] = change
        upserts = [c for c in latest_of.values() if c.row is not None]
        fresh = self._arrow(table, [c.row for c in upserts if c.row is not None],
                            {BUCKET: (pa.int32(), [c.bucket for c in upserts])})
        changed_keys = pa.Table.from_arrays(
            [pa.array([_key_value(c, k) for c in latest_of.values()], type=table.shape.columns.get(k)) for k in keys],
            names=keys)
        buckets = pa.array([c.bucket for c in latest_of.values()], pa.int32())
        if any(c.missing for c in upserts):
            return entry, self._merge_spark(tp, entry, table, keys, changed_keys, buckets, fresh, flush_dir, upserts)
        return entry, self._merge(entry, table, keys, changed_keys, buckets, fresh, flush_dir)

    def _merge(self, entry: CommitEntry, table: _Table, keys: list[str], changed_keys: pa.Table,
               buckets: pa.Array, fresh: pa.Table, flush_dir: str) -> int:
        """Stage the touched buckets' new contents (their rows of unchanged keys, then ``fresh``) and add their
        moves to ``entry``: with pyarrow for a local lake, else with Spark. ``changed_keys``: every key the
        flush changes (upserts and deletes), ``buckets`` theirs; ``fresh`` carries a ``_bucket`` column."""
        local, staging = local_folder(table.path), local_folder(flush_dir)
        if not self.direct or local is None or staging is None:
            return self._merge_spark(None, entry, table, keys, changed_keys, buckets, fresh, flush_dir, [])
        schema = storable_schema(table.shape.schema())
        key_schema = pa.schema([schema.field(k) for k in keys])
        changed_keys = changed_keys.cast(key_schema)
        fresh_buckets = fresh.column(BUCKET)
        fresh = fresh.drop_columns([BUCKET]).cast(schema)
        for b in pc.unique(buckets).sort().to_pylist():
            rewrite_bucket(f"{local}/{BUCKET}={b}", f"{staging}/{BUCKET}={b}", schema, keys,
                                   changed_keys.filter(pc.equal(buckets, b)),
                                   fresh.filter(pc.equal(fresh_buckets, b)), self.config.parquet_codec)
            entry.moves.append((f"{flush_dir}/{BUCKET}={b}", f"{table.path}/{BUCKET}={b}"))
        return fresh.num_rows

    def _merge_spark(self, tp: TopicPartition | None, entry: CommitEntry, table: _Table, keys: list[str],
                     changed_keys: pa.Table, buckets: pa.Array, fresh: pa.Table, flush_dir: str,
                     upserts: list[_Change]) -> int:
        """``_merge`` by Spark: it reads the touched buckets, anti-joins the changed keys and writes the
        buckets anew; ``upserts`` carrying unavailable values take them from the rows read."""
        touched = pc.unique(buckets).sort().to_pylist()
        spark = self.spark
        # buckets with files (a bucket emptied by deletes is an empty folder: nothing to read)
        existing = [b for b in touched if any(n.endswith(".parquet") and not n.startswith(".")
                                              for n in self.lake.list(f"{table.path}/{BUCKET}={b}"))]
        old = None
        if existing:
            old = (spark.read.option("basePath", table.path).option("mergeSchema", "true")
                   .parquet(*[f"{table.path}/{BUCKET}={b}" for b in existing]))
        if tp is not None and any(c.missing for c in upserts):
            fresh = self._kept_values(tp, table, keys, upserts, fresh, old)
        merged = spark_frame(spark, fresh)
        if old is not None:
            kept = old.join(spark_frame(spark, changed_keys), on=keys, how="left_anti")
            merged = kept.unionByName(merged, allowMissingColumns=True)
        columns = [c for c in table.shape.columns if c in merged.columns] + [BUCKET]
        merged.select(*columns).write.mode("overwrite").partitionBy(BUCKET).option(
            "compression", self.config.parquet_codec).parquet(flush_dir)
        for b in touched:
            staged = f"{flush_dir}/{BUCKET}={b}"
            if not self.lake.exists(staged):
                self.lake.mkdirs(staged)  # the bucket is now empty: an empty folder replaces it
            entry.moves.append((staged, f"{table.path}/{BUCKET}={b}"))
        return fresh.num_rows

    def _kept_values(self, tp: TopicPartition, table: _Table, keys: list[str], upserts: list[_Change],
                     fresh: pa.Table, old: Any) -> pa.Table:
        """``fresh`` with the columns its rows lack (unchanged TOAST values) taken from the lake's rows of
        the same keys; a row the lake does not have keeps nulls there, and the task says so."""
        needed = sorted({name for c in upserts for name in c.missing})
        rows_of: dict[tuple[Any, ...], int] = {}
        stored: pa.Table | None = None
        if old is not None:
            present = [n for n in needed if n in old.columns]
            wanted = [c for c in upserts if c.missing]
            probe = pa.Table.from_arrays(
                [pa.array([_key_value(c, k) for c in wanted], type=table.shape.columns.get(k)) for k in keys],
                names=keys)
            stored = (old.join(spark_frame(self.spark, probe), on=keys, how="left_semi")
                      .select(*keys, *present).toArrow())
            stored = stored.cast(pa.schema([pa.field(n, _arrow_of(table, n, stored.schema.field(n).type))
                                            for n in stored.column_names]))
            key_columns = [stored.column(k).to_pylist() for k in keys]
            rows_of = {k: i for i, k in enumerate(zip(*key_columns, strict=True))}
        normal = {k: pa.array([_key_value(c, k) for c in upserts], type=table.shape.columns.get(k)).to_pylist()
                  for k in keys}
        found = [rows_of.get(tuple(normal[k][i] for k in keys)) if c.missing else None
                 for i, c in enumerate(upserts)]
        lost = [c for c, at in zip(upserts, found, strict=True) if c.missing and at is None]
        if lost:
            log.warning("%s: %s-%d: %d rows carry unavailable values (unchanged TOAST) the lake has no earlier "
                        "row for; their columns %s are left null (e.g. key %s)", self.name, tp.topic, tp.partition,
                        len(lost), sorted({n for c in lost for n in c.missing}), lost[0].ident)
            self.figures["rows.unavailable.values"] += len(lost)
        if stored is None or len(lost) == sum(1 for c in upserts if c.missing):
            return fresh
        n = fresh.num_rows
        for name in needed:
            if name not in stored.column_names:
                continue
            # each row's cell from fresh (index i) or from the stored row (index n + j)
            picks = [n + at if at is not None and name in c.missing else i
                     for i, (c, at) in enumerate(zip(upserts, found, strict=True))]
            both = pa.concat_arrays([fresh.column(name).combine_chunks(), stored.column(name).combine_chunks()])
            fresh = fresh.set_column(fresh.schema.get_field_index(name), name, both.take(pa.array(picks)))
        return fresh

    # -- the rest ------------------------------------------------------------------------------------

    def metrics(self) -> dict[str, Any]:
        return {**self.figures, "records.buffered": sum(len(b) for b in self.buffers.values()),
                "committed": {f"{tp.topic}-{tp.partition}": o for tp, o in sorted(
                    self.committed.items(), key=lambda x: (x[0].topic, x[0].partition))}}

    def stop(self) -> None:
        self.buffers, self.full = {}, {}
        stopping = getattr(self, "stopping", None)
        if stopping is not None:
            stopping.set()
        pool = getattr(self, "pool", None)
        if pool is not None:
            try:
                self._wait()
            except Exception:
                log.exception("%s: a flush failed while the task stopped", self.name)
            pool.shutdown(wait=True)


def _given(record: SinkRecord) -> Callable[[], SinkRecord]:
    return lambda: record


def _arrow_of(table: _Table, name: str, read: pa.DataType) -> pa.DataType:
    """The Arrow type of a column as the sink builds it (what Spark hands back may differ: µs timestamps,
    integer times)."""
    return table.shape.columns.get(name) or read


def _key_value(change: _Change, column: str) -> Any:
    return change.ident.get(column) if isinstance(change.ident, dict) else change.ident


def _next_boundary(interval_ms: int, partitioner: Partitioner) -> float:
    """The next wall-clock multiple of ``interval_ms`` in the partitioner's time zone, in seconds."""
    return (floor_in_zone(int(time.time() * 1000), interval_ms, partitioner.zone) + interval_ms) / 1000


def _java_message(exc: BaseException) -> str:
    """A Py4J error's Java message without the stack trace."""
    text = str(exc)
    for line in text.splitlines():
        if "Exception" in line and ":" in line:
            return line.strip()
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__
