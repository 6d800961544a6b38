import struct

import pytest

from headwater.kafka import compression
from headwater.kafka.records import (
    HEADER_SIZE,
    InvalidBatch,
    Record,
    build_batch,
    decode_batch_records,
    iter_batches,
    parse_header,
    set_base_offset,
    set_log_append_time,
    validate_batch,
)


def _records(n: int, ts: int = 1_700_000_000_000) -> list[Record]:
    return [Record(offset=i, timestamp=ts + i, key=f"k{i}".encode(), value=b"v" * i,
                   headers=[("h", b"x"), ("n", None)]) for i in range(n)]


@pytest.mark.parametrize("codec", sorted(compression.CODEC_NAMES))
def test_round_trip_every_codec(codec: int) -> None:
    batch = build_batch(_records(50), codec=codec, producer_id=7, producer_epoch=1, base_sequence=3)
    header = validate_batch(batch)
    assert header.codec == codec
    assert header.record_count == 50 and header.last_offset_delta == 49
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 1, 3)
    _, records = decode_batch_records(batch)
    assert [r.key for r in records] == [f"k{i}".encode() for i in range(50)]
    assert records[3].value == b"vvv" and records[3].headers == [("h", b"x"), ("n", None)]
    assert records[49].timestamp == 1_700_000_000_049


def test_base_offset_rewrite_keeps_crc() -> None:
    batch = bytearray(build_batch(_records(3)))
    set_base_offset(batch, 0, 1000)
    header = validate_batch(batch)
    assert header.base_offset == 1000 and header.last_offset == 1002
    assert [r.offset for r in decode_batch_records(batch)[1]] == [1000, 1001, 1002]


def test_log_append_time_restamps_and_recomputes_crc() -> None:
    batch = bytearray(build_batch(_records(3)))
    header = parse_header(batch)
    set_log_append_time(batch, 0, header, 42)
    h2 = validate_batch(batch)
    assert h2.max_timestamp == 42 and h2.attributes & 0x08
    assert all(r.timestamp == 42 for r in decode_batch_records(batch)[1])


def test_bad_crc_is_corrupt() -> None:
    batch = bytearray(build_batch(_records(3)))
    batch[-1] ^= 0xFF
    with pytest.raises(InvalidBatch) as err:
        validate_batch(batch)
    assert err.value.corrupt and "CRC" in str(err.value)


def test_truncated_and_wrong_length_are_corrupt() -> None:
    batch = build_batch(_records(3))
    with pytest.raises(InvalidBatch):
        validate_batch(batch[:-5])
    with pytest.raises(InvalidBatch):
        validate_batch(batch[:30])
    with pytest.raises(InvalidBatch):
        validate_batch(batch + b"\x00")


def test_wrong_magic() -> None:
    batch = bytearray(build_batch(_records(1)))
    batch[16] = 1
    with pytest.raises(InvalidBatch, match="magic"):
        validate_batch(batch)


def test_record_count_mismatch_is_invalid_record() -> None:
    from crc32c import crc32c

    batch = bytearray(build_batch(_records(3)))
    struct.pack_into(">i", batch, 57, 5)  # recordCount
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    with pytest.raises(InvalidBatch) as err:
        validate_batch(batch)
    assert not err.value.corrupt


def test_iter_batches_stops_at_partial_tail() -> None:
    a, b = build_batch(_records(2)), build_batch(_records(4))
    buf = a + b + b[:HEADER_SIZE + 3]
    found = list(iter_batches(buf))
    assert [pos for pos, _ in found] == [0, len(a)]
    assert [h.record_count for _, h in found] == [2, 4]


def test_snappy_accepts_raw_and_xerial() -> None:
    import cramjam

    data = b"hello snappy " * 1000
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert compression.decompress(compression.SNAPPY, raw) == data
    xerial = compression.compress(compression.SNAPPY, data)
    assert xerial.startswith(b"\x82SNAPPY\x00")
    assert compression.decompress(compression.SNAPPY, xerial) == data


def test_garbage_payload_raises_compression_error() -> None:
    with pytest.raises(compression.CompressionError):
        compression.decompress(compression.GZIP, b"not gzip at all")
