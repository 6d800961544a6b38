"""A port of the parts of Kafka Connect's ``Values`` that SimpleHeaderConverter uses.

``convert_to_string`` is ``Values.convertToString``: numbers and booleans in their Java
string form, strings as they are, bytes as base64, lists/maps/structs in a JSON-like form
(``[1,2]``, ``{"a":1}``), dates and times in ISO-8601 UTC.

``parse_string`` is ``Values.parseString``: it infers the schema back - booleans, the
smallest integer type that fits, floats, decimals, ISO dates/times/timestamps, arrays and
maps (with a common element schema) - and falls back to the string itself.
"""

from __future__ import annotations

import binascii
import dataclasses
import datetime as _dt
import math
import re
from decimal import Decimal, InvalidOperation
from typing import Any

from headwater.connect.api.converters import SchemaAndValue
from headwater.connect.api.data import (
    BOOLEAN_SCHEMA,
    FLOAT32_SCHEMA,
    FLOAT64_SCHEMA,
    INT8_SCHEMA,
    INT16_SCHEMA,
    INT32_SCHEMA,
    INT64_SCHEMA,
    STRING_SCHEMA,
    Schema,
    SchemaType,
    Struct,
    array_schema,
    java_double_str,
    map_schema,
)
from headwater.connect.api.errors import DataException

from .logical import (
    DATE_NAME,
    DATE_SCHEMA,
    DECIMAL_NAME,
    TIME_NAME,
    TIME_SCHEMA,
    TIMESTAMP_NAME,
    TIMESTAMP_SCHEMA,
    UTC,
    decimal_schema,
)

__all__ = ["convert_to_string", "parse_string"]

_TEMPORAL_NAMES = frozenset((DATE_NAME, TIME_NAME, TIMESTAMP_NAME))
_DELIMITERS = frozenset(':,{}[]"')
_JAVA_WS = "".join(map(chr, range(33)))  # String.trim() removes every char <= U+0020
_MAYBE_NOT_A_STRING = frozenset("[{+-0123456789ntf")
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\Z")
_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})\Z")
_TIME = re.compile(r"(\d{2}):(\d{2}):(\d{2})\.(\d{3})Z\Z")
_TIMESTAMP = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{3})Z\Z")
_UNESCAPE = re.compile(r"\\(.)", re.DOTALL)
_FLOAT32_OVERFLOW = 3.4028235677973366e38  # FLT_MAX + half an ulp: Java's floatValue() rounds to infinity here
_INTEGER_SCHEMAS = (
    (INT8_SCHEMA, -(1 << 7), (1 << 7) - 1),
    (INT16_SCHEMA, -(1 << 15), (1 << 15) - 1),
    (INT32_SCHEMA, -(1 << 31), (1 << 31) - 1),
    (INT64_SCHEMA, -(1 << 63), (1 << 63) - 1),
)
_NUMERIC_RANK = {SchemaType.INT8: 0, SchemaType.INT16: 1, SchemaType.INT32: 2, SchemaType.INT64: 3,
                 SchemaType.FLOAT32: 4, SchemaType.FLOAT64: 5}
_NULL = SchemaAndValue(None, None)
_TRUE = SchemaAndValue(BOOLEAN_SCHEMA, True)
_FALSE = SchemaAndValue(BOOLEAN_SCHEMA, False)


def b64encode(data: bytes | bytearray | memoryview) -> str:
    """Base64 without a newline: how Kafka Connect writes bytes as text."""
    return binascii.b2a_base64(data, newline=False).decode("ascii")


# -- to string --------------------------------------------------------------------------------------

