import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.kafka import compression
from headwater.kafka.records import (
    HEADER_SIZE,
    InvalidBatch,
    Record,
    RecordTooLarge,
    build_batch,
    decode_batch_records,
    iter_batches,
    pack_records,
    parse_header,
    set_base_offset,
    set_log_append_time,
    split_batch,
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


_record = st.builds(Record, offset=st.just(0), timestamp=st.integers(1_600_000_000_000, 1_700_000_000_000),
                    key=st.one_of(st.none(), st.binary(max_size=40)),
                    value=st.one_of(st.none(), st.binary(max_size=400)),
                    headers=st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=20))),
                                     max_size=2))


@settings(max_examples=60, deadline=None)
@given(st.lists(_record, min_size=1, max_size=120), st.integers(600, 6000),
       st.sampled_from(sorted(compression.CODEC_NAMES)))
def test_split_batch_keeps_every_record_in_batches_within_the_limit(records: list[Record], limit: int,
                                                                    codec: int) -> None:
    """A batch split to a limit: every piece at most ``limit`` bytes and valid, compressed as the batch was,
    numbered from 0, and the pieces hold the batch's records in order (timestamps may go back)."""
    for i, r in enumerate(records):
        r.offset = i
    fields = [(r.timestamp, r.key, r.value, r.headers) for r in records]
    batch = build_batch(records, codec=codec)
    pieces = split_batch(batch, 0, parse_header(batch), limit)
    for data, count in pieces:
        header = validate_batch(data)
        assert len(data) <= limit and header.record_count == count and header.codec == codec
        assert header.base_offset == 0 and header.producer_id == -1
    out = [r for data, _ in pieces for r in decode_batch_records(data)[1]]
    assert [(r.timestamp, r.key, r.value, r.headers) for r in out] == fields
    assert [r.offset for data, _ in pieces for r in decode_batch_records(data)[1][:1]] == [0] * len(pieces)


def test_pack_records_fills_each_batch_and_refuses_a_record_too_big() -> None:
    """Records of a merge are packed as tightly as the limit lets them: each batch but the last would have
    gone over with one record more; one record bigger than the limit is refused, naming both sizes."""
    records = _records(3000)
    packed = pack_records(records, 100_000)
    sizes = [len(data) for data, _ in packed]
    assert max(sizes) <= 100_000 and sum(n for _, n in packed) == 3000
    start = 0
    for _, n in packed[:-1]:
        bigger = [Record(i, r.timestamp, r.key, r.value, r.headers) for i, r in enumerate(records[start:start + n + 1])]
        assert len(build_batch(bigger)) > 100_000
        start += n
    with pytest.raises(RecordTooLarge, match="a record of 5010 bytes does not fit in a record batch of at most 5000"):
        pack_records([Record(0, 0, b"k", b"x" * 5000, [])], 5000)
