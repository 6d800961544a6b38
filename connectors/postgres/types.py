"""PostgreSQL column types as Debezium maps them: a Connect schema per column and a converter from
the column's text form (what pgoutput and a text-mode SELECT give) to the Connect value.

An unknown type arrives as its text form, never as a crash.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from headwater.connect.api.data import Schema, SchemaBuilder, SchemaType, array_schema
from headwater.connect.api.logical import DATE_NAME, DECIMAL_NAME, TIME_NAME, TIMESTAMP_NAME

__all__ = ["ColumnType", "PgType", "column_type", "parse_array"]

Convert = Callable[[str], Any]

# Built-in type OIDs (pg_type.dat).
BOOL, BYTEA, INT8, INT2, INT4, TEXT, OID, JSON_, FLOAT4, FLOAT8 = 16, 17, 20, 21, 23, 25, 26, 114, 700, 701
BPCHAR, VARCHAR, DATE, TIME, TIMESTAMP, TIMESTAMPTZ, INTERVAL, TIMETZ = 1042, 1043, 1082, 1083, 1114, 1184, 1186, 1266
NUMERIC, UUID, JSONB, NAME, CHAR = 1700, 2950, 3802, 19, 18

_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_TZ = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_DAYS_PER_MONTH = 365.25 / 12  # Debezium's MicroDuration.DAYS_PER_MONTH_AVG


@dataclass(frozen=True)
class PgType:
    """What pg_type says of a type that is not built in: its name, kind (e: enum, b: base, ...),
    element type (arrays) and, for enums, the labels."""

    oid: int
    name: str
    kind: str = "b"
    element: int = 0  # arrays only (points and other fixed-length types have a typelem too)
    labels: tuple[str, ...] = ()


@dataclass(frozen=True)
class ColumnType:
    schema: Schema  # optional; the caller makes key columns required
    convert: Convert  # text form -> Connect value
    # What a NOT NULL column without a value takes (a delete's or key change's old key leaves the other
    # columns out): Debezium's fallback for the type (JdbcValueConverters / PostgresValueConverter
    # ``convertValue(..., fallback, ...)``), a value valid for ``schema``.
    zero: Any = ""


def _schema(type_: SchemaType, name: str | None = None, version: int | None = None,
            params: dict[str, str] | None = None) -> Schema:
    return Schema(type_, True, name=name, version=version, parameters=tuple(params.items()) if params else None)


# -- converters of text forms ------------------------------------------------------------------------


def _bool(text: str) -> bool:
    return text in ("t", "true")


def _bytea(text: str) -> bytes:
    if text.startswith("\\x"):
        return bytes.fromhex(text[2:])
    return text.encode("latin-1").decode("unicode_escape").encode("latin-1")  # bytea_output = escape


def _date_days(text: str) -> int:
    return (dt.date.fromisoformat(_bc(text)) - _EPOCH_DATE).days


def _bc(text: str) -> str:
    if text.endswith(" BC"):
        raise ValueError(f"dates before year 1 are not supported: {text}")
    return text


def _time_us(text: str) -> int:
    if text == "24:00:00":
        return 86_400_000_000
    t = dt.time.fromisoformat(text)
    return ((t.hour * 60 + t.minute) * 60 + t.second) * 1_000_000 + t.microsecond


def _timestamp_us(text: str) -> int:
    if text in ("infinity", "-infinity"):
        return 9223372036825200000 if text == "infinity" else -9223372036832400000  # Debezium's markers
    d = dt.datetime.fromisoformat(_bc(text))
    delta = d - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _zoned(text: str) -> str:
    """timestamptz text (in the session's TimeZone) as Debezium's ZonedTimestamp: ISO-8601 in UTC."""
    if text in ("infinity", "-infinity"):
        return text
    d = dt.datetime.fromisoformat(_bc(text)).astimezone(dt.UTC)
    base = d.strftime("%Y-%m-%dT%H:%M:%S")
    return base + (f".{d.microsecond:06d}".rstrip("0") if d.microsecond else "") + "Z"


def _zoned_time(text: str) -> str:
    m = re.fullmatch(r"(\d\d:\d\d:\d\d(?:\.\d+)?)([+-]\d\d)(?::?(\d\d))?", text)
    if m is None:
        return text
    t = dt.datetime.combine(_EPOCH_DATE, dt.time.fromisoformat(m.group(1)))
    offset = dt.timedelta(hours=int(m.group(2)), minutes=int(m.group(3) or 0) * (1 if m.group(2)[0] == "+" else -1))
    u = (t - offset).time()
    return u.strftime("%H:%M:%S") + (f".{u.microsecond:06d}".rstrip("0") if u.microsecond else "") + "Z"


_INTERVAL_PART = re.compile(r"(-?\d+) (year|mon|day)s?")
_INTERVAL_TIME = re.compile(r"(-)?(\d+):(\d\d):(\d\d)(?:\.(\d+))?")


def _interval_us(text: str) -> int:
    """``1 year 2 mons 3 days 04:05:06.5`` (IntervalStyle postgres) as Debezium's MicroDuration."""
    years = months = days = 0
    for amount, unit in _INTERVAL_PART.findall(text):
        if unit == "year":
            years = int(amount)
        elif unit == "mon":
            months = int(amount)
        else:
            days = int(amount)
    micros = 0
    m = _INTERVAL_TIME.search(text)
    if m is not None:
        micros = ((int(m.group(2)) * 60 + int(m.group(3))) * 60 + int(m.group(4))) * 1_000_000
        micros += int((m.group(5) or "0").ljust(6, "0")[:6])
        if m.group(1):
            micros = -micros
    total_days = (years * 12 + months) * _DAYS_PER_MONTH + days
    return round(total_days * 86_400_000_000) + micros


def _decimal(text: str) -> Decimal | None:
    try:
        value = Decimal(text)
    except InvalidOperation:
        return None
    return value if value.is_finite() else None  # NaN and infinities have no Decimal form in Connect


def _variable_scale(schema: Schema) -> Convert:
    def convert(text: str) -> Any:
        from headwater.connect.api.data import Struct
        from headwater.connect.api.logical import decimal_to_bytes

        value = _decimal(text)
        if value is None:
            return None
        scale = max(0, -int(value.as_tuple().exponent))
        return Struct(schema, {"scale": scale, "value": decimal_to_bytes(value, scale)})

    return convert


# -- arrays ------------------------------------------------------------------------------------------


def parse_array(text: str) -> list[str | None]:
    """The elements of a one-dimensional array's text form (``{1,NULL,"a b"}``), unquoted."""
    if not (text.startswith("{") and text.endswith("}")):
        if "=" in text and text.startswith("["):  # explicit bounds: [0:1]={...}
            return parse_array(text[text.index("=") + 1:])
        raise ValueError(f"not an array: {text!r}")
    out: list[str | None] = []
    i, n, body = 0, len(text) - 1, text
    i = 1
    if n == 1:
        return out
    while i < n:
        if body[i] == '"':
            i += 1
            chunk = []
            while body[i] != '"':
                if body[i] == "\\":
                    i += 1
                chunk.append(body[i])
                i += 1
            out.append("".join(chunk))
            i += 1
        elif body[i] == "{":
            raise ValueError("multi-dimensional arrays are not supported")
        else:
            end = i
            while end < n and body[end] != ",":
                end += 1
            item = body[i:end].strip()
            out.append(None if item == "NULL" else item)
            i = end
        if i < n and body[i] == ",":
            i += 1
    return out


# -- the mapping -------------------------------------------------------------------------------------


def _precision_scale(modifier: int) -> tuple[int, int] | None:
    if modifier < 4:
        return None  # unconstrained NUMERIC
    value = modifier - 4
    return (value >> 16) & 0xFFFF, value & 0xFFFF


def _fraction_digits(modifier: int) -> int:
    return 6 if modifier < 0 else modifier


def column_type(oid: int, modifier: int, decimal_mode: str = "precise", time_mode: str = "adaptive",
                custom: PgType | None = None, element_of: Callable[[int], ColumnType] | None = None,
                optional: bool = True) -> ColumnType:
    """The Connect schema (optional) and text converter of a column of type ``oid``. ``custom`` is
    pg_type's word on a type that is not built in (enums, domains, arrays of them). ``optional`` False (a
    NOT NULL column): a struct value (VariableScaleDecimal) is made with the required schema its field has."""
    text = ColumnType(_schema(SchemaType.STRING), str)
    if oid in (INT2,):
        return ColumnType(_schema(SchemaType.INT16), int, 0)
    if oid == INT4:
        return ColumnType(_schema(SchemaType.INT32), int, 0)
    if oid in (INT8, OID):
        return ColumnType(_schema(SchemaType.INT64), int, 0)
    if oid == FLOAT4:
        return ColumnType(_schema(SchemaType.FLOAT32), float, 0.0)
    if oid == FLOAT8:
        return ColumnType(_schema(SchemaType.FLOAT64), float, 0.0)
    if oid == BOOL:
        return ColumnType(_schema(SchemaType.BOOLEAN), _bool, False)
    if oid in (TEXT, VARCHAR, BPCHAR, NAME, CHAR):
        return text
    if oid == BYTEA:
        return ColumnType(_schema(SchemaType.BYTES), _bytea, b"")
    if oid == NUMERIC:
        ps = _precision_scale(modifier)
        zero = Decimal(0).scaleb(-ps[1]) if ps is not None else Decimal(0)  # Debezium: ZERO at the column's scale
        if decimal_mode == "double":
            return ColumnType(_schema(SchemaType.FLOAT64), lambda t: float(t), 0.0)
        if decimal_mode == "string":
            return ColumnType(text.schema, str, f"{zero:f}")
        if ps is None:
            builder = SchemaBuilder.struct().name("io.debezium.data.VariableScaleDecimal")
            vs = ((builder.optional() if optional else builder).doc("Variable scaled decimal")
                  .field("scale", Schema(SchemaType.INT32)).field("value", Schema(SchemaType.BYTES)).build())
            convert = _variable_scale(vs)
            return ColumnType(vs, convert, convert("0"))
        precision, scale = ps
        schema = _schema(SchemaType.BYTES, DECIMAL_NAME, 1,
                         {"scale": str(scale), "connect.decimal.precision": str(precision)})
        return ColumnType(schema, _decimal, zero)
    if oid == DATE:
        name = DATE_NAME if time_mode == "connect" else "io.debezium.time.Date"
        return ColumnType(_schema(SchemaType.INT32, name, 1), _date_days, 0)  # the epoch, as Debezium's
    if oid == TIME:
        digits = _fraction_digits(modifier)
        if time_mode == "connect":
            return ColumnType(_schema(SchemaType.INT32, TIME_NAME, 1), lambda t: _time_us(t) // 1000, 0)
        if time_mode == "adaptive" and digits <= 3:
            return ColumnType(_schema(SchemaType.INT32, "io.debezium.time.Time", 1), lambda t: _time_us(t) // 1000,
                              0)
        return ColumnType(_schema(SchemaType.INT64, "io.debezium.time.MicroTime", 1), _time_us, 0)
    if oid == TIMESTAMP:
        digits = _fraction_digits(modifier)
        if time_mode == "connect":
            return ColumnType(_schema(SchemaType.INT64, TIMESTAMP_NAME, 1), lambda t: _timestamp_us(t) // 1000, 0)
        if digits <= 3:
            return ColumnType(_schema(SchemaType.INT64, "io.debezium.time.Timestamp", 1),
                              lambda t: _timestamp_us(t) // 1000, 0)
        return ColumnType(_schema(SchemaType.INT64, "io.debezium.time.MicroTimestamp", 1), _timestamp_us, 0)
    if oid == TIMESTAMPTZ:
        return ColumnType(_schema(SchemaType.STRING, "io.debezium.time.ZonedTimestamp", 1), _zoned,
                          "1970-01-01T00:00:00Z")
    if oid == TIMETZ:
        return ColumnType(_schema(SchemaType.STRING, "io.debezium.time.ZonedTime", 1), _zoned_time, "00:00:00Z")
    if oid == INTERVAL:
        return ColumnType(_schema(SchemaType.INT64, "io.debezium.time.MicroDuration", 1), _interval_us, 0)
    if oid == UUID:
        return ColumnType(_schema(SchemaType.STRING, "io.debezium.data.Uuid", 1), str)
    if oid in (JSON_, JSONB):
        return ColumnType(_schema(SchemaType.STRING, "io.debezium.data.Json", 1), str)
    if custom is not None:
        if custom.kind == "e":
            return ColumnType(_schema(SchemaType.STRING, "io.debezium.data.Enum", 1,
                                      {"allowed": ",".join(custom.labels)}), str)
        if custom.element and element_of is not None:
            element = element_of(custom.element)
            return ColumnType(array_schema(element.schema, optional=True), _array(element.convert), [])
    return text


def _array(convert: Convert) -> Convert:
    def parse(text: str) -> list[Any]:
        return [None if item is None else convert(item) for item in parse_array(text)]

    return parse


def json_value(text: str) -> Any:
    """JSON text as Python (for tests and sinks that want structure)."""
    return json.loads(text)
