"""Kafka's primitive protocol types: a Writer that appends them and a Reader that takes them.

Fixed-size big-endian integers, signed zigzag varints (record fields) and unsigned varints
(flexible-version lengths and tags), strings and bytes in both the classic (int16/int32
length, -1 for null) and the compact (unsigned varint length + 1, 0 for null) forms, arrays,
tagged fields and UUIDs. Every binary format Headwater writes by hand (record batches, the
``__consumer_offsets`` records, Connect's group protocol, MirrorMaker's offset syncs and
checkpoints) is built from these, so there is one varint and one string codec in the tree.

A Reader that runs past its data raises DecodeError, never returns short data.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Iterable
from typing import TypeVar

__all__ = ["DecodeError", "Reader", "Writer", "read_uvarint", "read_varint", "write_uvarint", "write_varint",
           "zigzag"]

T = TypeVar("T")

_I8, _I16, _I32, _I64 = struct.Struct(">b"), struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")
_U32 = struct.Struct(">I")
_F64 = struct.Struct(">d")
_MASK64 = 0xFFFFFFFFFFFFFFFF


class DecodeError(ValueError):
    """The bytes do not hold what the format says they should (too short, or a bad length)."""


def zigzag(n: int) -> int:
    """Signed -> unsigned as Kafka's varints encode it (0, -1, 1, -2 ... -> 0, 1, 2, 3 ...)."""
    return ((n << 1) ^ (n >> 63)) & _MASK64


def write_uvarint(out: bytearray, v: int) -> None:
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def write_varint(out: bytearray, n: int) -> None:
    """A signed varint or varlong (zigzag): the same bytes for both when the value fits."""
    write_uvarint(out, zigzag(n))


def read_uvarint(buf: bytes | bytearray | memoryview, pos: int, max_bytes: int = 10) -> tuple[int, int]:
    """``(value, next position)`` of the unsigned varint at ``pos``."""
    shift = value = 0
    end = len(buf)
    for _ in range(max_bytes):
        if pos >= end:
            raise DecodeError("varint runs past the end of the data")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
    raise DecodeError(f"varint is longer than {max_bytes} bytes")


def read_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """``(value, next position)`` of the signed (zigzag) varint or varlong at ``pos``."""
    v, pos = read_uvarint(buf, pos)
    return (v >> 1) ^ -(v & 1), pos


class Writer:
    """Appends protocol types to one bytearray; each method returns the writer, so calls chain."""

    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def to_bytes(self) -> bytes:
        return bytes(self.buf)

    def raw(self, data: bytes | bytearray | memoryview) -> Writer:
        self.buf += data
        return self

    def int8(self, v: int) -> Writer:
        self.buf += _I8.pack(v)
        return self

    def boolean(self, v: bool) -> Writer:
        return self.int8(1 if v else 0)

    def int16(self, v: int) -> Writer:
        self.buf += _I16.pack(v)
        return self

    def int32(self, v: int) -> Writer:
        self.buf += _I32.pack(v)
        return self

    def uint32(self, v: int) -> Writer:
        self.buf += _U32.pack(v)
        return self

    def int64(self, v: int) -> Writer:
        self.buf += _I64.pack(v)
        return self

    def float64(self, v: float) -> Writer:
        self.buf += _F64.pack(v)
        return self

    def varint(self, v: int) -> Writer:
        write_varint(self.buf, v)
        return self

    def uvarint(self, v: int) -> Writer:
        write_uvarint(self.buf, v)
        return self

    def string(self, v: str | None) -> Writer:
        """int16 length (-1 for null), then UTF-8."""
        if v is None:
            return self.int16(-1)
        data = v.encode()
        return self.int16(len(data)).raw(data)

    def compact_string(self, v: str | None) -> Writer:
        """unsigned varint length + 1 (0 for null), then UTF-8."""
        if v is None:
            return self.uvarint(0)
        data = v.encode()
        return self.uvarint(len(data) + 1).raw(data)

    def bytes_(self, v: bytes | None) -> Writer:
        """int32 length (-1 for null), then the bytes."""
        if v is None:
            return self.int32(-1)
        return self.int32(len(v)).raw(v)

    def compact_bytes(self, v: bytes | None) -> Writer:
        if v is None:
            return self.uvarint(0)
        return self.uvarint(len(v) + 1).raw(v)

    def varint_bytes(self, v: bytes | None) -> Writer:
        """Signed varint length (-1 for null), then the bytes: a record's key, value and header fields."""
        if v is None:
            return self.varint(-1)
        return self.varint(len(v)).raw(v)

    def array(self, items: Iterable[T] | None, write: Callable[[Writer, T], object]) -> Writer:
        """int32 count (-1 for null), then each item through ``write(writer, item)``."""
        if items is None:
            return self.int32(-1)
        items = list(items)
        self.int32(len(items))
        for item in items:
            write(self, item)
        return self

    def compact_array(self, items: Iterable[T] | None, write: Callable[[Writer, T], object]) -> Writer:
        if items is None:
            return self.uvarint(0)
        items = list(items)
        self.uvarint(len(items) + 1)
        for item in items:
            write(self, item)
        return self

    def tagged_fields(self, fields: dict[int, bytes] | None = None) -> Writer:
        """Flexible versions' tagged fields: a count, then (tag, size, bytes) in ascending tag order."""
        fields = fields or {}
        self.uvarint(len(fields))
        for tag in sorted(fields):
            self.uvarint(tag).uvarint(len(fields[tag])).raw(fields[tag])
        return self

    def uuid(self, v: uuid.UUID) -> Writer:
        return self.raw(v.bytes)


