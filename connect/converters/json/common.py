"""What the JSON converter's parts share: messages, integer ranges, null handling, caches."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from headwater.connect.api.data import Schema, SchemaType
from headwater.connect.api.errors import DataException

from ...api.logical import (
    DATE_NAME,
    DECIMAL_NAME,
    TIME_NAME,
    TIMESTAMP_NAME,
)

ENVELOPE_ERROR = ("JsonConverter with schemas.enable requires \"schema\" and \"payload\" fields and may not contain "
                  "additional fields. If you are trying to deserialize plain JSON data, set schemas.enable=false in "
                  "your converter configuration.")
_SERIALIZE_ERROR = "Converting Kafka Connect data to byte[] failed due to serialization error: "
_DESERIALIZE_ERROR = "Converting byte[] to Kafka Connect data failed due to serialization error: "

Writer = Callable[[Any], Any]
Reader = Callable[[Any], Any]

_INT_RANGES = {
    SchemaType.INT8: (-(1 << 7), (1 << 7) - 1),
    SchemaType.INT16: (-(1 << 15), (1 << 15) - 1),
    SchemaType.INT32: (-(1 << 31), (1 << 31) - 1),
    SchemaType.INT64: (-(1 << 63), (1 << 63) - 1),
}
_BYTES_TYPES = (bytes, bytearray, memoryview)
_NONFINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_CONTAINERS = frozenset((dict, list, tuple))
_new_struct = object.__new__
_tuple_new = tuple.__new__  # SchemaAndValue(...) without the NamedTuple's Python-level __new__

try:  # the C encoder, built once; json.dumps would build a new one per call
    from _json import make_encoder as _c_make_encoder
except ImportError:  # pragma: no cover - CPython always has _json
    _c_make_encoder = None  # type: ignore[assignment, misc]

_json_str = json.encoder.encode_basestring  # the C version when available (ensure_ascii=False, like Jackson)
# What ``_json_str`` escapes (each one byte in UTF-8 text), but \n: UTF-8 text without these bytes, split at
# \n, is lines whose JSON strings are the lines between quotes. Found with ``bytes.translate(None, ...)``,
# which runs several times faster than a regex character class.
ESCAPED_BUT_NEWLINE = bytes(range(0x20)).replace(b"\n", b"") + b'"\\'


def _node_type(value: Any) -> str:
    """Jackson's JsonNodeType of a parsed JSON value (for error messages)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "BOOLEAN"
    if isinstance(value, int | float | Decimal):
        return "NUMBER"
    if isinstance(value, str):
        return "STRING"
    if isinstance(value, list):
        return "ARRAY"
    if isinstance(value, dict):
        return "OBJECT"
    return type(value).__name__


def _identity(value: Any) -> Any:
    return value


def _null_handling(inner: Callable[[Any], Any], default: Any, optional: bool,
                   null_error: str) -> Callable[[Any], Any]:
    """``inner`` for non-null values; null gives ``default`` when there is one (not None), stays null
    when ``optional``, and is a DataException(``null_error``) otherwise. Serves writers and readers."""
    if default is not None:
        def or_default(value: Any) -> Any:
            return default if value is None else inner(value)
        return or_default
    if optional:
        def optional_value(value: Any) -> Any:
            return None if value is None else inner(value)
        return optional_value

    def required(value: Any) -> Any:
        if value is None:
            raise DataException(null_error)
        return inner(value)
    return required


# -- struct fields: per field, the exact Python type a value already in its final form has, so the
# loop skips the field's writer/reader call for most fields (nulls, defaults, conversions and errors
# still go through it). Written integers always go through their writer, which checks the range.

_LOGICAL_NAMES = frozenset((DECIMAL_NAME, DATE_NAME, TIME_NAME, TIMESTAMP_NAME))
_FINAL_TYPES = {SchemaType.FLOAT32: float, SchemaType.FLOAT64: float, SchemaType.STRING: str,
                SchemaType.BOOLEAN: bool}
_FINAL_WHEN_READ = {**_FINAL_TYPES, **{t: int for t in _INT_RANGES}}  # written ints need a range check

_StructField = tuple[str, type | None, Callable[[Any], Any]]


def _struct_fields(schema: Schema, convert: list[Callable[[Any], Any]], reading: bool) -> tuple[_StructField, ...]:
    finals = _FINAL_WHEN_READ if reading else _FINAL_TYPES
    return tuple((f.name, None if f.schema.name in _LOGICAL_NAMES else finals.get(f.schema.type), fn)
                 for f, fn in zip(schema.fields, convert, strict=True))


def _bounded_put(cache: dict, key: Any, value: Any, size: int) -> None:
    if len(cache) >= size:
        try:
            del cache[next(iter(cache))]
        except (StopIteration, KeyError, RuntimeError):
            pass
    cache[key] = value


def _contains_decimal(schema: Schema | None) -> bool:
    if schema is None:
        return False
    if schema.name == DECIMAL_NAME:
        return True
    t = schema.type
    if t is SchemaType.STRUCT:
        return any(_contains_decimal(f.schema) for f in schema.fields)
    if t is SchemaType.ARRAY:
        return _contains_decimal(schema.value_schema)
    if t is SchemaType.MAP:
        return _contains_decimal(schema.key_schema) or _contains_decimal(schema.value_schema)
    return False
