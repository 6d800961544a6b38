"""Where a record's file goes (Confluent's partitioners) and what time a record has (its extractors).

``encoded(record)`` gives the folder path under the table, as Confluent's ``encodePartition``:
``partition=3`` (default), ``country=FR/city=Paris`` (field), or a Joda-Time pattern of the record's
time floored to ``partition.duration.ms`` in ``timezone`` (time based).
"""

from __future__ import annotations

import datetime as dt
import re
import time
from collections.abc import Callable
from typing import Any
from zoneinfo import ZoneInfo

from headwater.connect.api import ConnectException
from headwater.connect.api.data import Struct

from .config import SparkSinkConfig

__all__ = ["Partitioner", "field_value", "joda_format", "timestamp_extractor", "zone_offset_ms"]

_PRESETS = {"daily": ("'year'=YYYY/'month'=MM/'day'=dd", 86_400_000),
            "hourly": ("'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH", 3_600_000)}

# Joda-Time pattern letters this partitioner understands, longest first
_JODA = re.compile(r"'[^']*'|YYYY|yyyy|xxxx|YY|yy|MM|M|dd|d|HH|H|mm|m|ss|s|SSS|DDD|ww|EEE|a|Z+|[^'A-Za-z]+|[A-Za-z]")


def _literal(text: str) -> Callable[[dt.datetime], str]:
    return lambda _t: text


def joda_format(pattern: str) -> Callable[[dt.datetime], str]:
    """A formatter for a Joda-Time ``DateTimeFormat`` pattern (what ``path.format`` holds)."""
    parts: list[Callable[[dt.datetime], str]] = []
    for token in _JODA.findall(pattern):
        if token.startswith("'"):
            text = token[1:-1] or "'"
            parts.append(_literal(text))
        elif token in ("YYYY", "yyyy", "xxxx"):
            parts.append(lambda t: f"{t.year:04d}")
        elif token in ("YY", "yy"):
            parts.append(lambda t: f"{t.year % 100:02d}")
        elif token == "MM":
            parts.append(lambda t: f"{t.month:02d}")
        elif token == "M":
            parts.append(lambda t: str(t.month))
        elif token == "dd":
            parts.append(lambda t: f"{t.day:02d}")
        elif token == "d":
            parts.append(lambda t: str(t.day))
        elif token == "HH":
            parts.append(lambda t: f"{t.hour:02d}")
        elif token == "H":
            parts.append(lambda t: str(t.hour))
        elif token == "mm":
            parts.append(lambda t: f"{t.minute:02d}")
        elif token == "m":
            parts.append(lambda t: str(t.minute))
        elif token == "ss":
            parts.append(lambda t: f"{t.second:02d}")
        elif token == "s":
            parts.append(lambda t: str(t.second))
        elif token == "SSS":
            parts.append(lambda t: f"{t.microsecond // 1000:03d}")
        elif token == "DDD":
            parts.append(lambda t: f"{t.timetuple().tm_yday:03d}")
        elif token == "ww":
            parts.append(lambda t: f"{t.isocalendar()[1]:02d}")
        elif token == "EEE":
            parts.append(lambda t: t.strftime("%a"))
        elif token == "a":
            parts.append(lambda t: "AM" if t.hour < 12 else "PM")
        elif token.startswith("Z"):
            parts.append(lambda t: t.strftime("%z"))
        elif token.isalpha():
            raise ValueError(f"path.format: the pattern letter {token!r} is not supported")
        else:
            parts.append(_literal(token))
    return lambda t: "".join(p(t) for p in parts)


def field_value(value: Any, path: str) -> Any:
    """A (possibly nested, ``a.b``) field of a struct or map value; KeyError when absent."""
    for name in path.split("."):
        if isinstance(value, Struct):
            if value.schema.field(name) is None:
                raise KeyError(path)
            value = value.values.get(name)
        elif isinstance(value, dict):
            value = value[name]
        else:
            raise KeyError(path)
    return value


def _millis(value: Any, field: str) -> int:
    if isinstance(value, bool) or value is None:
        raise ConnectException(f"timestamp.field {field!r} is {value!r}, not a time")
    if isinstance(value, int | float):
        return int(value)
    if isinstance(value, dt.datetime):
        return int((value if value.tzinfo else value.replace(tzinfo=dt.UTC)).timestamp() * 1000)
    if isinstance(value, dt.date):
        return int(dt.datetime(value.year, value.month, value.day, tzinfo=dt.UTC).timestamp() * 1000)
    if isinstance(value, str):
        try:
            parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError as exc:
            raise ConnectException(f"timestamp.field {field!r} holds {value!r}, which is not an ISO-8601 "
                                   f"time") from exc
        return _millis(parsed, field)
    raise ConnectException(f"timestamp.field {field!r} holds a {type(value).__name__}, not a time")


#: (value, Kafka timestamp) -> ms
Extractor = Callable[[Any, "int | None"], int]


def timestamp_extractor(config: SparkSinkConfig) -> Extractor:
    """The record's time in ms as ``timestamp.extractor`` says."""
    kind = config.extractor()
    if kind == "Record":
        def record_time(_value: Any, timestamp: int | None) -> int:
            if timestamp is None or timestamp < 0:
                raise ConnectException("the record has no timestamp (timestamp.extractor=Record)")
            return timestamp

        return record_time
    if kind == "RecordField":
        name = config.timestamp_field

        def field_time(value: Any, _timestamp: int | None) -> int:
            try:
                return _millis(field_value(value, name), name)
            except KeyError:
                raise ConnectException(f"the record has no field {name!r} (timestamp.field)") from None

        return field_time
    return lambda _value, _timestamp: int(time.time() * 1000)


def zone_offset_ms(zone: ZoneInfo, millis: int) -> int:
    """The time zone's offset from UTC at this instant, in ms."""
    offset = dt.datetime.fromtimestamp(millis / 1000, zone).utcoffset()
    return int(offset.total_seconds() * 1000) if offset is not None else 0


class Partitioner:
    """``partitioner.class`` as a function from a record to its folder path under the table."""

    def __init__(self, config: SparkSinkConfig) -> None:
        kind = config.partitioner()
        self.kind = kind
        self.fields = config.partition_fields()
        self.zone = ZoneInfo(config.timezone)
        self.when = timestamp_extractor(config)
        pattern, duration = _PRESETS.get(kind, (config.path_format, config.partition_duration_ms))
        self.duration = duration
        self.format = joda_format(pattern) if kind in ("time", "daily", "hourly") else None

    def encoded(self, partition: int, value: Any, timestamp: int | None) -> str:
        """The folder of a record of Kafka partition ``partition``; ConnectException when the record
        lacks what the partitioner reads."""
        if self.kind == "default":
            return f"partition={partition}"
        if self.kind == "field":
            out = []
            for name in self.fields:
                try:
                    out.append(f"{name}={field_value(value, name)}")
                except KeyError:
                    raise ConnectException(f"the record has no field {name!r} (partition.field.name)") from None
            return "/".join(out)
        return self.time_path(self.when(value, timestamp))

    def time_path(self, millis: int) -> str:
        """The folder of a time: floored to the duration in the time zone (Confluent's ``getPartition``)."""
        offset_ms = zone_offset_ms(self.zone, millis)
        floored = ((millis + offset_ms) // self.duration) * self.duration - offset_ms
        assert self.format is not None
        return self.format(dt.datetime.fromtimestamp(floored / 1000, self.zone))
