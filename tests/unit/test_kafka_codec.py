"""Property tests of the one Kafka wire codec (headwater.kafka): what is written reads back the same.

Primitives, record batches v2 (every codec, keys/values/headers null or not, any base offset),
the ``__consumer_offsets`` records and Connect's group protocol. Known byte layouts from
Kafka's own tests pin the encodings, so a round trip of two wrong halves cannot pass.
"""

from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.broker.group.records import (
    GroupMetadata,
    MemberMetadata,
    OffsetAndMetadata,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
)
from headwater.connect.herder.protocol import Assignment, decode_assignment, decode_metadata, encode_assignment
from headwater.connect.herder.protocol import MemberMetadata as WorkerMetadata
from headwater.connect.herder.protocol import encode_metadata as encode_worker_metadata
from headwater.kafka import compression
from headwater.kafka.errors import ErrorCode
from headwater.kafka.records import Record, build_batch, decode_batch_records, validate_batch
from headwater.kafka.types import DecodeError, Reader, Writer, read_varint, write_varint

settings.register_profile("codec", max_examples=150, deadline=None)
settings.load_profile("codec")

I16 = st.integers(-(2**15), 2**15 - 1)
I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
TEXT = st.text(max_size=40)
NTEXT = st.none() | TEXT
NBYTES = st.none() | st.binary(max_size=60)


# ------------------------------------------------------------------------------------ primitives

@given(I64)
def test_varint_round_trip(n: int) -> None:
    out = bytearray()
    write_varint(out, n)
    assert read_varint(bytes(out), 0) == (n, len(out))
    assert len(out) <= 10