class Reader:
    """Takes protocol types from ``data`` starting at ``pos``; raises DecodeError past the end."""

    __slots__ = ("data", "pos", "end")

    def __init__(self, data: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None) -> None:
        self.data = data
        self.pos = pos
        self.end = len(data) if end is None else end

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def at_end(self) -> bool:
        return self.pos >= self.end

    def raw(self, n: int) -> bytes:
        if n < 0 or self.pos + n > self.end:
            raise DecodeError(f"{n} bytes wanted at position {self.pos}, {self.end - self.pos} left")
        v = bytes(self.data[self.pos : self.pos + n])
        self.pos += n
        return v

    def _fixed(self, s: struct.Struct) -> int:
        if self.pos + s.size > self.end:
            raise DecodeError(f"{s.size}-byte field at position {self.pos}, {self.end - self.pos} bytes left")
        (v,) = s.unpack_from(self.data, self.pos)
        self.pos += s.size
        return v

    def int8(self) -> int:
        return self._fixed(_I8)

    def boolean(self) -> bool:
        return self.int8() != 0

    def int16(self) -> int:
        return self._fixed(_I16)

    def int32(self) -> int:
        return self._fixed(_I32)

    def uint32(self) -> int:
        return self._fixed(_U32)

    def int64(self) -> int:
        return self._fixed(_I64)

    def float64(self) -> float:
        if self.pos + 8 > self.end:
            raise DecodeError(f"8-byte field at position {self.pos}, {self.end - self.pos} bytes left")
        (v,) = _F64.unpack_from(self.data, self.pos)
        self.pos += 8
        return float(v)

    def varint(self) -> int:
        v, pos = read_varint(self.data, self.pos)
        if pos > self.end:
            raise DecodeError("varint runs past the end of the data")
        self.pos = pos
        return v

    def uvarint(self) -> int:
        v, pos = read_uvarint(self.data, self.pos)
        if pos > self.end:
            raise DecodeError("varint runs past the end of the data")
        self.pos = pos
        return v

    def _text(self, n: int) -> str:
        try:
            return self.raw(n).decode()
        except UnicodeDecodeError as exc:
            raise DecodeError(f"string is not UTF-8: {exc}") from None

    def string(self) -> str | None:
        n = self.int16()
        return None if n < 0 else self._text(n)

    def compact_string(self) -> str | None:
        n = self.uvarint()
        return None if n == 0 else self._text(n - 1)

    def bytes_(self) -> bytes | None:
        n = self.int32()
        return None if n < 0 else self.raw(n)

    def compact_bytes(self) -> bytes | None:
        n = self.uvarint()
        return None if n == 0 else self.raw(n - 1)

    def varint_bytes(self) -> bytes | None:
        n = self.varint()
        return None if n < 0 else self.raw(n)

    def array(self, read: Callable[[Reader], T]) -> list[T] | None:
        n = self.int32()
        return None if n < 0 else [read(self) for _ in range(n)]

    def compact_array(self, read: Callable[[Reader], T]) -> list[T] | None:
        n = self.uvarint()
        return None if n == 0 else [read(self) for _ in range(n - 1)]

    def tagged_fields(self) -> dict[int, bytes]:
        fields: dict[int, bytes] = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            fields[tag] = self.raw(self.uvarint())
        return fields

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self.raw(16))
