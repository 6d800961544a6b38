"""Hand-written codecs for the requests every client sends many times a second: Produce v3-v11, Fetch v4-v11.

kafka-python's generated classes (codec.py) stay the general path: every other API and version, and any
request these decoders do not take as it is (a null where the schema has none, tagged fields, a length
past the frame's end, a name that is not UTF-8) goes through them, so errors and edge cases are answered
exactly as before. What is decoded here is what the handlers read, as plain objects with the fields of
their views (protocol/requests.py); the answers are encoded straight from the handlers' dicts, with the
same bytes as ``build_response`` + ``encode_response`` give (tests/unit/test_hot_paths.py compares them
for every version taken here).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from headwater.kafka.types import write_uvarint

__all__ = ["decode_fast", "encode_fast"]

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I32_I64 = struct.Struct(">iq")
_H_I = struct.Struct(">hi")  # acks, timeout
_FRAME_CID = struct.Struct(">ii")  # size prefix, correlation id
_FETCH_HEAD = struct.Struct(">iiii")  # replica id, max wait, min bytes, max bytes
_FETCH_HEAD_V4 = struct.Struct(">iiiib")  # ... isolation level
_FETCH_HEAD_V7 = struct.Struct(">iiiibii")  # ... session id, session epoch
_I32_I64_I32 = struct.Struct(">iqi")  # partition, fetch offset, partition max bytes (v4)
_I32_I64_I64_I32 = struct.Struct(">iqqi")  # ... log start offset (v5+)
_I32_I32_I64_I64_I32 = struct.Struct(">iiqqi")  # ... current leader epoch (v9+)
_PART_PRODUCE = struct.Struct(">ihq")  # index, error code, base offset
_Q = struct.Struct(">q")
_QQ = struct.Struct(">qq")
_IHQQQ = struct.Struct(">ihqqq")  # fetch partition: index, error, high watermark, last stable, log start
_IHQQ = struct.Struct(">ihqq")  # v4: no log start offset
_HII = struct.Struct(">hii")  # metadata partition: error code, index, leader
_IHI = struct.Struct(">ihi")  # throttle, error code, session id


class _NotTaken(Exception):
    """The request is left to the general decoder."""


# -- decoding ---------------------------------------------------------------------------------------------

class _Reader:
    """A cursor over one request body; any irregularity is _NotTaken (the general path then decides)."""

    __slots__ = ("buf", "end", "pos")

    def __init__(self, buf: memoryview, pos: int) -> None:
        self.buf, self.pos, self.end = buf, pos, len(buf)

    def uvarint(self) -> int:
        buf, pos = self.buf, self.pos
        if pos >= self.end:
            raise _NotTaken
        b = buf[pos]
        if b < 0x80:
            self.pos = pos + 1
            return b
        value, shift = b & 0x7F, 7
        while True:
            pos += 1
            if pos >= self.end or shift > 28:
                raise _NotTaken
            b = buf[pos]
            value |= (b & 0x7F) << shift
            if b < 0x80:
                self.pos = pos + 1
                return value
            shift += 7

    def no_tags(self) -> None:
        """A flexible struct's tagged fields: only an empty set is taken here."""
        if self.pos >= self.end or self.buf[self.pos] != 0:
            raise _NotTaken
        self.pos += 1

    def length(self, compact: bool, nullable: bool = False) -> int:
        """An array, string or bytes length; -1 for null (only where the schema allows it)."""
        if compact:
            n = self.uvarint() - 1
        else:
            if self.pos + 4 > self.end:
                raise _NotTaken
            (n,) = _I32.unpack_from(self.buf, self.pos)
            self.pos += 4
        if n < 0 and not (nullable and n == -1):
            raise _NotTaken
        return n

    def string(self, compact: bool, nullable: bool = False) -> str | None:
        if compact:
            n = self.uvarint() - 1
        else:
            if self.pos + 2 > self.end:
                raise _NotTaken
            (n,) = _I16.unpack_from(self.buf, self.pos)
            self.pos += 2
        if n < 0:
            if nullable and n == -1:
                return None
            raise _NotTaken
        start = self.pos
        self.pos = end = start + n
        if end > self.end:
            raise _NotTaken
        return str(self.buf[start:end], "utf-8")

    def bytes_(self, compact: bool) -> bytes | None:
        n = self.length(compact, nullable=True)
        if n < 0:
            return None
        start = self.pos
        self.pos = end = start + n
        if end > self.end:
            raise _NotTaken
        return bytes(self.buf[start:end])

    def take(self, s: struct.Struct) -> tuple[Any, ...]:
        pos = self.pos
        if pos + s.size > self.end:
            raise _NotTaken
        self.pos = pos + s.size
        return s.unpack_from(self.buf, pos)