def test_varint_known_bytes() -> None:
    # Kafka's ByteUtilsTest: zigzag varints.
    for value, encoded in [(0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (63, b"\x7e"), (-64, b"\x7f"),
                           (64, b"\x80\x01"), (-65, b"\x81\x01"), (2**31 - 1, b"\xfe\xff\xff\xff\x0f"),
                           (-(2**31), b"\xff\xff\xff\xff\x0f")]:
        assert Writer().varint(value).to_bytes() == encoded
        assert Reader(encoded).varint() == value


@given(st.integers(0, 2**63 - 1))
def test_uvarint_round_trip(n: int) -> None:
    data = Writer().uvarint(n).to_bytes()
    assert Reader(data).uvarint() == n


@given(I16, I32, I64, st.integers(0, 2**32 - 1), st.booleans(), st.floats(allow_nan=False),
       st.integers(-128, 127))
def test_fixed_round_trip(a: int, b: int, c: int, d: int, e: bool, f: float, g: int) -> None:
    data = Writer().int16(a).int32(b).int64(c).uint32(d).boolean(e).float64(f).int8(g).to_bytes()
    assert data[:2] == struct.pack(">h", a)
    r = Reader(data)
    assert (r.int16(), r.int32(), r.int64(), r.uint32(), r.boolean(), r.float64(), r.int8()) == (a, b, c, d, e, f, g)
    assert r.at_end()


@given(NTEXT, NTEXT, NBYTES, NBYTES, NBYTES)
def test_strings_and_bytes_round_trip(s1: str | None, s2: str | None, b1: bytes | None, b2: bytes | None,
                                      b3: bytes | None) -> None:
    data = (Writer().string(s1).compact_string(s2).bytes_(b1).compact_bytes(b2).varint_bytes(b3)).to_bytes()
    r = Reader(data)
    assert (r.string(), r.compact_string(), r.bytes_(), r.compact_bytes(), r.varint_bytes()) == (s1, s2, b1, b2, b3)
    assert r.at_end()


def test_null_and_compact_layouts() -> None:
    assert Writer().string(None).to_bytes() == b"\xff\xff"
    assert Writer().string("ab").to_bytes() == b"\x00\x02ab"
    assert Writer().compact_string(None).to_bytes() == b"\x00"
    assert Writer().compact_string("ab").to_bytes() == b"\x03ab"
    assert Writer().bytes_(None).to_bytes() == b"\xff\xff\xff\xff"
    assert Writer().compact_array([], Writer.int32).to_bytes() == b"\x01"
    assert Writer().tagged_fields().to_bytes() == b"\x00"


@given(st.none() | st.lists(I32, max_size=20), st.none() | st.lists(TEXT, max_size=10),
       st.dictionaries(st.integers(0, 2**20), st.binary(max_size=20), max_size=5), st.uuids())
def test_arrays_tagged_fields_uuid_round_trip(ints: list[int] | None, texts: list[str] | None,
                                              tags: dict[int, bytes], u: uuid.UUID) -> None:
    data = (Writer().array(ints, Writer.int32).compact_array(texts, Writer.compact_string)
            .tagged_fields(tags).uuid(u)).to_bytes()
    r = Reader(data)
    assert r.array(Reader.int32) == ints
    assert r.compact_array(Reader.compact_string) == texts
    assert r.tagged_fields() == tags
    assert r.uuid() == u and r.at_end()


@given(st.binary(max_size=30))
def test_reader_never_returns_short_data(data: bytes) -> None:
    """Whatever the bytes, a read gives a whole value or DecodeError (never silently fewer bytes)."""
    for read in (Reader.string, Reader.bytes_, Reader.compact_string, Reader.compact_bytes, Reader.varint_bytes,
                 Reader.int64, Reader.uuid, Reader.tagged_fields):
        r = Reader(data)
        try:
            read(r)
        except DecodeError:
            continue
        assert r.pos <= len(data)


# ---------------------------------------------------------------------------------- record batches

HEADERS = st.lists(st.tuples(TEXT, NBYTES), max_size=3)
RECORD = st.tuples(NBYTES, NBYTES, HEADERS, st.integers(0, 10**6))


@given(st.lists(RECORD, min_size=1, max_size=30), st.integers(0, 2**40),
       st.sampled_from(sorted(compression.CODEC_NAMES)), st.integers(-1, 2**31 - 1), st.integers(0, 2**41))
def test_record_batch_round_trip(rows: list, base_offset: int, codec: int, producer_id: int, ts0: int) -> None:
    records = [Record(base_offset + i, ts0 + dt, key, value, headers) for i, (key, value, headers, dt) in
               enumerate(rows)]
    batch = build_batch(records, base_offset=base_offset, codec=codec, producer_id=producer_id)
    header = validate_batch(batch)  # CRC, lengths, counts
    assert (header.base_offset, header.record_count, header.codec) == (base_offset, len(records), codec)
    assert header.max_timestamp == max(r.timestamp for r in records)
    _, decoded = decode_batch_records(batch)
    assert decoded == records


# --------------------------------------------------------------------- __consumer_offsets records

@given(TEXT, TEXT, I32, st.integers(0, 2**62), I32, TEXT, I64)
def test_offset_records_round_trip(group: str, topic: str, partition: int, offset: int, epoch: int, meta: str,
                                   ts: int) -> None:
    assert decode_key(encode_offset_key(group, topic, partition)) == (group, topic, partition)
    assert decode_key(encode_group_key(group)) == group
    value = OffsetAndMetadata(offset, epoch, meta, ts)
    assert decode_offset_value(encode_offset_value(value)) == value


MEMBER = st.builds(MemberMetadata, TEXT, NTEXT, TEXT, TEXT, I32, I32, st.binary(max_size=30), st.binary(max_size=30))


@given(st.builds(GroupMetadata, TEXT, I32, NTEXT, NTEXT, I64, st.lists(MEMBER, max_size=4)))
def test_group_metadata_round_trip(group: GroupMetadata) -> None:
    assert decode_group_value(encode_group_value(group)) == group


def test_offset_key_layout_is_kafkas() -> None:
    # OffsetCommitKey v1: int16 version, string group, string topic, int32 partition.
    assert encode_offset_key("g", "t", 3) == b"\x00\x01\x00\x01g\x00\x01t\x00\x00\x00\x03"


# ------------------------------------------------------------------------ Connect group protocol

WORK = st.dictionaries(TEXT, st.lists(st.integers(-1, 100), max_size=5), max_size=4)
ASSIGNMENT = st.builds(Assignment, TEXT, TEXT, I64, WORK, WORK, I32, st.sampled_from([0, 1]), st.sampled_from([1, 2]))


@given(ASSIGNMENT)
def test_connect_assignment_round_trip(assignment: Assignment) -> None:
    assert decode_assignment(encode_assignment(assignment)) == assignment


@given(TEXT, I64, st.none() | ASSIGNMENT, st.sampled_from([1, 2]))
def test_connect_metadata_round_trip(url: str, offset: int, allocation: Assignment | None, version: int) -> None:
    metadata = WorkerMetadata(url, offset, allocation, version)
    assert decode_metadata(encode_worker_metadata(metadata)) == metadata


def test_connect_v0_assignment_has_no_revocations() -> None:
    v0 = Assignment("leader", "http://l:8083", 5, {"c": [-1, 0]}, {}, 0, 0, 0)
    data = encode_assignment(v0)
    assert decode_assignment(data) == v0
    assert len(data) == 2 + 2 + 8 + 15 + 8 + 4 + 3 + 4 + 8  # no revoked array, no delay


# --------------------------------------------------------------------------------------- errors

@pytest.mark.parametrize(("name", "code"), [("NONE", 0), ("UNKNOWN_SERVER_ERROR", -1), ("REBALANCE_IN_PROGRESS", 27),
                                            ("MEMBER_ID_REQUIRED", 79), ("UNKNOWN_TOPIC_ID", 100)])
def test_error_codes_by_name(name: str, code: int) -> None:
    assert ErrorCode[name] == code
    assert len(ErrorCode) > 120  # the whole table, not only what the broker answers today
