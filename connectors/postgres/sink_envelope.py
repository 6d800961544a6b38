"""The Postgres sink's light read of a Debezium envelope in schemaless JSON (JsonConverter with
``schemas.enable=false``, as the CDC source writes it by default).

The sink's lane needs four things of an insert, read or update: ``op``, the ``after`` row, and the source
block's ``schema``, ``table`` and ``db`` (its table). JsonConverter builds every value of the envelope, the
source block's dozen included, which was a third of the sink process's work. This read decodes those four
with msgspec's typed decoder, which checks the rest of the text as JSON without building it (~1 us instead
of ~3 us per envelope).

It answers only where the converter would give the same values: anything else (a value msgspec refuses,
text that is not strict UTF-8, integers longer than Python's int limit, deep nesting, another op, an
``after`` that is not an object, a missing or non-object source block) answers None and the caller takes
the converter's path, which then converts or fails exactly as before. The tests compare both reads on
tricky envelopes (escapes, unicode, duplicate keys, numbers at the edges).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from typing import Any, Final

import msgspec

from headwater.connect.converters.json.converter import JsonConverter

__all__ = ["EnvelopeRead", "envelope_read"]

#: (the after row, (source.schema, source.table, source.db))
EnvelopeRead = tuple[dict[str, Any], tuple[Any, Any, Any]]

_ROW_OPS: Final = frozenset(("c", "r", "u"))


class _Source(msgspec.Struct, gc=False):
    schema: Any = None
    table: Any = None
    db: Any = None


class _Envelope(msgspec.Struct, gc=False):
    op: Any = None
    after: Any = None
    source: _Source | None | msgspec.UnsetType = msgspec.UNSET


_decode = msgspec.json.Decoder(_Envelope).decode


def envelope_read(converter: Any) -> Callable[[Any], EnvelopeRead | None] | None:
    """The light read for values of ``converter``: a function of a value's bytes answering an
    :data:`EnvelopeRead` or None ("convert it"), or None when the converter is not a plain schemaless
    JsonConverter (a subclass may read otherwise). Take one per batch: it keeps the interpreter's limits."""
    if type(converter) is not JsonConverter or converter.schemas_enable:
        return None
    digits = sys.get_int_max_str_digits()  # Python refuses integers with more digits (0: no limit); msgspec may not
    long_number = re.compile(rb"[0-9]{%d}" % (digits + 1)) if digits else None
    # Both parsers stop at the interpreter's recursion limit, counted from different frames: decline values that
    # could nest anywhere near it (a value of n bytes nests at most n / 2 deep; counting its brackets costs more
    # than reading it, so only long values are counted).
    openings = sys.getrecursionlimit() // 4
    shallow = 2 * openings

    def read(data: Any) -> EnvelopeRead | None:
        if type(data) is not bytes:
            return None
        if not data.isascii():
            try:  # the converter reads strict UTF-8 (else, through json.loads, surrogates too): msgspec does not
                data.decode()  # check the text of values it skips
            except UnicodeDecodeError:
                return None
        size = len(data)
        if size > shallow and data.count(b"{") + data.count(b"[") > openings:
            return None
        if long_number is not None and size > digits and long_number.search(data) is not None:
            return None
        try:
            envelope = _decode(data)
        except (msgspec.DecodeError, ValueError, RecursionError):  # (ValidationError is a DecodeError)
            return None
        op, after, source = envelope.op, envelope.after, envelope.source
        if type(after) is not dict or type(source) is not _Source or type(op) is not str or op not in _ROW_OPS:
            return None
        return after, (source.schema, source.table, source.db)

    return read
