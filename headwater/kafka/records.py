"""Record batches (magic v2): the header on the hot path, full records off it.

The broker keeps batches as the bytes the producer sent. On the hot path only the
61-byte header is read: to check the CRC, to learn the record count and timestamps,
and to rewrite the base offset (which lies outside the CRC). Decoding individual
records is for compaction, tests and tools.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from crc32c import crc32c

from .compression import NONE, CompressionError, DecompressedTooLarge, compress, decompress
from .types import DecodeError, Reader, Writer, read_varint, write_varint

__all__ = [
    "BatchHeader",
    "InvalidBatch",
    "Record",
    "RecordTooLarge",
    "HEADER_SIZE",
    "assemble_batch",
    "build_batch",
    "copy_batch",
    "decode_batch_records",
    "iter_batches",
    "pack_records",
    "record_size",
    "split_batch",
    "RecordSummary",
    "parse_header",
    "record_summaries",
    "validate_batch",
]

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta,
# baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordCount
_HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = _HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: bytes not counted in batchLength
_CRC_START = 21  # attributes onward are covered by the CRC
_OFFSET = struct.Struct(">q")
_ATTR_TS = struct.Struct(">hiqq")  # attributes, lastOffsetDelta, baseTimestamp, maxTimestamp

ATTR_CODEC_MASK = 0x07
ATTR_LOG_APPEND_TIME = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies on disk and on the wire."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def codec(self) -> int:
        return self.attributes & ATTR_CODEC_MASK

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)


class InvalidBatch(ValueError):
    """A batch that fails validation; ``corrupt`` distinguishes CORRUPT_MESSAGE from INVALID_RECORD,
    ``too_large`` a payload that would expand past the caller's limit (MESSAGE_TOO_LARGE)."""

    def __init__(self, message: str, corrupt: bool = True, too_large: bool = False) -> None:
        super().__init__(message)
        self.corrupt = corrupt
        self.too_large = too_large


def _records_data(header: BatchHeader, payload: memoryview, max_decompressed: int | None) -> bytes | memoryview:
    """The records of a batch, decompressed (to at most ``max_decompressed`` bytes) as needed."""
    if header.codec == NONE:
        return payload
    try:
        return decompress(header.codec, payload, max_decompressed)
    except DecompressedTooLarge as exc:
        raise InvalidBatch(str(exc), too_large=True) from None
    except CompressionError as exc:
        raise InvalidBatch(str(exc)) from None


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    return BatchHeader._make(_HEADER.unpack_from(buf, pos))