class ProducePartitionData:
    __slots__ = ("index", "records")

    def __init__(self, index: int, records: bytes | None) -> None:
        self.index, self.records = index, records


class ProduceTopicData:
    __slots__ = ("name", "partition_data")

    def __init__(self, name: str, partition_data: list[ProducePartitionData]) -> None:
        self.name, self.partition_data = name, partition_data


class ProduceRequestData:
    __slots__ = ("acks", "timeout_ms", "topic_data", "transactional_id")

    def __init__(self, transactional_id: str | None, acks: int, timeout_ms: int,
                 topic_data: list[ProduceTopicData]) -> None:
        self.transactional_id, self.acks, self.timeout_ms, self.topic_data = transactional_id, acks, timeout_ms, \
            topic_data


def _decode_produce(version: int, r: _Reader) -> ProduceRequestData:
    compact = version >= 9
    transactional_id = r.string(compact, nullable=True)
    acks, timeout_ms = r.take(_H_I)
    topics = []
    for _ in range(r.length(compact)):
        name = r.string(compact)
        assert name is not None
        partitions = []
        for _ in range(r.length(compact)):
            (index,) = r.take(_I32)
            partitions.append(ProducePartitionData(index, r.bytes_(compact)))
            if compact:
                r.no_tags()
        if compact:
            r.no_tags()
        topics.append(ProduceTopicData(name, partitions))
    if compact:
        r.no_tags()
    return ProduceRequestData(transactional_id, acks, timeout_ms, topics)


class FetchPartitionData:
    __slots__ = ("current_leader_epoch", "fetch_offset", "log_start_offset", "partition", "partition_max_bytes")

    def __init__(self, partition: int, current_leader_epoch: int, fetch_offset: int, log_start_offset: int,
                 partition_max_bytes: int) -> None:
        self.partition, self.current_leader_epoch, self.fetch_offset = partition, current_leader_epoch, fetch_offset
        self.log_start_offset, self.partition_max_bytes = log_start_offset, partition_max_bytes


class FetchTopicData:
    __slots__ = ("partitions", "topic")

    def __init__(self, topic: str, partitions: list[FetchPartitionData]) -> None:
        self.topic, self.partitions = topic, partitions


class ForgottenTopicData:
    __slots__ = ("partitions", "topic")

    def __init__(self, topic: str, partitions: list[int]) -> None:
        self.topic, self.partitions = topic, partitions


class FetchRequestData:
    __slots__ = ("forgotten_topics_data", "isolation_level", "max_bytes", "max_wait_ms", "min_bytes", "rack_id",
                 "replica_id", "session_epoch", "session_id", "topics")

    def __init__(self, replica_id: int, max_wait_ms: int, min_bytes: int, max_bytes: int, isolation_level: int,
                 session_id: int, session_epoch: int, topics: list[FetchTopicData],
                 forgotten_topics_data: list[ForgottenTopicData], rack_id: str) -> None:
        self.replica_id, self.max_wait_ms, self.min_bytes, self.max_bytes = replica_id, max_wait_ms, min_bytes, \
            max_bytes
        self.isolation_level, self.session_id, self.session_epoch = isolation_level, session_id, session_epoch
        self.topics, self.forgotten_topics_data, self.rack_id = topics, forgotten_topics_data, rack_id


