"""Fetched record batches (magic v2) straight into Arrow columns.

``headwater.kafka.decode_batch_records`` builds a ``Record`` per record (about 4 us each); a
Spark task only needs columns, so this walks each batch's records once, appending keys, values,
offsets and timestamps to plain lists that Arrow takes whole. Batch headers, CRCs and
decompression are the shared codec's (``headwater.kafka.records`` and ``.compression``).

Kafka's consumer rules apply: control batches (transaction markers) are skipped; with
read_committed, batches of aborted transactions are skipped too; records outside the asked
offset range (a fetch that began inside a batch, or ran past the end) are dropped; offsets may
have gaps (compacted topics).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from headwater.kafka.aborted import AbortedTransactions
from headwater.kafka.compression import NONE, decompress
from headwater.kafka.records import (
    ATTR_CONTROL,
    ATTR_LOG_APPEND_TIME,
    HEADER_SIZE,
    BatchHeader,
    crc_ok,
    iter_batches,
)
from headwater.kafka.types import DecodeError, read_uvarint, read_varint

from .errors import SparkSourceError

__all__ = ["ARROW_SCHEMA", "ARROW_SCHEMA_NO_HEADERS", "Columns", "CorruptRecords", "decode_fetched"]

_HEADER_TYPE = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
# Exactly what PySpark derives from the source's Spark schema (it compares schemas before taking a batch).
ARROW_SCHEMA = pa.schema([
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("timestampType", pa.int32()),
    pa.field("headers", pa.list_(pa.field("element", _HEADER_TYPE))),
])
ARROW_SCHEMA_NO_HEADERS = pa.schema(list(ARROW_SCHEMA)[:-1])


class CorruptRecords(SparkSourceError, ValueError):
    """Fetched bytes that are not valid record batches."""


@dataclass
class Columns:
    """Column builders for one Arrow batch of one partition."""

    with_headers: bool
    keys: list[bytes | None] = field(default_factory=list)
    values: list[bytes | None] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    timestamps: list[int] = field(default_factory=list)  # milliseconds
    ts_types: list[int] = field(default_factory=list)
    header_counts: list[int] = field(default_factory=list)
    header_keys: list[str] = field(default_factory=list)
    header_values: list[bytes | None] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.offsets)

    def to_arrow(self, topic: str, partition: int) -> pa.RecordBatch:
        n = len(self.offsets)
        ms = pa.array(self.timestamps, pa.int64())
        # Spark's timestamps are microseconds; Kafka's milliseconds.
        micros = pc.multiply(ms, pa.scalar(1000, pa.int64())).cast(pa.timestamp("us", tz="UTC"))
        arrays = [
            pa.array(self.keys, pa.binary()),
            pa.array(self.values, pa.binary()),
            pa.repeat(pa.scalar(topic, pa.string()), n),
            pa.repeat(pa.scalar(partition, pa.int32()), n),
            pa.array(self.offsets, pa.int64()),
            micros,
            pa.array(self.ts_types, pa.int32()),
        ]
        if self.with_headers:
            bounds = [0] * (n + 1)
            total = 0
            for i, c in enumerate(self.header_counts):
                total += c
                bounds[i + 1] = total
            entries = pa.StructArray.from_arrays(
                [pa.array(self.header_keys, pa.string()), pa.array(self.header_values, pa.binary())],
                fields=list(_HEADER_TYPE))
            arrays.append(pa.ListArray.from_arrays(pa.array(bounds, pa.int32()), entries,
                                                   type=ARROW_SCHEMA.field("headers").type))
        return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA if self.with_headers else ARROW_SCHEMA_NO_HEADERS)


def decode_fetched(data: bytes | memoryview, lo: int, hi: int, cols: Columns, check_crcs: bool = True,
                   aborted: list[tuple[int, int]] | None = None) -> int:
    """Append the records of ``data`` (whole batches, as a fetch returns them) with offsets in
    [``lo``, ``hi``) to ``cols``; return the offset after the last complete batch (``lo`` if none).

    ``aborted``: the fetch answer's aborted transactions (read_committed), None to keep everything
    but control batches (read_uncommitted).
    """
    txn = AbortedTransactions(aborted) if aborted is not None else None
    next_offset = lo
    for pos, header in iter_batches(data):
        next_offset = max(next_offset, header.last_offset + 1)
        if header.last_offset < lo:
            continue
        if header.base_offset >= hi:
            break
        if header.magic != 2:
            raise CorruptRecords(f"record batch at offset {header.base_offset} has magic {header.magic} "
                                 f"(only v2 batches are read)")
        if check_crcs and not crc_ok(data, pos, header):
            raise CorruptRecords(f"record batch at offset {header.base_offset} fails its CRC-32C check")
        if txn is not None and txn.skip(header, data, pos):
            continue
        if header.attributes & ATTR_CONTROL:
            continue
        payload = memoryview(data)[pos + HEADER_SIZE: pos + header.size]
        body = decompress(header.codec, payload) if header.codec != NONE else bytes(payload)
        _decode_records(body, header, lo, hi, cols)
    return next_offset


def _decode_records(data: bytes, header: BatchHeader, lo: int, hi: int, cols: Columns) -> None:
    # The hot loop, about 1.5 us a record. Varints of one and two bytes (deltas, lengths up to
    # 8 KiB) are decoded inline: a function call per field would cost more than the rest of the
    # record. Zig-zag: raw 1 is -1 (a null key or value); lengths are raw >> 1.
    base_offset = header.base_offset
    log_append = bool(header.attributes & ATTR_LOG_APPEND_TIME)
    base_ts = header.base_timestamp
    whole = base_offset >= lo and header.last_offset < hi
    offsets = cols.offsets
    add_key, add_value, add_offset, add_ts = (cols.keys.append, cols.values.append, offsets.append,
                                              cols.timestamps.append)
    with_headers = cols.with_headers
    first = len(offsets)
    end = len(data)
    pos = 0
    try:
        for _ in range(header.record_count):
            while data[pos] & 0x80:  # record length: the fields say where the record ends
                pos += 1
            pos += 2  # its last byte, and the record attributes (unused)
            v = data[pos]  # timestamp delta
            if v < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                v = (v & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                v, pos = read_uvarint(data, pos)
            ts_delta = (v >> 1) ^ -(v & 1)
            v = data[pos]  # offset delta
            if v < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                v = (v & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                v, pos = read_uvarint(data, pos)
            offset = base_offset + ((v >> 1) ^ -(v & 1))
            v = data[pos]  # key length
            if v < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                v = (v & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                v, pos = read_uvarint(data, pos)
            if v & 1:
                key = None
            else:
                key = data[pos: pos + (v >> 1)]
                pos += v >> 1
            v = data[pos]  # value length
            if v < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                v = (v & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                v, pos = read_uvarint(data, pos)
            if v & 1:
                value = None
            else:
                value = data[pos: pos + (v >> 1)]
                pos += v >> 1
            count = data[pos]  # header count
            pos += 1
            if count:
                if count & 0x80:
                    count, pos = read_uvarint(data, pos - 1)
                count >>= 1
                pos = _headers(data, pos, count, cols if with_headers else None)
            if pos > end:
                raise CorruptRecords(f"a record of the batch at offset {base_offset} runs past the batch's end")
            if not whole and not lo <= offset < hi:
                if with_headers and count:
                    del cols.header_keys[-count:], cols.header_values[-count:]
                continue
            add_key(key)
            add_value(value)
            add_offset(offset)
            add_ts(base_ts + ts_delta)
            if with_headers:
                cols.header_counts.append(count)
    except (IndexError, DecodeError):
        raise CorruptRecords(f"a record of the batch at offset {base_offset} runs past the batch's end") from None
    taken = len(offsets) - first
    if log_append:  # every record of the batch has the time the broker appended it
        cols.timestamps[first:] = [header.max_timestamp] * taken
    cols.ts_types.extend([1 if log_append else 0] * taken)


def _headers(data: bytes, pos: int, count: int, cols: Columns | None) -> int:
    for _ in range(count):
        n, pos = read_varint(data, pos)
        hkey = data[pos: pos + max(n, 0)]
        pos += max(n, 0)
        n, pos = read_varint(data, pos)
        hvalue = None if n < 0 else data[pos: pos + n]
        pos += max(n, 0)
        if cols is not None:
            cols.header_keys.append(hkey.decode("utf-8", "replace"))
            cols.header_values.append(hvalue)
    return pos
