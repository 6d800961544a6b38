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
from typing import Any, Final

import msgspec

from headwater.connect.converters.json.converter import JsonConverter

__all__ = ["EnvelopeRead", "envelope_read"]

#: (the after row, (source.schema, source.table, source.db))
EnvelopeRead = tuple[dict[str, Any], tuple[Any, Any, Any]]

_ROW_OPS: Final = frozenset(("c", "r", "u"))
#: at most this many '{' and '[' in a value: far from the recursion limit either parser has (Python's
#: scanner counts its depth against the interpreter's recursion limit, msgspec has its own)
_MAX_OPENINGS: Final = 200


class _Source(msgspec.Struct, gc=False):
    schema: Any = None
    table: Any = None
    db: Any = None


class _Envelope(msgspec.Struct, gc=False):
    op: Any = None
    after: Any = None
    source: _Source | None | msgspec.UnsetType = msgspec.UNSET


_decode = msgspec.json.Decoder(_Envelope).decode
_long_numbers: dict[int, re.Pattern[bytes]] = {}


def envelope_read(converter: Any) -> Any:
    """The light read for values of ``converter``: a function of a value's bytes answering an
    :data:`EnvelopeRead` or None ("convert it"), or None when the converter is not a plain schemaless
    JsonConverter (a subclass may read otherwise)."""
    if type(converter) is not JsonConverter or converter.schemas_enable:
        return None
    return _read


def _read(data: Any) -> EnvelopeRead | None:
    if type(data) is not bytes:
        return None
    if not data.isascii():
        try:  # the converter reads strict UTF-8 (else, through json.loads, surrogates too): msgspec does not
            data.decode()  # check the text of values it skips
        except UnicodeDecodeError:
            return None
    limit = sys.get_int_max_str_digits()
    if limit and len(data) > limit and _long_number(limit).search(data) is not None:
        return None  # Python refuses integers with more digits; msgspec may not
    if data.count(b"{") + data.count(b"[") > _MAX_OPENINGS:
        return None
    try:
        envelope = _decode(data)
    except (msgspec.DecodeError, ValueError, RecursionError):  # (ValidationError is a DecodeError)
        return None
    op, after, source = envelope.op, envelope.after, envelope.source
    if type(after) is not dict or type(source) is not _Source or type(op) is not str or op not in _ROW_OPS:
        return None
    return after, (source.schema, source.table, source.db)


def _long_number(limit: int) -> re.Pattern[bytes]:
    pattern = _long_numbers.get(limit)
    if pattern is None:
        pattern = _long_numbers[limit] = re.compile(rb"[0-9]{%d}" % (limit + 1))
    return pattern
