"""Decoding of pgoutput, PostgreSQL's logical replication output (protocol version 1).

Each message is one ``bytes`` from the replication stream (after the 25-byte 'w' header) or one
row of ``pg_logical_slot_*_binary_changes``. Column values arrive in their text form; turning
them into Connect values is the type mapper's job, not this module's. Layouts: PostgreSQL's
"Logical Replication Message Formats".
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

from headwater.connect.api.errors import DataException

__all__ = [
    "Begin", "Column", "Commit", "Delete", "DecodeError", "Insert", "LogicalMessage", "Message", "Origin",
    "Relation", "Truncate", "TypeInfo", "Update", "UNCHANGED_TOAST", "decode", "lsn_text", "parse_lsn",
    "pg_timestamp",
]

#: A TOASTed column that an update left unchanged: its value is not in the message.
UNCHANGED_TOAST = object()
_PG_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
_PG_EPOCH_US = 946_684_800_000_000  # 2000-01-01 in microseconds since 1970-01-01


class DecodeError(DataException, ValueError):
    """A pgoutput message that does not follow the format (still a ValueError, as it was)."""


class Begin(NamedTuple):  # a tuple: the hot path makes one per message
    final_lsn: int
    commit_ts_us: int  # microseconds since 1970-01-01 UTC
    xid: int


class Commit(NamedTuple):  # a tuple: the hot path makes one per message
    flags: int
    commit_lsn: int
    end_lsn: int
    commit_ts_us: int


@dataclass(frozen=True, slots=True)
class Origin:
    lsn: int
    name: str


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type_oid: int
    type_modifier: int
    key: bool


@dataclass(frozen=True, slots=True)
class Relation:
    oid: int
    namespace: str
    name: str
    replica_identity: str  # d(efault), n(othing), f(ull), i(ndex)
    columns: tuple[Column, ...]


@dataclass(frozen=True, slots=True)
class TypeInfo:
    oid: int
    namespace: str
    name: str


Row = tuple[str | None | object, ...]  # text, None (SQL NULL) or UNCHANGED_TOAST, per column


class Insert(NamedTuple):  # a tuple: the hot path makes one per message
    relation_oid: int
    new: Row


class Update(NamedTuple):  # a tuple: the hot path makes one per message
    relation_oid: int
    old: Row | None  # the old key ('K', when the key changed) or row ('O', REPLICA IDENTITY FULL)
    old_is_key: bool
    new: Row


class Delete(NamedTuple):  # a tuple: the hot path makes one per message
    relation_oid: int
    old: Row
    old_is_key: bool


@dataclass(frozen=True, slots=True)
class Truncate:
    relation_oids: tuple[int, ...]
    cascade: bool
    restart_identity: bool


@dataclass(frozen=True, slots=True)
class LogicalMessage:
    transactional: bool
    lsn: int
    prefix: str
    content: bytes


Message = Begin | Commit | Origin | Relation | TypeInfo | Insert | Update | Delete | Truncate | LogicalMessage

_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")
_BEGIN = struct.Struct(">QqI")
_COMMIT = struct.Struct(">bQQq")


def pg_timestamp(us_since_2000: int) -> int:
    """A pgoutput timestamp as microseconds since 1970-01-01."""
    return us_since_2000 + _PG_EPOCH_US


def lsn_text(lsn: int) -> str:
    """``0/16B3748``: PostgreSQL's text form of an LSN."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def parse_lsn(text: str) -> int:
    high, _, low = text.partition("/")
    return (int(high, 16) << 32) | int(low, 16)


def as_datetime(us_since_1970: int) -> datetime:
    return _PG_EPOCH + timedelta(microseconds=us_since_1970 - _PG_EPOCH_US)


def _string(data: bytes, pos: int) -> tuple[str, int]:
    end = data.find(b"\0", pos)
    if end < 0:
        raise DecodeError(f"unterminated string at byte {pos}")
    return data[pos:end].decode("utf-8"), end + 1


