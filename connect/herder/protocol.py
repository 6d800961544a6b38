"""Kafka Connect's group protocol (protocol type ``connect``): member metadata and assignments.

Encoded in Kafka protocol types as ConnectProtocol (V0, ``default``) and
IncrementalCooperativeConnectProtocol (V1 ``compatible``, V2 ``sessioned``) write them:

metadata:    version int16, url string, config_offset int64, [V1+] allocation nullable bytes
assignment:  version int16, error int16, leader string, leader_url string, config_offset int64,
             assignment [connector string, tasks [int32]], [V1+] revoked [...], delay int32

Task -1 stands for the Connector instance itself.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

__all__ = ["Assignment", "MemberMetadata", "PROTOCOLS", "decode_assignment", "decode_metadata",
           "encode_assignment", "encode_metadata"]

CONNECTOR_TASK = -1
NO_ERROR, CONFIG_MISMATCH = 0, 1
PROTOCOLS = {"default": 0, "compatible": 1, "sessioned": 2}

_I16, _I32, _I64 = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")

Work = dict[str, list[int]]  # connector -> task numbers (-1 = the connector itself)


class _W:
    def __init__(self) -> None:
        self.b = bytearray()

    def i16(self, v: int) -> _W:
        self.b += _I16.pack(v)
        return self

    def i32(self, v: int) -> _W:
        self.b += _I32.pack(v)
        return self

    def i64(self, v: int) -> _W:
        self.b += _I64.pack(v)
        return self

    def s(self, v: str) -> _W:
        data = v.encode()
        self.i16(len(data))
        self.b += data
        return self

    def nbytes(self, v: bytes | None) -> _W:
        if v is None:
            return self.i32(-1)
        self.i32(len(v))
        self.b += v
        return self

    def work(self, w: Work) -> _W:
        self.i32(len(w))
        for connector, tasks in w.items():
            self.s(connector).i32(len(tasks))
            for t in tasks:
                self.i32(t)
        return self


class _R:
    def __init__(self, data: bytes) -> None:
        self.d, self.p = data, 0

    def _u(self, st: struct.Struct) -> int:
        (v,) = st.unpack_from(self.d, self.p)
        self.p += st.size
        return v

    def i16(self) -> int:
        return self._u(_I16)

    def i32(self) -> int:
        return self._u(_I32)

    def i64(self) -> int:
        return self._u(_I64)

    def s(self) -> str:
        n = self.i16()
        v = self.d[self.p : self.p + max(n, 0)].decode()
        self.p += max(n, 0)
        return v

    def nbytes(self) -> bytes | None:
        n = self.i32()
        if n < 0:
            return None
        v = bytes(self.d[self.p : self.p + n])
        self.p += n
        return v

    def work(self) -> Work:
        out: Work = {}
        for _ in range(self.i32()):
            name = self.s()
            out[name] = [self.i32() for _ in range(self.i32())]
        return out

    @property
    def more(self) -> bool:
        return self.p < len(self.d)


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
    w = _W().i16(m.version).s(m.url).i64(m.config_offset)
    if m.version >= 1:
        w.nbytes(encode_assignment(m.allocation) if m.allocation is not None else None)
    return bytes(w.b)


def decode_metadata(data: bytes) -> MemberMetadata:
    r = _R(data)
    version = r.i16()
    url, offset = r.s(), r.i64()
    allocation = None
    if version >= 1 and r.more:
        raw = r.nbytes()
        allocation = decode_assignment(raw) if raw else None
    return MemberMetadata(url, offset, allocation, version)


def encode_assignment(a: Assignment) -> bytes:
    w = _W().i16(a.version).i16(a.error).s(a.leader).s(a.leader_url).i64(a.config_offset).work(a.assigned)
    if a.version >= 1:
        w.work(a.revoked).i32(a.delay_ms)
    return bytes(w.b)


def decode_assignment(data: bytes) -> Assignment:
    r = _R(data)
    version, error = r.i16(), r.i16()
    leader, leader_url, offset = r.s(), r.s(), r.i64()
    assigned = r.work()
    revoked: Work = {}
    delay = 0
    if version >= 1 and r.more:
        revoked = r.work()
        delay = r.i32()
    return Assignment(leader, leader_url, offset, assigned, revoked, delay, error, version)
