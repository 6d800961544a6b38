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

__all__ = ["Partitioner", "field_value", "joda_format", "timestamp_extractor", "floor_in_zone"]

_PRESETS = {"daily": ("'year'=YYYY/'month'=MM/'day'=dd", 86_400_000),
            "hourly": ("'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH", 3_600_000)}

# Joda-Time pattern letters this partitioner understands, longest first
_JODA = re.compile(r"'[^']*'|YYYY|yyyy|xxxx|YY|yy|MM|M|dd|d|HH|H|mm|m|ss|s|SSS|DDD|ww|EEE|a|Z+|[^'A-Za-z]+|[A-Za-z]")


def _literal(text: str) -> Callable[[dt.datetime], str]:
    return lambda _t: text


_Field = Callable[[dt.datetime], str]
_FIELDS: dict[str, _Field] = {
    **dict.fromkeys(("YYYY", "yyyy", "xxxx"), lambda t: f"{t.year:04d}"),
    **dict.fromkeys(("YY", "yy"), lambda t: f"{t.year % 100:02d}"),
    "MM": lambda t: f"{t.month:02d}", "M": lambda t: str(t.month),
    "dd": lambda t: f"{t.day:02d}", "d": lambda t: str(t.day),
    "HH": lambda t: f"{t.hour:02d}", "H": lambda t: str(t.hour),
    "mm": lambda t: f"{t.minute:02d}", "m": lambda t: str(t.minute),
    "ss": lambda t: f"{t.second:02d}", "s": lambda t: str(t.second),
    "SSS": lambda t: f"{t.microsecond // 1000:03d}",
    "DDD": lambda t: f"{t.timetuple().tm_yday:03d}",
    "ww": lambda t: f"{t.isocalendar()[1]:02d}",
    "EEE": lambda t: t.strftime("%a"),
    "a": lambda t: "AM" if t.hour < 12 else "PM",
    "Z": lambda t: t.strftime("%z"),
}


def joda_format(pattern: str) -> Callable[[dt.datetime], str]:
    """A formatter for a Joda-Time ``DateTimeFormat`` pattern (what ``path.format`` holds)."""
    parts: list[_Field] = []
    for token in _JODA.findall(pattern):
        if token.startswith("'"):
            parts.append(_literal(token[1:-1] or "'"))
        elif (field := _FIELDS.get("Z" if token.startswith("Z") else token)) is not None:
            parts.append(field)
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


def floor_in_zone(millis: int, duration_ms: int, zone: ZoneInfo) -> int:
    """The instant floored to a multiple of ``duration_ms`` counted in the time zone's local time, in ms
    (Confluent's ``getPartition``: an hourly or daily boundary falls on the zone's hours and midnights)."""
    offset = dt.datetime.fromtimestamp(millis / 1000, zone).utcoffset()
    offset_ms = int(offset.total_seconds() * 1000) if offset is not None else 0
    return ((millis + offset_ms) // duration_ms) * duration_ms - offset_ms


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
        """The folder of a time: floored to the duration in the time zone."""
        assert self.format is not None
        floored = floor_in_zone(millis, self.duration, self.zone)
        return self.format(dt.datetime.fromtimestamp(floored / 1000, self.zone))