def _tuple(data: bytes, pos: int) -> tuple[Row, int]:
    (count,) = _I16.unpack_from(data, pos)
    pos += 2
    values: list[str | None | object] = []
    for _ in range(count):
        kind = data[pos]
        pos += 1
        if kind == 0x74:  # 't': text
            (length,) = _I32.unpack_from(data, pos)
            pos += 4
            values.append(data[pos:pos + length].decode("utf-8"))
            pos += length
        elif kind == 0x6E:  # 'n': null
            values.append(None)
        elif kind == 0x75:  # 'u': unchanged TOAST value
            values.append(UNCHANGED_TOAST)
        else:
            raise DecodeError(f"unknown column kind {chr(kind)!r} at byte {pos - 1}")
    return tuple(values), pos


def decode(data: bytes) -> Message:
    """One pgoutput message."""
    if not data:
        raise DecodeError("empty message")
    kind = data[0]
    try:
        if kind == 0x42:  # 'B'
            final_lsn, ts, xid = _BEGIN.unpack_from(data, 1)
            return Begin(final_lsn, pg_timestamp(ts), xid)
        if kind == 0x43:  # 'C'
            flags, commit_lsn, end_lsn, ts = _COMMIT.unpack_from(data, 1)
            return Commit(flags, commit_lsn, end_lsn, pg_timestamp(ts))
        if kind == 0x49:  # 'I'
            (oid,) = _U32.unpack_from(data, 1)
            if data[5] != 0x4E:
                raise DecodeError("insert without 'N'")
            new, _ = _tuple(data, 6)
            return Insert(oid, new)
        if kind == 0x55:  # 'U'
            (oid,) = _U32.unpack_from(data, 1)
            pos, old, old_is_key = 5, None, False
            if data[pos] in (0x4B, 0x4F):  # 'K' | 'O'
                old_is_key = data[pos] == 0x4B
                old, pos = _tuple(data, pos + 1)
            if data[pos] != 0x4E:
                raise DecodeError("update without 'N'")
            new, _ = _tuple(data, pos + 1)
            return Update(oid, old, old_is_key, new)
        if kind == 0x44:  # 'D'
            (oid,) = _U32.unpack_from(data, 1)
            if data[5] not in (0x4B, 0x4F):
                raise DecodeError("delete without 'K' or 'O'")
            old, _ = _tuple(data, 6)
            return Delete(oid, old, data[5] == 0x4B)
        if kind == 0x52:  # 'R'
            (oid,) = _U32.unpack_from(data, 1)
            namespace, pos = _string(data, 5)
            name, pos = _string(data, pos)
            identity = chr(data[pos])
            (count,) = _I16.unpack_from(data, pos + 1)
            pos += 3
            columns = []
            for _ in range(count):
                flags = data[pos]
                column, pos = _string(data, pos + 1)
                type_oid, modifier = struct.unpack_from(">Ii", data, pos)
                pos += 8
                columns.append(Column(column, type_oid, modifier, bool(flags & 1)))
            return Relation(oid, namespace, name, identity, tuple(columns))
        if kind == 0x54:  # 'T'
            count, options = struct.unpack_from(">iB", data, 1)
            oids = struct.unpack_from(f">{count}I", data, 6)
            return Truncate(tuple(oids), bool(options & 1), bool(options & 2))
        if kind == 0x59:  # 'Y'
            (oid,) = _U32.unpack_from(data, 1)
            namespace, pos = _string(data, 5)
            name, _ = _string(data, pos)
            return TypeInfo(oid, namespace, name)
        if kind == 0x4F:  # 'O'
            (lsn,) = struct.unpack_from(">Q", data, 1)
            name, _ = _string(data, 9)
            return Origin(lsn, name)
        if kind == 0x4D:  # 'M'
            flags, lsn = struct.unpack_from(">BQ", data, 1)
            prefix, pos = _string(data, 10)
            (length,) = _I32.unpack_from(data, pos)
            return LogicalMessage(bool(flags & 1), lsn, prefix, bytes(data[pos + 4:pos + 4 + length]))
    except (struct.error, IndexError) as exc:
        raise DecodeError(f"truncated {chr(kind)!r} message ({len(data)} bytes): {exc}") from None
    raise DecodeError(f"unknown message type {chr(kind)!r}")