def _decode_fetch(version: int, r: _Reader) -> FetchRequestData:
    session_id, session_epoch = 0, -1
    if version >= 7:
        replica_id, max_wait_ms, min_bytes, max_bytes, isolation, session_id, session_epoch = r.take(_FETCH_HEAD_V7)
    else:
        replica_id, max_wait_ms, min_bytes, max_bytes, isolation = r.take(_FETCH_HEAD_V4)
    part = _I32_I32_I64_I64_I32 if version >= 9 else _I32_I64_I64_I32 if version >= 5 else _I32_I64_I32
    topics = []
    for _ in range(r.length(False)):
        name = r.string(False)
        assert name is not None
        partitions = []
        for _ in range(r.length(False)):
            fields = r.take(part)
            if version >= 9:
                partitions.append(FetchPartitionData(*fields))
            elif version >= 5:
                partitions.append(FetchPartitionData(fields[0], -1, fields[1], fields[2], fields[3]))
            else:
                partitions.append(FetchPartitionData(fields[0], -1, fields[1], -1, fields[2]))
        topics.append(FetchTopicData(name, partitions))
    forgotten = []
    if version >= 7:
        for _ in range(r.length(False)):
            name = r.string(False)
            assert name is not None
            indexes = [r.take(_I32)[0] for _ in range(r.length(False))]
            forgotten.append(ForgottenTopicData(name, indexes))
    rack_id = ""
    if version >= 11:
        rack = r.string(False)
        assert rack is not None
        rack_id = rack
    return FetchRequestData(replica_id, max_wait_ms, min_bytes, max_bytes, isolation, session_id, session_epoch,
                            topics, forgotten, rack_id)


_DECODERS: dict[int, tuple[int, int, Callable[[int, _Reader], Any]]] = {
    0: (3, 11, _decode_produce),
    1: (4, 11, _decode_fetch),
}


def decode_fast(api_key: int, version: int, frame: memoryview, body_offset: int) -> Any | None:
    """The request body decoded here, or None when it is left to the general decoder (other APIs and
    versions, and anything irregular: the general path then decodes it or names the problem)."""
    taken = _DECODERS.get(api_key)
    if taken is None or not taken[0] <= version <= taken[1]:
        return None
    try:
        return taken[2](version, _Reader(frame, body_offset))
    except (_NotTaken, UnicodeDecodeError, AssertionError):
        return None


# -- encoding ---------------------------------------------------------------------------------------------

def _length(out: bytearray, n: int, compact: bool) -> None:
    if compact:
        write_uvarint(out, n + 1)
    else:
        out += _I32.pack(n)


def _string(out: bytearray, s: str | None, compact: bool) -> None:
    if s is None:
        if compact:
            out.append(0)
        else:
            out += b"\xff\xff"
        return
    data = s.encode()
    if compact:
        write_uvarint(out, len(data) + 1)
    else:
        out += _I16.pack(len(data))
    out += data


def _encode_produce(version: int, body: dict[str, Any], out: bytearray) -> None:
    compact = version >= 9
    responses = body["responses"]
    _length(out, len(responses), compact)
    for topic in responses:
        _string(out, topic["name"], compact)
        partitions = topic["partition_responses"]
        _length(out, len(partitions), compact)
        for p in partitions:
            out += _PART_PRODUCE.pack(p["index"], p["error_code"], p["base_offset"])
            if version >= 2:
                out += _Q.pack(p.get("log_append_time_ms", -1))
            if version >= 5:
                out += _Q.pack(p.get("log_start_offset", -1))
            if version >= 8:
                errors = p.get("record_errors") or ()
                _length(out, len(errors), compact)
                for e in errors:
                    out += _I32.pack(e["batch_index"])
                    _string(out, e.get("batch_index_error_message"), compact)
                    if compact:
                        out.append(0)
                _string(out, p.get("error_message"), compact)
            if compact:
                out.append(0)
        if compact:
            out.append(0)
    out += _I32.pack(body.get("throttle_time_ms", 0))
    if compact:
        out.append(0)


def _encode_fetch(version: int, body: dict[str, Any], out: bytearray) -> None:
    if version >= 7:
        out += _IHI.pack(body.get("throttle_time_ms", 0), body.get("error_code", 0), body.get("session_id", 0))
    else:
        out += _I32.pack(body.get("throttle_time_ms", 0))
    responses = body["responses"]
    out += _I32.pack(len(responses))
    for topic in responses:
        _string(out, topic["topic"], False)
        partitions = topic["partitions"]
        out += _I32.pack(len(partitions))
        for p in partitions:
            if version >= 5:
                out += _IHQQQ.pack(p["partition_index"], p["error_code"], p["high_watermark"],
                                   p.get("last_stable_offset", -1), p.get("log_start_offset", -1))
            else:
                out += _IHQQ.pack(p["partition_index"], p["error_code"], p["high_watermark"],
                                  p.get("last_stable_offset", -1))
            aborted = p.get("aborted_transactions")
            if aborted is None:
                out += b"\xff\xff\xff\xff"
            else:
                out += _I32.pack(len(aborted))
                for t in aborted:
                    out += _QQ.pack(t["producer_id"], t["first_offset"])
            if version >= 11:
                out += _I32.pack(p.get("preferred_read_replica", -1))
            records = p.get("records")
            if records is None:
                out += b"\xff\xff\xff\xff"
            else:
                out += _I32.pack(len(records))
                out += records


