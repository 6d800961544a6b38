"""Keys and values of the ``__consumer_offsets`` topic, in Kafka's own binary layout.

Kafka's tools (and kcat with a hex dump) read them the same way: an int16 version
first, then the fields of OffsetCommitKey/Value and GroupMetadataKey/Value. A null
value is a tombstone (offset or group deleted).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

__all__ = [
    "GroupMetadata",
    "MemberMetadata",
    "OffsetAndMetadata",
    "decode_key",
    "decode_group_value",
    "decode_offset_value",
    "encode_group_key",
    "encode_group_value",
    "encode_offset_key",
    "encode_offset_value",
    "java_string_hash",
]

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
GROUP_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def java_string_hash(s: str) -> int:
    """Java's String.hashCode, so a group lands on the partition Kafka would pick."""
    h = 0
    for unit in struct.unpack(f">{len(s.encode('utf-16-be')) // 2}H", s.encode("utf-16-be")):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


class _Writer:
    def __init__(self) -> None:
        self.buf = bytearray()

    def i16(self, v: int) -> _Writer:
        self.buf += _I16.pack(v)
        return self

    def i32(self, v: int) -> _Writer:
        self.buf += _I32.pack(v)
        return self

    def i64(self, v: int) -> _Writer:
        self.buf += _I64.pack(v)
        return self

    def string(self, v: str | None) -> _Writer:
        if v is None:
            return self.i16(-1)
        data = v.encode()
        self.i16(len(data))
        self.buf += data
        return self

    def bytes_(self, v: bytes | None) -> _Writer:
        if v is None:
            return self.i32(-1)
        self.i32(len(v))
        self.buf += v
        return self


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, s: struct.Struct) -> int:
        (v,) = s.unpack_from(self.data, self.pos)
        self.pos += s.size
        return v

    def i16(self) -> int:
        return self._take(_I16)

    def i32(self) -> int:
        return self._take(_I32)

    def i64(self) -> int:
        return self._take(_I64)

    def string(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        v = self.data[self.pos : self.pos + n].decode()
        self.pos += n
        return v

    def bytes_(self) -> bytes | None:
        n = self.i32()
        if n < 0:
            return None
        v = self.data[self.pos : self.pos + n]
        self.pos += n
        return bytes(v)


@dataclass
class OffsetAndMetadata:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = 0


@dataclass
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass
class GroupMetadata:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    state_timestamp: int
    members: list[MemberMetadata] = field(default_factory=list)


def encode_offset_key(group: str, topic: str, partition: int) -> bytes:
    return bytes(_Writer().i16(OFFSET_KEY_VERSION).string(group).string(topic).i32(partition).buf)


def encode_group_key(group: str) -> bytes:
    return bytes(_Writer().i16(GROUP_KEY_VERSION).string(group).buf)


def decode_key(data: bytes) -> tuple[str, str, int] | str:
    """An offset key gives (group, topic, partition); a group key gives the group id."""
    r = _Reader(data)
    version = r.i16()
    if version in (0, 1):
        group, topic = r.string(), r.string()
        return group or "", topic or "", r.i32()
    if version == 2:
        return r.string() or ""
    raise ValueError(f"unknown __consumer_offsets key version {version}")


def encode_offset_value(o: OffsetAndMetadata) -> bytes:
    w = _Writer().i16(OFFSET_VALUE_VERSION).i64(o.offset).i32(o.leader_epoch).string(o.metadata)
    return bytes(w.i64(o.commit_timestamp).buf)


def decode_offset_value(data: bytes) -> OffsetAndMetadata:
    r = _Reader(data)
    version = r.i16()
    offset = r.i64()
    epoch = r.i32() if version >= 3 else -1
    metadata = r.string() or ""
    ts = r.i64()
    return OffsetAndMetadata(offset, epoch, metadata, ts)


def encode_group_value(g: GroupMetadata) -> bytes:
    w = _Writer().i16(GROUP_VALUE_VERSION).string(g.protocol_type).i32(g.generation)
    w.string(g.protocol).string(g.leader).i64(g.state_timestamp).i32(len(g.members))
    for m in g.members:
        w.string(m.member_id).string(m.group_instance_id).string(m.client_id).string(m.client_host)
        w.i32(m.rebalance_timeout_ms).i32(m.session_timeout_ms).bytes_(m.subscription).bytes_(m.assignment)
    return bytes(w.buf)


def decode_group_value(data: bytes) -> GroupMetadata:
    r = _Reader(data)
    version = r.i16()
    protocol_type = r.string() or ""
    generation = r.i32()
    protocol, leader = r.string(), r.string()
    ts = r.i64() if version >= 2 else 0
    members = []
    for _ in range(r.i32()):
        member_id = r.string() or ""
        instance = r.string() if version >= 3 else None
        client_id, client_host = r.string() or "", r.string() or ""
        rebalance = r.i32() if version >= 1 else 0
        session = r.i32()
        subscription, assignment = r.bytes_() or b"", r.bytes_() or b""
        members.append(MemberMetadata(member_id, instance, client_id, client_host, rebalance, session,
                                      subscription, assignment))
    return GroupMetadata(protocol_type, generation, protocol, leader, ts, members)
