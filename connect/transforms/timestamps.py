"""TimestampConverter ($Key/$Value) and TimestampRouter.

Internally a timestamp is Java's ``Date``: integer milliseconds since the epoch, UTC.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import Field as ConfigField
from pydantic import field_validator

from ..api.data import (
    INT64_SCHEMA,
    OPTIONAL_INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    Schema,
    SchemaType,
    Struct,
)
from ..api.errors import ConfigException, DataException
from ..api.transforms import Transformation, TransformConfig
from .dateformat import JavaDateFormat
from .util import (
    DATE_NAME,
    MS_PER_DAY,
    TIME_NAME,
    TIMESTAMP_NAME,
    KeySide,
    ReplaceNullWithDefault,
    SchemaCache,
    SideTransformation,
    ValueSide,
    date_schema,
    invalid,
    java_class,
    kafka_aliases,
    ms_to_datetime,
    require_map,
    require_struct_or_none,
    struct_schema,
    struct_values,
    time_schema,
    timestamp_schema,
    to_epoch_ms,
    trunc_div,
)

__all__ = ["TimestampConverterKey", "TimestampConverterValue", "TimestampRouter"]

TYPE_STRING, TYPE_UNIX, TYPE_DATE, TYPE_TIME, TYPE_TIMESTAMP = "string", "unix", "Date", "Time", "Timestamp"
VALID_TYPES = (TYPE_STRING, TYPE_UNIX, TYPE_DATE, TYPE_TIME, TYPE_TIMESTAMP)
PRECISIONS = {"seconds": 1000, "milliseconds": 1, "microseconds": -1000, "nanoseconds": -1_000_000}


def _format_or_error(pattern: str, key: str) -> JavaDateFormat:
    try:
        return JavaDateFormat(pattern)
    except ValueError as exc:
        raise ConfigException(f"Invalid value {pattern} for configuration {key}: {exc}", field=key) from None


class TimestampConverterConfig(TransformConfig):
    field: str = ConfigField(
        "",
        alias="field",
        description="The field containing the timestamp, or empty if the entire value is a timestamp",
    )
    target_type: str = ConfigField(
        alias="target.type",
        description="The desired timestamp representation: string, unix, Date, Time, or Timestamp",
    )
    format: str = ConfigField(
        "",
        alias="format",
        description="A SimpleDateFormat-compatible format for the timestamp. Used to generate "
        "the output when type=string or used to parse the input if the input is "
        "a string.",
    )
    unix_precision: str = ConfigField(
        "milliseconds",
        alias="unix.precision",
        description="The desired Unix precision for the timestamp: seconds, "
        "milliseconds, microseconds, or nanoseconds.",
    )
    replace_null_with_default: ReplaceNullWithDefault = True

    @field_validator("target_type")
    @classmethod
    def _type(cls, value: str) -> str:
        if value not in VALID_TYPES:
            raise invalid(f"String must be one of: {', '.join(VALID_TYPES)}")
        return value

    @field_validator("unix_precision")
    @classmethod
    def _precision(cls, value: str) -> str:
        if value not in PRECISIONS:
            raise invalid("String must be one of: nanoseconds, microseconds, milliseconds, seconds")
        return value


class TimestampConverter(SideTransformation):
    """Convert a timestamp field (or the whole key/value) between unix numbers, formatted strings and
    Connect's Date, Time and Timestamp. Nulls stay null.

    Keys: ``field`` (empty: the whole value), ``target.type`` (string|unix|Date|Time|Timestamp),
    ``format`` (SimpleDateFormat pattern, needed for strings), ``unix.precision``
    (seconds|milliseconds|microseconds|nanoseconds), ``replace.null.with.default``."""

    config_class = TimestampConverterConfig
    PURPOSE = "converting timestamp formats"

    def configure(self, props: dict[str, Any]) -> None:
        super().configure(props)
        c = self.config
        if c.target_type == TYPE_STRING and not c.format.strip():
            raise ConfigException(
                "TimestampConverter requires format option to be specified when using string timestamps",
                field="format",
            )
        self.format = _format_or_error(c.format, "format") if c.format.strip() else None
        self.cache = SchemaCache()

    # -- translators: value of a type <-> epoch ms -----------------------------------------------------------

    def to_raw(self, kind: str, value: Any) -> int:
        if kind == TYPE_STRING:
            if not isinstance(value, str):
                raise DataException(
                    f"Expected string timestamp to be a String, but found {java_class(value)}"
                )
            if self.format is None:
                raise DataException("TimestampConverter requires a format to parse string timestamps")
            try:
                return self.format.parse(value)
            except ValueError:
                raise DataException(
                    f"Could not parse timestamp: value ({value}) does not match pattern "
                    f"({self.format.pattern})"
                ) from None
        if kind == TYPE_UNIX:
            if not isinstance(value, int) or isinstance(value, bool):
                raise DataException(f"Expected Unix timestamp to be a Long, but found {java_class(value)}")
            factor = PRECISIONS[self.config.unix_precision]
            return value * factor if factor > 0 else trunc_div(value, -factor)
        if not isinstance(value, (dt.datetime, dt.date, dt.time)):
            raise DataException(
                f"Expected {kind} to be a datetime, date or time, but found {java_class(value)}"
            )
        return to_epoch_ms(value)

    def to_type(self, kind: str, ms: int) -> Any:
        if kind == TYPE_STRING:
            assert self.format is not None
            return self.format.format(ms)
        if kind == TYPE_UNIX:
            factor = PRECISIONS[self.config.unix_precision]
            return trunc_div(ms, factor) if factor > 0 else ms * -factor
        if kind == TYPE_DATE:
            return ms_to_datetime(ms - ms % MS_PER_DAY).date()
        if kind == TYPE_TIME:
            return ms_to_datetime(ms % MS_PER_DAY).time()
        return ms_to_datetime(ms)

    @staticmethod
    def type_schema(kind: str, optional: bool) -> Schema:
        if kind == TYPE_STRING:
            return OPTIONAL_STRING_SCHEMA if optional else STRING_SCHEMA
        if kind == TYPE_UNIX:
            return OPTIONAL_INT64_SCHEMA if optional else INT64_SCHEMA
        if kind == TYPE_DATE:
            return date_schema(optional)
        if kind == TYPE_TIME:
            return time_schema(optional)
        return timestamp_schema(optional)

    @staticmethod
    def type_from_schema(schema: Schema) -> str:
        if schema.name == TIMESTAMP_NAME:
            return TYPE_TIMESTAMP
        if schema.name == DATE_NAME:
            return TYPE_DATE
        if schema.name == TIME_NAME:
            return TYPE_TIME
        if schema.type == SchemaType.STRING:
            return TYPE_STRING
        if schema.type == SchemaType.INT64:
            return TYPE_UNIX
        raise DataException(
            f"Schema {schema.type.name}{f' {schema.name}' if schema.name else ''} does not "
            "correspond to a known timestamp type format"
        )

    @staticmethod
    def infer_type(value: Any) -> str:
        if isinstance(value, (dt.datetime, dt.date, dt.time)):
            return TYPE_TIMESTAMP
        if isinstance(value, int) and not isinstance(value, bool):
            return TYPE_UNIX
        if isinstance(value, str):
            return TYPE_STRING
        raise DataException(f"TimestampConverter does not support {java_class(value)} objects as timestamps")

    def convert(self, value: Any, kind: str | None = None) -> Any:
        if value is None:
            return None
        kind = kind or self.infer_type(value)
        return self.to_type(self.config.target_type, self.to_raw(kind, value))

    # -- apply -----------------------------------------------------------------------------------------------

    def apply(self, record: Any) -> Any:
        schema = self.operating_schema(record)
        value = self.operating_value(record)
        target, field = self.config.target_type, self.config.field
        if schema is None:
            if value is None or not field:
                return self.new_record(record, None, self.convert(value))
            updated = dict(require_map(value, self.PURPOSE))
            updated[field] = self.convert(updated.get(field))
            return self.new_record(record, None, updated)
        if not field:
            return self.new_record(
                record,
                self.type_schema(target, schema.optional),
                self.convert(value, self.type_from_schema(schema)),
            )
        struct = require_struct_or_none(value, self.PURPOSE)
        updated_schema = self.cache.get(schema, self._updated_schema)
        return self.new_record(record, updated_schema, self._convert_struct(struct, updated_schema))

    def _updated_schema(self, schema: Schema) -> Schema:
        fields = [
            (
                f.name,
                self.type_schema(self.config.target_type, f.schema.optional)
                if f.name == self.config.field
                else f.schema,
            )
            for f in schema.fields
        ]
        updated = struct_schema(schema, fields, optional=schema.optional)
        if isinstance(schema.default, Struct):
            default = self._convert_struct(schema.default, updated)
            updated = struct_schema(schema, fields, optional=schema.optional, default=default)
        return updated

    def _convert_struct(self, struct: Struct | None, updated_schema: Schema) -> Struct | None:
        if struct is None:
            return None
        values = struct_values(struct, self.config.replace_null_with_default)
        f = struct.schema.field(self.config.field)
        if f is not None:
            values[f.name] = self.convert(values[f.name], self.type_from_schema(f.schema))
        return Struct(updated_schema, values)


class TimestampConverterKey(KeySide, TimestampConverter):
    aliases = kafka_aliases("TimestampConverter$Key")


class TimestampConverterValue(ValueSide, TimestampConverter):
    aliases = kafka_aliases("TimestampConverter$Value")


# -- TimestampRouter ----------------------------------------------------------------------------------------


class TimestampRouterConfig(TransformConfig):
    topic_format: str = ConfigField(
        "${topic}-${timestamp}",
        alias="topic.format",
        description="Format string which can contain ${topic} and ${timestamp} as "
        "placeholders for the topic and timestamp, respectively.",
    )
    timestamp_format: str = ConfigField(
        "yyyyMMdd",
        alias="timestamp.format",
        description="Format string for the timestamp that is compatible with java.text.SimpleDateFormat.",
    )


class TimestampRouter(Transformation):
    """Route to ``topic.format`` with ``${topic}`` and ``${timestamp}`` (the record timestamp in UTC,
    formatted with ``timestamp.format``) substituted.

    Keys: ``topic.format`` (default ``${topic}-${timestamp}``),
    ``timestamp.format`` (default ``yyyyMMdd``)."""

    config_class = TimestampRouterConfig
    aliases = kafka_aliases("TimestampRouter")

    def configure(self, props: dict[str, Any]) -> None:
        super().configure(props)
        self.format = _format_or_error(self.config.timestamp_format, "timestamp.format")

    def apply(self, record: Any) -> Any:
        if record.timestamp is None:
            raise DataException(f"Timestamp missing on record: {record}")
        stamp = self.format.format(record.timestamp)
        topic = self.config.topic_format.replace("${topic}", record.topic).replace("${timestamp}", stamp)
        return record.new_record(topic=topic)
