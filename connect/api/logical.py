"""Kafka Connect's logical types (``org.apache.kafka.connect.data.{Decimal,Date,Time,Timestamp}``).

Each is a primitive schema with a well-known name; Python values are ``decimal.Decimal``,
``datetime.date``, ``datetime.time`` and ``datetime.datetime`` (UTC).
"""

from __future__ import annotations

import datetime as _dt
from decimal import Decimal, InvalidOperation
from typing import Any

from headwater.connect.api.data import Schema, SchemaType
from headwater.connect.api.errors import DataException

__all__ = [
    "DECIMAL_NAME", "DATE_NAME", "TIME_NAME", "TIMESTAMP_NAME", "DATE_SCHEMA", "TIME_SCHEMA", "TIMESTAMP_SCHEMA",
    "OPTIONAL_DATE_SCHEMA", "OPTIONAL_TIME_SCHEMA", "OPTIONAL_TIMESTAMP_SCHEMA", "decimal_schema", "decimal_scale",
    "decimal_to_bytes", "decimal_from_bytes", "date_to_days", "days_to_date", "time_to_millis", "millis_to_time",
    "timestamp_to_millis", "millis_to_timestamp",
]

DECIMAL_NAME = "org.apache.kafka.connect.data.Decimal"
DATE_NAME = "org.apache.kafka.connect.data.Date"
TIME_NAME = "org.apache.kafka.connect.data.Time"
TIMESTAMP_NAME = "org.apache.kafka.connect.data.Timestamp"
SCALE_FIELD = "scale"

MILLIS_PER_DAY = 86_400_000
UTC = _dt.UTC
EPOCH = _dt.datetime(1970, 1, 1, tzinfo=UTC)
EPOCH_NAIVE = _dt.datetime(1970, 1, 1)
EPOCH_DATE = _dt.date(1970, 1, 1)
_ONE_MS = _dt.timedelta(milliseconds=1)

DATE_SCHEMA = Schema(SchemaType.INT32, name=DATE_NAME, version=1)
TIME_SCHEMA = Schema(SchemaType.INT32, name=TIME_NAME, version=1)
TIMESTAMP_SCHEMA = Schema(SchemaType.INT64, name=TIMESTAMP_NAME, version=1)
OPTIONAL_DATE_SCHEMA = Schema(SchemaType.INT32, True, name=DATE_NAME, version=1)
OPTIONAL_TIME_SCHEMA = Schema(SchemaType.INT32, True, name=TIME_NAME, version=1)
OPTIONAL_TIMESTAMP_SCHEMA = Schema(SchemaType.INT64, True, name=TIMESTAMP_NAME, version=1)


def decimal_schema(scale: int, optional: bool = False) -> Schema:
    """Kafka's ``Decimal.schema(scale)``: bytes, named, version 1, parameter ``scale``."""
    return Schema(SchemaType.BYTES, optional, name=DECIMAL_NAME, version=1, parameters=((SCALE_FIELD, str(scale)),))


def decimal_scale(schema: Schema) -> int:
    raw = schema.params.get(SCALE_FIELD)
    if raw is None:
        raise DataException("Invalid Decimal schema: scale parameter not found.")
    try:
        return int(raw)
    except ValueError:
        raise DataException(f"Invalid scale parameter found in Decimal schema: {raw}") from None


def _rescale(value: Any, scale: int) -> int:
    """The unscaled integer of ``value`` at ``scale`` (exact; a lossy rescale is an error)."""
    if isinstance(value, bool) or not isinstance(value, Decimal | int):
        raise DataException(f"Invalid type for Decimal, expected Decimal but was {type(value)}")
    if isinstance(value, int):
        if scale < 0:
            q, r = divmod(value, 10 ** -scale)
            if r:
                raise DataException("BigDecimal has mismatching scale value for given Decimal schema")
            return q
        return value * 10 ** scale
    if not value.is_finite():
        raise DataException(f"Invalid value for Decimal: {value}")
    sign, digits, exponent = value.as_tuple()
    unscaled = int("".join(map(str, digits))) if digits else 0
    # finite (checked above), so the exponent is an int; it equals -scale when the value has the schema's scale
    shift = int(exponent) + scale
    if shift >= 0:
        unscaled *= 10 ** shift
    else:
        unscaled, rest = divmod(unscaled, 10 ** -shift)
        if rest:
            raise DataException("BigDecimal has mismatching scale value for given Decimal schema")
    return -unscaled if sign else unscaled


def decimal_to_bytes(value: Any, scale: int) -> bytes:
    """``Decimal.fromLogical``: the big-endian two's-complement unscaled value (Java ``BigInteger.toByteArray``)."""
    n = _rescale(value, scale)
    bits = n.bit_length() if n >= 0 else (~n).bit_length()
    return n.to_bytes(bits // 8 + 1, "big", signed=True)


def decimal_from_bytes(data: bytes, scale: int) -> Decimal:
    """``Decimal.toLogical``."""
    n = int.from_bytes(data, "big", signed=True)
    return Decimal(f"{n}E{-scale}")


def decimal_from_number(value: Any) -> Decimal:
    if isinstance(value, Decimal):
        return value
    if isinstance(value, float):
        return Decimal(repr(value))
    try:
        return Decimal(value)
    except (InvalidOperation, TypeError, ValueError):
        raise DataException(f"Invalid value for Decimal: {value!r}") from None


def date_to_days(value: Any) -> int:
    """``Date.fromLogical``: days since the epoch (a datetime must be at midnight UTC)."""
    if isinstance(value, _dt.datetime):
        millis = timestamp_to_millis(value)
        if millis % MILLIS_PER_DAY:
            raise DataException("Kafka Connect Date type should not have any time fields set to non-zero values.")
        return millis // MILLIS_PER_DAY
    if isinstance(value, _dt.date):
        return (value - EPOCH_DATE).days
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise DataException(f"Invalid type for Date, expected Date but was {type(value)}")


def days_to_date(days: int) -> _dt.date:
    try:
        return EPOCH_DATE + _dt.timedelta(days=days)
    except OverflowError:
        raise DataException(f"Date value out of range: {days}") from None


def time_to_millis(value: Any) -> int:
    """``Time.fromLogical``: milliseconds since midnight."""
    if isinstance(value, _dt.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000
    if isinstance(value, _dt.datetime):
        millis = timestamp_to_millis(value)
        if not 0 <= millis < MILLIS_PER_DAY:
            raise DataException("Kafka Connect Time type should not have any date fields set to non-zero values.")
        return millis
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise DataException(f"Invalid type for Time, expected Date but was {type(value)}")


def millis_to_time(millis: int) -> _dt.time:
    if not 0 <= millis < MILLIS_PER_DAY:
        raise DataException("Time values must use number of milliseconds greater than 0 and less than 86400000")
    seconds, ms = divmod(millis, 1000)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    return _dt.time(hour, minute, second, ms * 1000)


def timestamp_to_millis(value: Any) -> int:
    """``Timestamp.fromLogical``: milliseconds since the epoch; a naive datetime is taken as UTC."""
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            return (value - EPOCH_NAIVE) // _ONE_MS
        return (value - EPOCH) // _ONE_MS
    if isinstance(value, _dt.date):
        return (value - EPOCH_DATE).days * MILLIS_PER_DAY
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise DataException(f"Invalid type for Timestamp, expected Date but was {type(value)}")


def millis_to_timestamp(millis: int) -> _dt.datetime:
    try:
        return EPOCH + _dt.timedelta(milliseconds=millis)
    except OverflowError:
        raise DataException(f"Timestamp value out of range: {millis}") from None
