"""Batches: many records of one stream as columns, for tasks that move records in bulk.

A source task may offer ``poll_batch`` next to ``poll``, a sink task ``put_batch`` next to
``put``. The worker calls them only when nothing needs a record object: the connector has
no transforms and, for sources, does not override ``commit_record``. Values are converted
a list at a time (``Converter.from_connect_values`` / ``to_connect_values``). Otherwise
the worker calls ``poll``/``put`` as always, so a batch method is purely a speed-up and
must mean the same records as its per-record twin.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .data import Schema
from .records import SourceRecord

__all__ = ["EncodedBatch", "EncodedSinkBatch", "EncodedValues", "RecordBatches", "SinkBatch", "SourceBatch"]


@dataclass(slots=True)
class SourceBatch:
    """Records bound for one topic from one source partition, with no key, headers or
    timestamp of their own. ``source_offset`` is the offset after the last value; it is
    committed once Kafka acknowledged every value of the batch (and of every earlier one)."""

    topic: str
    values: list[Any]
    value_schema: Schema | None
    source_partition: dict[str, Any]
    source_offset: dict[str, Any]
    kafka_partition: int | None = None

    def __len__(self) -> int:
        return len(self.values)

    def records(self) -> list[SourceRecord]:
        """The same data as SourceRecords (each carrying the batch's final offset)."""
        topic, schema, partition, kafka_partition = self.topic, self.value_schema, self.source_partition, \
            self.kafka_partition
        offset = self.source_offset
        return [SourceRecord(topic, value, None, kafka_partition, None, schema, None, [], partition, offset)
                for value in self.values]


@dataclass(slots=True)
class EncodedBatch:
    """Records a source task wrote in the worker's converters' wire form itself
    (``SourceTask.encode_with`` / ``poll_encoded``): (topic, key, value, timestamp ms) each, bytes
    exactly as the converters would have written them. ``source_offset`` is the offset after the
    last record; it is committed once Kafka acknowledged every record of the batch (and of every
    earlier one).

    ``kafka_partition`` sends every record to that partition (else the key picks it, as Kafka's
    default partitioner); ``headers``, when given, holds each record's headers in the header
    converter's wire form, one list per record."""

    records: list[tuple[str, bytes | None, bytes | None, int | None]]
    source_partition: dict[str, Any]
    source_offset: dict[str, Any]
    kafka_partition: int | None = None
    headers: list[list[tuple[str, bytes | None]]] | None = None

    def __len__(self) -> int:
        return len(self.records)


@dataclass(slots=True)
class EncodedValues:
    """Values a source task wrote in the worker's value converter's wire form itself
    (``SourceTask.encode_with`` / ``poll_encoded``), all for one topic with one key (the key
    converter's bytes, usually of a null key), no headers, stamped with the time they are sent:
    a ``SourceBatch`` already converted, appended as one run. ``source_offset`` is the offset after
    the last value; it is committed once Kafka acknowledged every value of the batch (and of every
    earlier one). ``kafka_partition`` sends them all to that partition (else the key picks it)."""

    topic: str
    values: list[bytes | None]
    key: bytes | None
    source_partition: dict[str, Any]
    source_offset: dict[str, Any]
    kafka_partition: int | None = None

    def __len__(self) -> int:
        return len(self.values)


@dataclass(slots=True)
class RecordBatches:
    """Whole Kafka record batches (magic v2, wire bytes) for one topic-partition, sent as they are: a
    task copying from another Kafka cluster hands these over from ``poll_encoded`` and no record is ever
    decoded. Each batch must be as a new producer would send it (base offset 0, producer id -1, not
    transactional, a valid CRC: ``headwater.kafka.records.copy_batch``); ``counts`` are their record
    counts. ``source_offset`` is committed once Kafka acknowledged every batch (and every earlier one)."""

    topic: str
    kafka_partition: int
    batches: list[bytes]
    counts: list[int]
    source_partition: dict[str, Any]
    source_offset: dict[str, Any]

    def __len__(self) -> int:
        return sum(self.counts)


class _Consumed:
    """Consecutive consumed records of one topic-partition; offsets and timestamps are read from the
    consumer's records on demand."""

    __slots__ = ("topic", "kafka_partition", "_raw")

    def __init__(self, topic: str, kafka_partition: int, raw: list[Any]) -> None:
        self.topic, self.kafka_partition = topic, kafka_partition
        self._raw = raw

    def __len__(self) -> int:
        return len(self._raw)

    @property
    def offsets(self) -> list[int]:
        """Each record's Kafka offset (ascending; gaps where a compacted topic dropped records)."""
        return [m.offset for m in self._raw]

    @property
    def timestamps(self) -> list[int]:
        return [m.timestamp for m in self._raw]

    @property
    def last_offset(self) -> int:
        return self._raw[-1].offset


class SinkBatch(_Consumed):
    """Consecutive records of one topic-partition, converted, as columns. Records with
    headers never arrive in a batch (they go through ``put``)."""

    __slots__ = ("key_schema", "keys", "value_schema", "values")

    def __init__(self, topic: str, kafka_partition: int, key_schema: Schema | None, keys: list[Any],
                 value_schema: Schema | None, values: list[Any], raw: list[Any]) -> None:
        super().__init__(topic, kafka_partition, raw)
        self.key_schema, self.keys = key_schema, keys
        self.value_schema, self.values = value_schema, values


class EncodedSinkBatch(_Consumed):
    """Consecutive records of one topic-partition as the consumer read them, not converted: for a
    sink task that said yes to ``SinkTask.decode_with`` and reads the converters' wire form itself.
    Records with headers never arrive in one."""

    __slots__ = ()

    @property
    def keys(self) -> list[bytes | None]:
        return [m.key for m in self._raw]

    @property
    def values(self) -> list[bytes | None]:
        return [m.value for m in self._raw]
