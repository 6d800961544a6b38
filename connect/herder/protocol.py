"""Kafka Connect's group protocol (protocol type ``connect``): member metadata and assignments.

Encoded in Kafka protocol types as ConnectProtocol (V0, ``default``) and
IncrementalCooperativeConnectProtocol (V1 ``compatible``, V2 ``sessioned``) write them:

metadata:    version int16, url string, config_offset int64, [V1+] allocation nullable bytes
assignment:  version int16, error int16, leader string, leader_url string, config_offset int64,
             assignment [connector string, tasks [int32]], [V1+] revoked [...], delay int32

Task -1 stands for the Connector instance itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from headwater.kafka.types import Reader, Writer

__all__ = ["Assignment", "MemberMetadata", "PROTOCOLS", "decode_assignment", "decode_metadata",
           "encode_assignment", "encode_metadata"]

CONNECTOR_TASK = -1
NO_ERROR, CONFIG_MISMATCH = 0, 1
PROTOCOLS = {"default": 0, "compatible": 1, "sessioned": 2}

Work = dict[str, list[int]]  # connector -> task numbers (-1 = the connector itself)


def _write_work(w: Writer, work: Work) -> None:
    w.array(work.items(), lambda w, item: w.string(item[0]).array(item[1], Writer.int32))


def _read_work(r: Reader) -> Work:
    entries = r.array(lambda r: (r.string() or "", r.array(Reader.int32) or [])) or []
    return dict(entries)


@dataclass
class MemberMetadata:
    url: str
    config_offset: int
    allocation: Assignment | None = None
    version: int = 1


@dataclass
class Assignment:
    leader: str
    leader_url: str
    config_offset: int
    assigned: Work = field(default_factory=dict)
    revoked: Work = field(default_factory=dict)
    delay_ms: int = 0
    error: int = NO_ERROR
    version: int = 1

    def connectors(self) -> list[str]:
        return sorted(c for c, tasks in self.assigned.items() if CONNECTOR_TASK in tasks)

    def tasks(self) -> list[tuple[str, int]]:
        return sorted((c, t) for c, tasks in self.assigned.items() for t in tasks if t != CONNECTOR_TASK)


def encode_metadata(m: MemberMetadata) -> bytes:
    w = Writer().int16(m.version).string(m.url).int64(m.config_offset)
    if m.version >= 1:
        w.bytes_(encode_assignment(m.allocation) if m.allocation is not None else None)
    return w.to_bytes()


def decode_metadata(data: bytes) -> MemberMetadata:
    r = Reader(data)
    version = r.int16()
    url, offset = r.string() or "", r.int64()
    allocation = None
    if version >= 1 and not r.at_end():
        raw = r.bytes_()
        allocation = decode_assignment(raw) if raw else None
    return MemberMetadata(url, offset, allocation, version)


def encode_assignment(a: Assignment) -> bytes:
    w = Writer().int16(a.version).int16(a.error).string(a.leader).string(a.leader_url).int64(a.config_offset)
    _write_work(w, a.assigned)
    if a.version >= 1:
        _write_work(w, a.revoked)
        w.int32(a.delay_ms)
    return w.to_bytes()


def decode_assignment(data: bytes) -> Assignment:
    r = Reader(data)
    version, error = r.int16(), r.int16()
    leader, leader_url, offset = r.string() or "", r.string() or "", r.int64()
    assigned = _read_work(r)
    revoked: Work = {}
    delay = 0
    if version >= 1 and not r.at_end():
        revoked = _read_work(r)
        delay = r.int32()
    return Assignment(leader, leader_url, offset, assigned, revoked, delay, error, version)