def convert_to_string(schema: Schema | None, value: Any) -> str | None:
    if value is None:
        return None
    out: list[str] = []
    _append(out, value, False)
    return "".join(out)


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _append(out: list[str], value: Any, embedded: bool) -> None:
    if value is None:
        out.append("null")
    elif value is True or value is False:
        out.append("true" if value else "false")
    elif isinstance(value, str):
        out.append(f'"{_escape(value)}"' if embedded else value)
    elif isinstance(value, float):
        out.append(java_double_str(value))
    elif isinstance(value, int | Decimal):
        out.append(str(value))
    elif isinstance(value, bytes | bytearray | memoryview):
        encoded = b64encode(value)
        out.append(f'"{encoded}"' if embedded else encoded)
    elif isinstance(value, list | tuple):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _append(out, item, True)
        out.append("]")
    elif isinstance(value, dict):
        out.append("{")
        for i, (k, v) in enumerate(value.items()):
            if i:
                out.append(",")
            _append(out, k, True)
            out.append(":")
            _append(out, v, True)
        out.append("}")
    elif isinstance(value, Struct):
        out.append("{")
        for i, f in enumerate(value.schema.fields):
            if i:
                out.append(",")
            _append(out, f.name, True)
            out.append(":")
            _append(out, value.get(f.name), True)
        out.append("}")
    elif isinstance(value, _dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(UTC)
        out.append(value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z")
    elif isinstance(value, _dt.date):
        out.append(value.strftime("%Y-%m-%d") if value.year >= 1000 else f"{value.year:04d}-{value.month:02d}-"
                   f"{value.day:02d}")
    elif isinstance(value, _dt.time):
        out.append(f"{value.hour:02d}:{value.minute:02d}:{value.second:02d}.{value.microsecond // 1000:03d}Z")
    else:
        raise DataException(f"Failed to serialize unexpected value type {type(value).__name__}: {value!r}")


# -- from string ------------------------------------------------------------------------------------

def _trim(text: str) -> str:
    return text.strip(_JAVA_WS)


class _Parser:
    """Kafka's Values.Parser: tokens split at unescaped ``: , { } [ ] "``, each delimiter a token."""

    __slots__ = ("original", "pos", "next_token", "previous_token")

    def __init__(self, original: str) -> None:
        self.original = original
        self.pos = 0
        self.next_token: str | None = None
        self.previous_token: str | None = None

    def mark(self) -> int:
        return self.pos - (len(self.next_token) if self.next_token is not None else 0)

    def rewind_to(self, position: int) -> None:
        self.pos = position
        self.next_token = None
        self.previous_token = None

    def has_next(self) -> bool:
        return self.next_token is not None or self.pos < len(self.original)

    def rest_is_blank(self) -> bool:
        pending = self.next_token or ""
        return not _trim(pending) and not _trim(self.original[self.pos:])

    def next(self) -> str:
        if self.next_token is not None:
            self.previous_token, self.next_token = self.next_token, None
        else:
            self.previous_token = self._consume()
        return self.previous_token

    def next_n(self, n: int) -> str | None:
        start = self.mark()
        for _ in range(n):
            if not self.has_next():
                self.rewind_to(start)
                return None
            self.next()
        return self.original[start:self.pos]

    def _consume(self) -> str:
        text, start = self.original, self.pos
        i, end, escaped = start, len(text), False
        while i < end:
            c = text[i]
            if c == "\\":
                escaped = not escaped
            elif c in _DELIMITERS:
                if not escaped:
                    if start < i:
                        self.pos = i
                        return text[start:i]
                    self.pos = i + 1
                    return c
                escaped = False
            else:
                escaped = False
            i += 1
        self.pos = end
        return text[start:end]

    def can_consume(self, expected: str, ignore_whitespace: bool = True) -> bool:
        if self.next_token is None:
            if not self.has_next():
                return False
            self.next_token = self._consume()
        if ignore_whitespace:
            while not _trim(self.next_token) and self.pos < len(self.original):
                self.next_token = self._consume()
            matched = _trim(self.next_token) == expected
        else:
            matched = self.next_token == expected
        if matched:
            self.next_token = None
        return matched


def parse_string(value: str | None) -> SchemaAndValue:
    if value is None:
        return _NULL
    if not value:
        return SchemaAndValue(STRING_SCHEMA, value)
    # shortcuts to what the parser would conclude: text that cannot be anything but a string, and a
    # lone number (which contains no delimiter and cannot be a date or time)
    first = value.lstrip(_JAVA_WS)[:1]
    if first and first not in _MAYBE_NOT_A_STRING:
        return SchemaAndValue(STRING_SCHEMA, value)
    if first != "n" and first != "t" and first != "f":
        token = _trim(value)
        if _NUMBER.match(token):
            return _parse_number(token)  # type: ignore[return-value]
    parser = _Parser(value)
    result = _parse(parser, False)
    if result is None:
        return _NULL
    if not parser.rest_is_blank():  # e.g. "1,2" or "[1] x": the whole text is a string
        return SchemaAndValue(STRING_SCHEMA, value)
    return result


def _single_token_literal(parser: _Parser, embedded: bool, literal: str) -> bool:
    start = parser.mark()
    if parser.can_consume(literal) and (embedded or not parser.has_next()):
        return True
    parser.rewind_to(start)
    return False


def _parse(parser: _Parser, embedded: bool) -> SchemaAndValue | None:
    if not parser.has_next():
        return None
    if embedded and parser.can_consume('"'):
        parts = []
        while parser.has_next():
            if parser.can_consume('"', False):
                break
            parts.append(parser.next())
        content = _UNESCAPE.sub(r"\1", "".join(parts))
        parsed = parse_string(content)
        if parsed.schema is not None and parsed.schema.name in _TEMPORAL_NAMES:
            return parsed
        return SchemaAndValue(STRING_SCHEMA, content)

    if _single_token_literal(parser, embedded, "null"):
        return None
    if _single_token_literal(parser, embedded, "true"):
        return _TRUE
    if _single_token_literal(parser, embedded, "false"):
        return _FALSE

    start = parser.mark()
    try:
        if parser.can_consume("["):
            return _parse_array(parser)
        if parser.can_consume("{"):
            return _parse_map(parser)
    except DataException:
        parser.rewind_to(start)

    token = parser.next()
    if not _trim(token):
        return SchemaAndValue(STRING_SCHEMA, token)
    token = _trim(token)
    first = token[0]
    is_digit = "0" <= first <= "9"
    if is_digit:
        # a time or timestamp is split into 5 tokens at its unescaped colons
        position = parser.mark()
        remainder = parser.next_n(4)
        if remainder is not None:
            temporal = _parse_temporal(token + remainder)
            if temporal is not None:
                return temporal
        parser.rewind_to(position)
        temporal = _parse_temporal(token)
        if temporal is not None:
            return temporal
    if is_digit or first in "+-":
        number = _parse_number(token)
        if number is not None:
            return number
    if embedded:
        raise DataException("Failed to parse embedded value")
    return SchemaAndValue(STRING_SCHEMA, parser.original)


def _parse_array(parser: _Parser) -> SchemaAndValue:
    result: list[Any] = []
    element_schema: Schema | None = None
    has_null = False
    while parser.has_next():
        if parser.can_consume("]"):
            if element_schema is None:
                return SchemaAndValue(Schema(SchemaType.ARRAY, True), result)  # every element is null
            if has_null and not element_schema.optional:
                element_schema = dataclasses.replace(element_schema, optional=True)
            return SchemaAndValue(array_schema(element_schema), [_convert_to(element_schema, v) for v in result])
        if parser.can_consume(","):
            raise DataException(f"Unable to parse an empty array element: {parser.original}")
        element = _parse(parser, True)
        element_schema = _common_schema(element_schema, element)
        has_null = has_null or element is None
        result.append(element.value if element is not None else None)
        current = parser.mark()
        if parser.can_consume("]"):
            parser.rewind_to(current)
        elif not parser.can_consume(","):
            raise DataException("Array elements missing ',' delimiter")
    if parser.previous_token == ",":
        raise DataException(f"Array is missing element after ',': {parser.original}")
    raise DataException(f"Array is missing terminating ']': {parser.original}")


def _parse_map(parser: _Parser) -> SchemaAndValue:
    result: dict[Any, Any] = {}
    key_schema: Schema | None = None
    value_schema: Schema | None = None
    has_null = False
    while parser.has_next():
        if parser.can_consume("}"):
            if key_schema is None:
                return SchemaAndValue(Schema(SchemaType.MAP, True), result)
            if value_schema is None:
                schema = Schema(SchemaType.MAP, key_schema=key_schema, value_schema=None)
                return SchemaAndValue(schema, {_convert_to(key_schema, k): v for k, v in result.items()})
            if has_null and not value_schema.optional:
                value_schema = dataclasses.replace(value_schema, optional=True)
            aligned = {_convert_to(key_schema, k): _convert_to(value_schema, v) for k, v in result.items()}
            return SchemaAndValue(map_schema(key_schema, value_schema), aligned)
        if parser.can_consume(","):
            raise DataException(f"Unable to parse a map entry with no key or value: {parser.original}")
        key = _parse(parser, True)
        if key is None or key.value is None:
            raise DataException(f"Map entry may not have a null key: {parser.original}")
        if not parser.can_consume(":"):
            raise DataException(f"Map entry is missing ':' at {parser.pos} in {parser.original}")
        value = _parse(parser, True)
        try:
            result[key.value] = value.value if value is not None else None
        except TypeError as exc:  # a list or map as a key: not hashable in Python
            raise DataException(f"Map key is not hashable: {key.value!r}") from exc
        parser.can_consume(",")
        key_schema = _common_schema(key_schema, key)
        value_schema = _common_schema(value_schema, value)
        has_null = has_null or value is None
    if parser.previous_token == ",":
        raise DataException(f"Map is missing element after ',': {parser.original}")
    raise DataException(f"Map is missing terminating '}}': {parser.original}")


def _common_schema(previous: Schema | None, latest: SchemaAndValue | None) -> Schema | None:
    if latest is None:
        return previous
    new = latest.schema
    if previous is None or new is None:
        return new
    if previous.type is not new.type:
        a, b = _NUMERIC_RANK.get(previous.type), _NUMERIC_RANK.get(new.type)
        if a is None or b is None:
            return None
        return previous if a > b else new
    if previous.optional == new.optional:
        return previous if previous.optional else new
    return previous if previous == new else None


def _convert_to(schema: Schema, value: Any) -> Any:
    """The part of Values.convertTo that aligning parsed elements with their common schema needs."""
    if value is None:
        return None
    t = schema.type
    if schema.name == DECIMAL_NAME:
        if isinstance(value, Decimal):
            return value
        if isinstance(value, int | float) and not isinstance(value, bool):
            return Decimal(repr(float(value))) if isinstance(value, float) else Decimal(value)
    elif schema.name in _TEMPORAL_NAMES:
        if isinstance(value, _dt.date | _dt.time):
            return value
    elif t in (SchemaType.INT8, SchemaType.INT16, SchemaType.INT32, SchemaType.INT64):
        if isinstance(value, int | float | Decimal) and not isinstance(value, bool):
            return int(value)
    elif t in (SchemaType.FLOAT32, SchemaType.FLOAT64):
        if isinstance(value, int | float | Decimal) and not isinstance(value, bool):
            return float(value)
    elif t is SchemaType.STRING:
        return convert_to_string(None, value)
    elif t is SchemaType.BOOLEAN:
        if isinstance(value, bool):
            return value
    elif t is SchemaType.ARRAY:
        if isinstance(value, list):
            return value
    elif t is SchemaType.MAP:
        if isinstance(value, dict):
            return value
    raise DataException(f"Unable to convert {value!r} ({type(value).__name__}) to {t.name}")


def _parse_number(token: str) -> SchemaAndValue | None:
    if not _NUMBER.match(token):
        return None
    try:
        number = Decimal(token)
    except InvalidOperation:  # pragma: no cover - the pattern only lets numbers through
        return None
    if number.adjusted() < 19 and number == number.to_integral_value():
        integer = int(number)
        for schema, lo, hi in _INTEGER_SCHEMAS:
            if lo <= integer <= hi:
                return SchemaAndValue(schema, integer)
    scale = -int(number.as_tuple().exponent)  # finite: the pattern lets only numbers through
    as_float = float(number)
    if scale != 0:
        if abs(as_float) < _FLOAT32_OVERFLOW:
            return SchemaAndValue(FLOAT32_SCHEMA, as_float)
        if not math.isinf(as_float):
            return SchemaAndValue(FLOAT64_SCHEMA, as_float)
    return SchemaAndValue(decimal_schema(scale), number)


def _parse_temporal(token: str) -> SchemaAndValue | None:
    token = token.replace("\\:", ":")
    try:
        if len(token) == 13:
            m = _TIME.match(token)
            if m:
                h, mi, s, ms = map(int, m.groups())
                return SchemaAndValue(TIME_SCHEMA, _dt.time(h, mi, s, ms * 1000))
        elif len(token) == 24:
            m = _TIMESTAMP.match(token)
            if m:
                y, mo, d, h, mi, s, ms = map(int, m.groups())
                return SchemaAndValue(TIMESTAMP_SCHEMA, _dt.datetime(y, mo, d, h, mi, s, ms * 1000, tzinfo=UTC))
        elif len(token) == 10:
            m = _DATE.match(token)
            if m:
                return SchemaAndValue(DATE_SCHEMA, _dt.date(*map(int, m.groups())))
    except ValueError:  # 2024-13-45 and the like
        return None
    return None
