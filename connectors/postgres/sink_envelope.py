"""The Postgres sink's light read of Debezium envelopes and keys in schemaless JSON (JsonConverter with
``schemas.enable=false``, as the CDC source writes them by default).

The sink's lane needs four things of an insert, read or update: ``op``, the ``after`` row, and the source
block's ``schema``, ``table`` and ``db`` (its table). JsonConverter builds every value of the envelope, the
source block's dozen included, which was a third of the sink process's work. This read decodes those four
with msgspec's typed decoder, which checks the rest of the text as JSON without building it (~1 us instead
of ~3 us per envelope). Record keys (primary.key.mode=record_key) are read whole by msgspec (~0.3 us, not 1).

It answers only where the converter would give the same values: anything else (a value msgspec refuses,
text that is not strict UTF-8, integers longer than Python's int limit, deep nesting, another op, an
``after`` that is not an object, a missing or non-object source block) answers None and the caller takes
the converter's path, which then converts or fails exactly as before. The tests compare both reads on
tricky envelopes (escapes, unicode, duplicate keys, numbers at the edges).
"""

from __future__ import annotations

import re
import sys
from typing import Any, Final

import msgspec

from headwater.connect.converters.json.converter import JsonConverter

__all__ = ["DECLINED", "EnvelopeRead", "LightJson"]

#: (the after row, (source.schema, source.table, source.db))
EnvelopeRead = tuple[dict[str, Any], tuple[Any, Any, Any]]

_ROW_OPS: Final = frozenset(("c", "r", "u"))
#: LightJson.value's answer for "convert it"
DECLINED: Final = object()


class _Source(msgspec.Struct, gc=False):
    schema: Any = None
    table: Any = None
    db: Any = None


class _Envelope(msgspec.Struct, gc=False):
    op: Any = None
    after: Any = None
    source: _Source | None | msgspec.UnsetType = msgspec.UNSET


_decode_envelope = msgspec.json.Decoder(_Envelope).decode
_decode_any = msgspec.json.Decoder().decode


class LightJson:
    """msgspec's reads of a plain schemaless JsonConverter's values, where they equal the converter's.
    Take one per batch: it keeps the interpreter's limits of the moment."""

    __slots__ = ("digits", "long_number", "openings", "shallow")

    @classmethod
    def of(cls, converter: Any) -> LightJson | None:
        """None when ``converter`` is not a plain schemaless JsonConverter (a subclass may read otherwise)."""
        return cls() if type(converter) is JsonConverter and not converter.schemas_enable else None

    def __init__(self) -> None:
        self.digits = sys.get_int_max_str_digits()  # Python refuses longer integers (0: no limit); msgspec may not
        self.long_number = re.compile(rb"[0-9]{%d}" % (self.digits + 1)) if self.digits else None
        # Both parsers stop at the interpreter's recursion limit, counted from different frames: values that
        # could nest anywhere near it are declined (n bytes nest at most n / 2 deep; counting brackets costs
        # more than reading, so only long values are counted).
        self.openings = sys.getrecursionlimit() // 4
        self.shallow = 2 * self.openings

    def readable(self, data: Any) -> bool:
        """Whether msgspec reads ``data`` as the converter does, wherever msgspec reads it at all."""
        if type(data) is not bytes:
            return False
        if not data.isascii():
            try:  # the converter reads strict UTF-8 (else, through json.loads, surrogates too): msgspec does not
                data.decode()  # check the text of values it skips
            except UnicodeDecodeError:
                return False
        size = len(data)
        if size > self.shallow and data.count(b"{") + data.count(b"[") > self.openings:
            return False
        return self.long_number is None or size <= self.digits or self.long_number.search(data) is None

    def envelope(self, data: Any) -> EnvelopeRead | None:
        """An insert, read or update envelope's after row and source (schema, table, db); None: convert it."""
        if not self.readable(data):
            return None
        try:
            envelope = _decode_envelope(data)
        except (msgspec.DecodeError, ValueError, RecursionError):  # (ValidationError is a DecodeError)
            return None
        op, after, source = envelope.op, envelope.after, envelope.source
        if type(after) is not dict or type(source) is not _Source or type(op) is not str or op not in _ROW_OPS:
            return None
        return after, (source.schema, source.table, source.db)

    def value(self, data: Any) -> Any:
        """The whole value (a record key), or DECLINED: convert it."""
        if not self.readable(data):
            return DECLINED
        try:
            return _decode_any(data)
        except (msgspec.DecodeError, ValueError, RecursionError):
            return DECLINED
