"""Lines in the value converter's wire form, a whole batch at a time: the file connectors' fast path
(the sink reads lines out of records, the source writes records from the lines it read).

A file connector's record is a line with a string schema. Under StringConverter (UTF-8) its bytes are
the line's UTF-8; under JsonConverter they are the converter's envelope for a string schema (nothing
with ``schemas.enable=false``) around the line as a JSON string, which for most lines is the line
between quotes. So a batch of such records becomes the sink file's bytes with a few passes over one
joined buffer (joins, a comparison, a look for bytes JSON escapes, an ASCII or UTF-8 check), no per-record work: the
records are checked as a whole to be exactly that shape, and a batch that is not (a null, another
schema, a line with an escape, invalid UTF-8, trailing whitespace) is left to the converter, which
gives the same bytes or the same error. tests/unit/test_file_encoded.py compares with the converters.
"""

from __future__ import annotations

from typing import Any

from headwater.connect.api.data import STRING_SCHEMA
from headwater.connect.converters import ByteArrayConverter, JsonConverter, StringConverter
from headwater.connect.converters.json.common import ESCAPED_BUT_NEWLINE

__all__ = ["LineWire", "keys_never_fail"]

CHUNK = 256
PIECE = 1 << 15  # bytes of lines the file source wraps at a time


def keys_never_fail(key_converter: Any) -> bool:
    """Whether ``key_converter`` reads any key bytes without an error (the file sink ignores keys, but
    the record path converts them, so with another converter every key must be null)."""
    return type(key_converter) in (StringConverter, ByteArrayConverter)


class LineWire:
    """The wire form of lines under one value converter: ``head`` + line + ``tail``, where the line
    needs no escaping (``json``) or is taken as it is (StringConverter)."""

    def __init__(self, head: bytes, tail: bytes, json: bool) -> None:
        self.head, self.tail, self.json = head, tail, json
        self.overhead = len(head) + len(tail)  # a record's bytes beyond its line's
        self._sep = tail + b"\n" + head  # a line's end, the newline and the next line's start
        self._escaped = ESCAPED_BUT_NEWLINE + b"\n"

    @classmethod
    def of(cls, converter: Any) -> LineWire | None:
        """For StringConverter in UTF-8 and JsonConverter (these classes, not subclasses); else None."""
        if type(converter) is StringConverter and converter.encoding == "utf-8":
            return cls(b"", b"", json=False)
        if type(converter) is JsonConverter:
            prefix, suffix = converter.envelope(STRING_SCHEMA)
            head, tail = (prefix + '"').encode(), ('"' + suffix).encode()
            if b"\n" not in head + tail:  # a schema's JSON has its newlines escaped; checked, not assumed
                return cls(head, tail, json=True)
        return None

    def values(self, data: bytes, end: int | None = None) -> list[bytes] | None:
        """The records of the lines in ``data[:end + 1]`` (``end``: the last newline's index, by default
        the last byte's), ASCII lines each ending in \n (the file source's common case), in this wire form:
        the lines themselves, or each between ``head`` and ``tail`` when none holds a byte JSON escapes
        (None when one does: the converter writes those). The bytes after ``end`` (a partial line, no
        newline in it) are not read, so the caller need not copy the complete lines out of its buffer."""
        size = len(data) - 1 if end is None else end
        if not self.json:
            lines = data.split(b"\n")
            lines.pop()  # what follows the last newline
            return lines
        # pieces of whole lines of about PIECE bytes: each pass then runs over data still in the CPU's cache,
        # and no buffer is big enough to be mapped afresh (a 1 MB chunk at once costs several times more)
        head, sep, tail = self.head, self._sep, self.tail
        out: list[bytes] = []
        at = 0
        while at <= size:
            stop = data.find(b"\n", at + PIECE, size)
            if stop < 0:
                stop = size
            piece = data[at:stop]
            if len(piece.translate(None, ESCAPED_BUT_NEWLINE)) != len(piece):
                return None
            out += (head + piece.replace(b"\n", sep) + tail).split(b"\n")
            at = stop + 1
        return out

    def lines(self, values: list[bytes | None]) -> bytes | None:
        """What the file sink writes for these values (each line followed by \\n), or None when some
        value is not a line in this wire form."""
        try:
            if self.json:
                # a few hundred records at a time: each pass then runs over data still in the CPU's cache
                parts = [self._lines(values[at:at + CHUNK]) for at in range(0, len(values), CHUNK)]
                if None in parts:
                    return None
                out = b"".join(parts)  # type: ignore[arg-type]
            else:
                out = b"\n".join([*values, b""])  # type: ignore[list-item]
        except TypeError:  # a null
            return None
        if not out.isascii():
            try:
                out.decode()  # the converters read UTF-8 strictly (JsonConverter) or with replacements
            except UnicodeDecodeError:
                return None
        return out

    def _lines(self, values: list[bytes | None]) -> bytes | None:
        head, tail = self.head, self.tail
        cut, end = len(head), -len(tail)
        if min(map(len, values)) < cut - end:  # type: ignore[arg-type]  # a null raises TypeError
            return None
        lines = [v[cut:end] for v in values]  # type: ignore[index]
        # each record is head + its line + tail: the records joined by \n, their lines by the separator,
        # are the same text (the pieces have the same lengths, so each lines up with its own)
        joined = b"\n".join(values)  # type: ignore[arg-type]
        if not (joined.startswith(head) and joined.endswith(tail) and
                joined[cut:len(joined) + end] == self._sep.join(lines)):
            return None
        lines.append(b"")
        out = b"\n".join(lines)
        # no line holds a newline or anything JSON escapes: only the newline after each goes
        if len(out.translate(None, self._escaped)) != len(out) - len(values):
            return None
        return out
