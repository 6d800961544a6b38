"""Keys and values of the ``__consumer_offsets`` topic, in Kafka's own binary layout.

Kafka's tools (and kcat with a hex dump) read them the same way: an int16 version
first, then the fields of OffsetCommitKey/Value and GroupMetadataKey/Value. A null
value is a tombstone (offset or group deleted).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from headwater.kafka.types import Reader, Writer

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



def java_string_hash(s: str) -> int:
    """Java's String.hashCode, so a group lands on the partition Kafka would pick."""
    h = 0
    for unit in struct.unpack(f">{len(s.encode('utf-16-be')) // 2}H", s.encode("utf-16-be")):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


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
    return Writer().int16(OFFSET_KEY_VERSION).string(group).string(topic).int32(partition).to_bytes()


def encode_group_key(group: str) -> bytes:
    return Writer().int16(GROUP_KEY_VERSION).string(group).to_bytes()


def decode_key(data: bytes) -> tuple[str, str, int] | str:
    """An offset key gives (group, topic, partition); a group key gives the group id."""
    r = Reader(data)
    version = r.int16()
    if version in (0, 1):
        group, topic = r.string(), r.string()
        return group or "", topic or "", r.int32()
    if version == 2:
        return r.string() or ""
    raise ValueError(f"unknown __consumer_offsets key version {version}")


def encode_offset_value(o: OffsetAndMetadata) -> bytes:
    w = Writer().int16(OFFSET_VALUE_VERSION).int64(o.offset).int32(o.leader_epoch).string(o.metadata)
    return w.int64(o.commit_timestamp).to_bytes()


def _version(r: Reader, known: int, what: str) -> int:
    """The value's int16 version; ValueError for one this broker cannot read (Kafka's flexible v4 or a
    forged one)."""
    version = r.int16()
    if not 0 <= version <= known:
        raise ValueError(f"unknown __consumer_offsets {what} value version {version}")
    return version


def decode_offset_value(data: bytes) -> OffsetAndMetadata:
    r = Reader(data)
    version = _version(r, OFFSET_VALUE_VERSION, "offset")
    offset = r.int64()
    epoch = r.int32() if version >= 3 else -1
    metadata = r.string() or ""
    ts = r.int64()
    return OffsetAndMetadata(offset, epoch, metadata, ts)


def encode_group_value(g: GroupMetadata) -> bytes:
    w = Writer().int16(GROUP_VALUE_VERSION).string(g.protocol_type).int32(g.generation)
    w.string(g.protocol).string(g.leader).int64(g.state_timestamp).int32(len(g.members))
    for m in g.members:
        w.string(m.member_id).string(m.group_instance_id).string(m.client_id).string(m.client_host)
        w.int32(m.rebalance_timeout_ms).int32(m.session_timeout_ms).bytes_(m.subscription).bytes_(m.assignment)
    return w.to_bytes()


def decode_group_value(data: bytes) -> GroupMetadata:
    r = Reader(data)
    version = _version(r, GROUP_VALUE_VERSION, "group")
    protocol_type = r.string() or ""
    generation = r.int32()
    protocol, leader = r.string(), r.string()
    ts = r.int64() if version >= 2 else 0
    members = []
    for _ in range(r.int32()):
        member_id = r.string() or ""
        instance = r.string() if version >= 3 else None
        client_id, client_host = r.string() or "", r.string() or ""
        rebalance = r.int32() if version >= 1 else 0
        session = r.int32()
        subscription, assignment = r.bytes_() or b"", r.bytes_() or b""
        members.append(MemberMetadata(member_id, instance, client_id, client_host, rebalance, session,
                                      subscription, assignment))
    return GroupMetadata(protocol_type, generation, protocol, leader, ts, members)