def crc_ok(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> bool:
    end = pos + header.size
    return crc32c(memoryview(buf)[pos + _CRC_START : end]) == header.crc


def iter_batches(buf: bytes | bytearray | memoryview, pos: int = 0,
                 end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` for each complete batch; stop at a partial tail."""
    end = len(buf) if end is None else end
    while pos + HEADER_SIZE <= end:
        header = parse_header(buf, pos)
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD or pos + header.size > end:
            return
        yield pos, header
        pos += header.size


def validate_batch(buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None,
                   header: BatchHeader | None = None, *, compacted: bool = False) -> BatchHeader:
    """Check one batch that starts at ``pos`` and must end exactly at ``end`` (``header``: its header, when the
    caller has parsed it already). A producer's batch holds one record per offset; with ``compacted`` (a
    leader's batch a follower copies) it may hold fewer, even none: a cleaner keeps a batch's offset range
    while removing its records.

    Raises InvalidBatch with Kafka's distinction: damaged bytes (size, magic, CRC) are
    CORRUPT_MESSAGE; a well-formed batch with impossible contents is INVALID_RECORD.
    """
    end = len(buf) if end is None else end
    if end - pos < HEADER_SIZE:
        raise InvalidBatch(f"record batch of {end - pos} bytes is shorter than its {HEADER_SIZE}-byte header")
    if header is None:
        header = parse_header(buf, pos)
    if header.magic != 2:
        raise InvalidBatch(f"record batch magic {header.magic} is not supported (only v2)")
    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD or pos + header.size != end:
        raise InvalidBatch(
            f"record batch length {header.batch_length} does not match the {end - pos - LOG_OVERHEAD} bytes sent"
        )
    if not crc_ok(buf, pos, header):
        raise InvalidBatch("record batch CRC-32C does not match its contents")
    if (not 0 <= header.record_count <= header.last_offset_delta + 1 if compacted
            else header.record_count <= 0 or header.last_offset_delta != header.record_count - 1):
        raise InvalidBatch(
            f"record batch says {header.record_count} records but last offset delta {header.last_offset_delta}",
            corrupt=False,
        )
    if header.codec > 4:
        raise InvalidBatch(f"unknown compression codec {header.codec}", corrupt=False)
    return header


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    _OFFSET.pack_into(buf, pos, base_offset)


def set_log_append_time(buf: bytearray | memoryview, pos: int, header: BatchHeader, now_ms: int) -> None:
    """Stamp LogAppendTime on a batch: attribute bit 3, maxTimestamp = now, new CRC."""
    _ATTR_TS.pack_into(
        buf, pos + _CRC_START, header.attributes | ATTR_LOG_APPEND_TIME, header.last_offset_delta, now_ms, now_ms
    )
    struct.pack_into(">I", buf, pos + 17, crc32c(memoryview(buf)[pos + _CRC_START : pos + header.size]))


# ---------------------------------------------------------------------------------
# Individual records: varint-encoded, used off the hot path.


@dataclass
class Record:
    offset: int = 0
    timestamp: int = 0
    key: bytes | None = None
    value: bytes | None = None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


def decode_batch_records(buf: bytes | bytearray | memoryview, pos: int = 0,
                         max_decompressed: int | None = None) -> tuple[BatchHeader, list[Record]]:
    """Decode every record in the batch at ``pos`` (decompressing as needed, to at most
    ``max_decompressed`` bytes)."""
    header = parse_header(buf, pos)
    data = memoryview(_records_data(header, memoryview(buf)[pos + HEADER_SIZE : pos + header.size],
                                    max_decompressed))
    records = []
    r = Reader(data)
    try:
        for _ in range(header.record_count):
            length = r.varint()
            end = r.pos + length
            if length < 0 or end > len(data):
                raise InvalidBatch("record length runs past the end of the batch", corrupt=False)
            r.pos += 1  # attributes (unused)
            ts_delta = r.varint()
            off_delta = r.varint()
            key = r.varint_bytes()
            value = r.varint_bytes()
            headers = []
            for _ in range(max(r.varint(), 0)):
                hkey = r.varint_bytes()
                headers.append(((hkey or b"").decode("utf-8", "replace"), r.varint_bytes()))
            if r.pos != end:
                raise InvalidBatch("record length does not match its fields", corrupt=False)
            ts = header.max_timestamp if header.attributes & ATTR_LOG_APPEND_TIME else header.base_timestamp + ts_delta
            records.append(Record(header.base_offset + off_delta, ts, key, value, headers))
    except DecodeError as exc:
        raise InvalidBatch(f"record field runs past the end of the batch: {exc}", corrupt=False) from None
    return header, records


class RecordSummary(NamedTuple):
    """What produce validation needs of one record (Kafka's LogValidator): no key or value copied."""

    offset: int  # as the producer sent it: its batch's base offset + the record's delta
    timestamp: int  # the record's CreateTime (base timestamp + delta)
    key_size: int  # -1: null key
    value_size: int  # -1: null value (a tombstone)


def record_summaries(buf: bytes | bytearray | memoryview, header: BatchHeader,
                     max_decompressed: int | None = None) -> list[RecordSummary]:
    """Offset, timestamp and key/value sizes of each record of the one batch in ``buf`` (decompressed
    as needed, to at most ``max_decompressed`` bytes); InvalidBatch if the records do not decode."""
    data = _records_data(header, memoryview(buf)[HEADER_SIZE : header.size], max_decompressed)
    out = []
    pos, end_of_data = 0, len(data)
    base_offset, base_ts = header.base_offset, header.base_timestamp
    try:
        for _ in range(header.record_count):
            length, pos = read_varint(data, pos)
            end = pos + length
            if length < 0 or end > end_of_data:
                raise InvalidBatch("record length runs past the end of the batch", corrupt=False)
            ts_delta, p = read_varint(data, pos + 1)  # after the attributes byte
            off_delta, p = read_varint(data, p)
            key_size, p = read_varint(data, p)
            value_size, _ = read_varint(data, p + max(key_size, 0))
            out.append(RecordSummary(base_offset + off_delta, base_ts + ts_delta, key_size, value_size))
            pos = end
    except (DecodeError, IndexError):
        raise InvalidBatch("record field runs past the end of the batch", corrupt=False) from None
    return out


def build_batch(
    records: list[Record],
    *,
    base_offset: int = 0,
    codec: int = NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    attributes: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """Encode records into one v2 batch. Offsets are taken relative to ``base_offset``."""
    if not records:
        raise ValueError("a record batch needs at least one record")
    base_ts = min(r.timestamp for r in records)
    max_ts = max(r.timestamp for r in records)
    body = bytearray()
    for r in records:
        rec = Writer().int8(0).varint(r.timestamp - base_ts).varint(r.offset - base_offset)
        rec.varint_bytes(r.key).varint_bytes(r.value).varint(len(r.headers))
        for hkey, hval in r.headers:
            rec.varint_bytes(hkey.encode()).varint_bytes(hval)
        write_varint(body, len(rec.buf))
        body += rec.buf
    payload = compress(codec, bytes(body)) if codec != NONE else bytes(body)
    last_delta = records[-1].offset - base_offset
    attrs = (attributes & ~ATTR_CODEC_MASK) | codec
    return assemble_batch(
        BatchHeader(base_offset, 0, partition_leader_epoch, 2, 0, attrs, last_delta, base_ts, max_ts, producer_id,
                    producer_epoch, base_sequence, len(records)),
        payload,
    )


class RecordTooLarge(ValueError):
    """One record alone is bigger than the batch it has to fit in."""


def _varint_size(n: int) -> int:
    z = (n << 1) ^ (n >> 63)
    size = 1
    while z >= 0x80:
        z >>= 7
        size += 1
    return size


def _bytes_size(b: bytes | None) -> int:
    return 1 if b is None else _varint_size(len(b)) + len(b)


def record_size(r: Record, timestamp_delta: int, offset_delta: int) -> int:
    """Bytes of ``r`` encoded in a batch with these deltas, its length prefix included."""
    body = (1 + _varint_size(timestamp_delta) + _varint_size(offset_delta) + _bytes_size(r.key)
            + _bytes_size(r.value) + _varint_size(len(r.headers)))
    for hkey, hval in r.headers:
        body += _bytes_size(hkey.encode()) + _bytes_size(hval)
    return _varint_size(body) + body


def pack_records(records: list[Record], limit: int, *, codec: int = NONE, attributes: int = 0,
                 ratio: float = 1.0) -> list[tuple[bytes, int]]:
    """``records`` in order as v2 batches of at most ``limit`` bytes each (as few as fit), with their
    record counts. Each batch's records are renumbered from 0 (their ``offset`` is overwritten), as a
    producer numbers them. ``ratio``: the compressed size expected of the uncompressed one (with a
    codec). RecordTooLarge when one record alone does not fit."""
    out: list[tuple[bytes, int]] = []
    # Records are taken while their uncompressed size fits the budget (deltas from the first record:
    # exact unless timestamps go back); a batch that still comes out too big is halved.
    budget = limit if codec == NONE else HEADER_SIZE + int((limit - HEADER_SIZE) * 0.9 / min(max(ratio, 0.01), 1.0))
    start = 0
    while start < len(records):
        base_ts = records[start].timestamp
        size = HEADER_SIZE
        end = start
        while end < len(records):
            r = records[end]
            grown = size + record_size(r, r.timestamp - base_ts, end - start)
            if grown > budget and end > start:
                break
            size, end = grown, end + 1
        out += _build_within(records[start:end], limit, codec, attributes)
        start = end
    return out


def _build_within(records: list[Record], limit: int, codec: int, attributes: int) -> list[tuple[bytes, int]]:
    for i, r in enumerate(records):
        r.offset = i
    data = build_batch(records, codec=codec, attributes=attributes)
    if len(data) <= limit:
        return [(data, len(records))]
    if len(records) == 1:
        raise RecordTooLarge(f"a record of {len(data) - HEADER_SIZE} bytes does not fit in a record batch of at "
                             f"most {limit} bytes")
    half = len(records) // 2
    return (_build_within(records[:half], limit, codec, attributes)
            + _build_within(records[half:], limit, codec, attributes))


def split_batch(buf: bytes | memoryview, pos: int, header: BatchHeader, limit: int) -> list[tuple[bytes, int]]:
    """The records of the batch at ``pos`` re-encoded as batches of at most ``limit`` bytes each (with
    their record counts), in order, compressed as it was, as a new producer would send them (base offset
    0, no producer id, not transactional). RecordTooLarge when one record alone is bigger."""
    _, records = decode_batch_records(buf, pos)
    ratio = 1.0
    if header.codec != NONE:  # as compressible as the batch was
        raw = HEADER_SIZE + sum(record_size(r, r.timestamp - records[0].timestamp, i) for i, r in enumerate(records))
        ratio = header.size / raw
    return pack_records(records, limit, codec=header.codec, ratio=ratio,
                        attributes=header.attributes & ~(ATTR_TRANSACTIONAL | ATTR_CONTROL))


_BATCH_TAIL = struct.Struct(">hiqqqhii")  # attributes .. recordCount (covered by the CRC with the records)
_BATCH_HEAD = struct.Struct(">qiibI")  # baseOffset, batchLength, partitionLeaderEpoch, magic, crc


def assemble_batch(header: BatchHeader, payload: bytes) -> bytes:
    """A v2 batch from ``header``'s fields and the (already compressed) records ``payload``;
    the batch length and CRC are computed here, whatever ``header`` says of them."""
    tail = _BATCH_TAIL.pack(
        header.attributes, header.last_offset_delta, header.base_timestamp, header.max_timestamp,
        header.producer_id, header.producer_epoch, header.base_sequence, header.record_count,
    ) + payload
    # batchLength counts partitionLeaderEpoch + magic + crc (9 bytes) and the tail.
    return _BATCH_HEAD.pack(header.base_offset, len(tail) + 9, header.partition_leader_epoch, 2, crc32c(tail)) + tail


def copy_batch(buf: bytes | memoryview, pos: int, header: BatchHeader, *, producer_id: int = -1,
               producer_epoch: int = -1, base_sequence: int = -1, transactional: bool = False) -> bytes:
    """The batch at ``pos`` as a new producer would send it: records untouched (compressed or not),
    base offset 0, no leader epoch, transactional only when ``transactional`` (a transactional producer's
    batch must say so), the given producer state, a new CRC."""
    payload = bytes(memoryview(buf)[pos + HEADER_SIZE : pos + header.size])
    attributes = header.attributes & ~ATTR_TRANSACTIONAL | (ATTR_TRANSACTIONAL if transactional else 0)
    return assemble_batch(header._replace(base_offset=0, partition_leader_epoch=-1, attributes=attributes,
                                          producer_id=producer_id, producer_epoch=producer_epoch,
                                          base_sequence=base_sequence), payload)