_U32 = struct.Struct(">I")


def _bitfield(out: bytearray, bits: set[int] | None) -> None:
    """Authorized operations: a set of bit numbers, None (not asked for) being bit 31 alone, as kafka-python's."""
    out += _U32.pack(sum(1 << b for b in (bits if bits is not None else (31,))))


def _int32s(out: bytearray, values: list[int]) -> None:
    out += _I32.pack(len(values))
    for v in values:
        out += _I32.pack(v)


class EncodedOnce(list[dict[str, Any]]):
    """Answer entries that never change once built (a topic's Metadata partitions), whose bytes the fast encoder
    keeps by layout: an answer for all topics lists every partition, 20,000 on a large broker."""

    __slots__ = ("encoded",)

    def __init__(self, items: list[dict[str, Any]]) -> None:
        super().__init__(items)
        self.encoded: dict[int, bytes] = {}


def _metadata_partitions(version: int, partitions: list[dict[str, Any]], out: bytearray) -> None:
    out += _I32.pack(len(partitions))
    for p in partitions:
        out += _HII.pack(p["error_code"], p["partition_index"], p["leader_id"])
        if version >= 7:
            out += _I32.pack(p.get("leader_epoch", -1))
        _int32s(out, p["replica_nodes"])
        _int32s(out, p["isr_nodes"])
        if version >= 5:
            _int32s(out, p.get("offline_replicas") or [])


def _encode_metadata(version: int, body: dict[str, Any], out: bytearray) -> None:
    """Metadata v0-v8 (none flexible); partitions given as EncodedOnce are encoded once per layout."""
    if version >= 3:
        out += _I32.pack(body.get("throttle_time_ms", 0))
    brokers = body["brokers"]
    out += _I32.pack(len(brokers))
    for b in brokers:
        out += _I32.pack(b["node_id"])
        _string(out, b["host"], False)
        out += _I32.pack(b["port"])
        if version >= 1:
            _string(out, b.get("rack"), False)
    if version >= 2:
        _string(out, body.get("cluster_id"), False)
    if version >= 1:
        out += _I32.pack(body.get("controller_id", -1))
    topics = body["topics"]
    out += _I32.pack(len(topics))
    for t in topics:
        out += _I16.pack(t["error_code"])
        _string(out, t["name"], False)
        if version >= 1:
            out.append(1 if t.get("is_internal") else 0)
        partitions = t["partitions"]
        if type(partitions) is EncodedOnce:
            layout = 7 if version >= 7 else 5 if version >= 5 else 0  # the versions adding partition fields
            data = partitions.encoded.get(layout)
            if data is None:
                encoded = bytearray()
                _metadata_partitions(version, partitions, encoded)
                data = partitions.encoded[layout] = bytes(encoded)
            out += data
        else:
            _metadata_partitions(version, partitions, out)
        if version >= 8:
            _bitfield(out, t.get("authorized_operations"))
    if version >= 8:
        _bitfield(out, body.get("authorized_operations"))


_ENCODERS: dict[int, tuple[int, int, Callable[[int, dict[str, Any], bytearray], None]]] = {
    0: (3, 11, _encode_produce),
    1: (4, 11, _encode_fetch),
    3: (0, 8, _encode_metadata),
}


def encode_fast(api_key: int, version: int, correlation_id: int, body: dict[str, Any]) -> bytearray | None:
    """The framed answer (size, response header, body) encoded here, or None for APIs and versions left to
    the general encoder. Flexible versions (Produce v9+) have the v1 response header (an empty tag set)."""
    taken = _ENCODERS.get(api_key)
    if taken is None or not taken[0] <= version <= taken[1]:
        return None
    out = bytearray(_FRAME_CID.pack(0, correlation_id))
    if api_key == 0 and version >= 9:
        out.append(0)
    taken[2](version, body, out)
    out[0:4] = _I32.pack(len(out) - 4)
    return out
