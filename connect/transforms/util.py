"""Shared pieces of the built-in transforms: Kafka's ``Requirements``, ``SchemaUtil`` and
``SchemaUpdateCache``, the Key/Value operating sides, config list parsing and the
logical types (Date, Time, Timestamp, Decimal) as Python values.

Logical values: Timestamp is a ``datetime`` (UTC, tz-aware; naive ones are read as UTC),
Date a ``date``, Time a ``time``, Decimal a ``decimal.Decimal``; like Java's ``Date``
they carry milliseconds, finer digits are dropped on conversion.
"""

from __future__ import annotations

import datetime as dt
import re
from abc import abstractmethod
from collections import OrderedDict
from collections.abc import Callable
from typing import Annotated, Any, ClassVar

from pydantic import BeforeValidator
from pydantic import Field as ConfigField
from pydantic_core import PydanticCustomError

from ..api.data import Field, Schema, SchemaType, Struct
from ..api.errors import DataException
from ..api.records import ConnectRecord, SinkRecord
from ..api.transforms import Transformation

__all__ = [
    "DATE_NAME",
    "DECIMAL_NAME",
    "TIME_NAME",
    "TIMESTAMP_NAME",
    "CsvList",
    "KeySide",
    "NonEmptyCsvList",
    "REPLACE_NULL_DOC",
    "ReplaceNullWithDefault",
    "SchemaCache",
    "SideTransformation",
    "ValueSide",
    "copy_schema_basics",
    "date_schema",
    "field_value",
    "invalid",
    "java_class",
    "kafka_aliases",
    "ms_to_datetime",
    "require_map",
    "require_map_or_none",
    "require_schema",
    "require_sink_record",
    "require_struct",
    "require_struct_or_none",
    "schema_type_of",
    "struct_schema",
    "struct_values",
    "time_schema",
    "timestamp_schema",
    "to_epoch_ms",
    "trunc_div",
]

PKG = "org.apache.kafka.connect.transforms"
TIMESTAMP_NAME = "org.apache.kafka.connect.data.Timestamp"
DATE_NAME = "org.apache.kafka.connect.data.Date"
TIME_NAME = "org.apache.kafka.connect.data.Time"
DECIMAL_NAME = "org.apache.kafka.connect.data.Decimal"
LOGICAL_NAMES = frozenset({TIMESTAMP_NAME, DATE_NAME, TIME_NAME, DECIMAL_NAME})
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
MS_PER_DAY = 86_400_000


def kafka_aliases(short: str, package: str = PKG) -> tuple[str, ...]:
    """Kafka's Java class name, then the short form (``InsertField$Value``)."""
    return (f"{package}.{short}", short)


# -- config values ---------------------------------------------------------------------------------------


def invalid(message: str) -> PydanticCustomError:
    """A validation error whose message is shown as is (no "Value error," prefix)."""
    return PydanticCustomError("config", message)


_COMMA = re.compile(r"\s*,\s*")


def _split_list(value: Any) -> Any:
    """Kafka's ConfigDef LIST parsing: comma-separated, whitespace around items trimmed."""
    if value is None:
        return []
    if isinstance(value, str):
        text = value.strip()
        return _COMMA.split(text) if text else []
    if isinstance(value, (list, tuple)):
        return [str(v).strip() for v in value]
    return value


def _non_empty(value: list[str]) -> list[str]:
    if not value:
        raise invalid("Empty list")
    return value


CsvList = Annotated[list[str], BeforeValidator(_split_list)]
NonEmptyCsvList = Annotated[list[str], BeforeValidator(_non_empty), BeforeValidator(_split_list)]

REPLACE_NULL_DOC = (
    "Whether to replace fields that have a default value and that are null to the default value. "
    "When set to true, the default value is used, otherwise null is used."
)
# the transforms' ``replace.null.with.default`` key (default true): ``x: ReplaceNullWithDefault = True``
ReplaceNullWithDefault = Annotated[
    bool, ConfigField(alias="replace.null.with.default", description=REPLACE_NULL_DOC)
]


# -- Requirements -----------------------------------------------------------------------------------------


def java_class(value: Any) -> str:
    """The class name used in error messages (Python's type name; ``null`` for None)."""
    return "null" if value is None else type(value).__name__


def require_map(value: Any, purpose: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise DataException(
            f"Only Map objects supported in absence of schema for [{purpose}], found: {java_class(value)}"
        )
    return value


def require_map_or_none(value: Any, purpose: str) -> dict[str, Any] | None:
    return None if value is None else require_map(value, purpose)


def require_struct(value: Any, purpose: str) -> Struct:
    if not isinstance(value, Struct):
        raise DataException(f"Only Struct objects supported for [{purpose}], found: {java_class(value)}")
    return value


def require_struct_or_none(value: Any, purpose: str) -> Struct | None:
    return None if value is None else require_struct(value, purpose)


def require_schema(schema: Schema | None, purpose: str) -> Schema:
    if schema is None:
        raise DataException(f"Schema required for [{purpose}]")
    return schema


def require_sink_record(record: ConnectRecord, purpose: str) -> SinkRecord:
    if not isinstance(record, SinkRecord):
        raise DataException(f"Only SinkRecord supported for [{purpose}], found: {java_class(record)}")
    return record


def field_value(struct: Struct, name: str, replace_null_with_default: bool = True) -> Any:
    """``Struct.get`` (default applied) or ``getWithoutDefault``."""
    if replace_null_with_default:
        return struct.get(name)
    if struct.schema.field(name) is None:
        raise KeyError(f"{name!r} is not a field of {struct.schema.name or 'the struct'}")
    return struct.values.get(name)


def struct_values(struct: Struct, replace_null_with_default: bool = True) -> dict[str, Any]:
    """Every field's value, by name, in schema order (defaults applied unless told otherwise)."""
    values = struct.values
    fields = struct.schema.fields
    out = {f.name: values.get(f.name) for f in fields}
    if replace_null_with_default:
        for f in fields:
            if f.schema.default is not None and out[f.name] is None:
                out[f.name] = f.schema.default
    return out


def schema_type_of(value: Any) -> SchemaType | None:
    """Kafka's ``ConnectSchema.schemaType(Class)`` for a Python value; None when Connect has no type."""
    if isinstance(value, bool):
        return SchemaType.BOOLEAN
    if isinstance(value, int):
        return SchemaType.INT64
    if isinstance(value, float):
        return SchemaType.FLOAT64
    if isinstance(value, str):
        return SchemaType.STRING
    if isinstance(value, (bytes, bytearray, memoryview)):
        return SchemaType.BYTES
    if isinstance(value, list):
        return SchemaType.ARRAY
    if isinstance(value, dict):
        return SchemaType.MAP
    if isinstance(value, Struct):
        return SchemaType.STRUCT
    return None


# -- SchemaUtil ------------------------------------------------------------------------------------------


def copy_schema_basics(source: Schema, type_: SchemaType | None = None, **changes: Any) -> dict[str, Any]:
    """Keyword arguments of a new Schema with ``source``'s name, version, doc and parameters
    (Kafka's ``SchemaUtil.copySchemaBasics``); array/map element schemas kept when the type is."""
    kw: dict[str, Any] = {
        "type": type_ or source.type,
        "name": source.name,
        "version": source.version,
        "doc": source.doc,
        "parameters": source.parameters,
    }
    if kw["type"] == source.type and source.type in (SchemaType.ARRAY, SchemaType.MAP):
        kw["key_schema"], kw["value_schema"] = source.key_schema, source.value_schema
    kw.update(changes)
    return kw


def struct_schema(basics: Schema | None, fields: list[tuple[str, Schema]], **changes: Any) -> Schema:
    """A struct schema with these fields, copying ``basics``' name/version/doc/parameters."""
    kw: dict[str, Any] = (copy_schema_basics(basics, SchemaType.STRUCT) if basics is not None
                          else {"type": SchemaType.STRUCT})
    kw.update(changes)
    kw["fields"] = tuple(Field(name, i, schema) for i, (name, schema) in enumerate(fields))
    return Schema(**kw)


def timestamp_schema(optional: bool = False) -> Schema:
    return Schema(SchemaType.INT64, optional, name=TIMESTAMP_NAME, version=1)


def date_schema(optional: bool = False) -> Schema:
    return Schema(SchemaType.INT32, optional, name=DATE_NAME, version=1)


def time_schema(optional: bool = False) -> Schema:
    return Schema(SchemaType.INT32, optional, name=TIME_NAME, version=1)


class SchemaCache:
    """Kafka's per-transform ``LRUCache<Schema, Schema>(16)``, with an identity fast path so a
    stream of records sharing one schema object never re-hashes it."""

    def __init__(self, size: int = 16) -> None:
        self.size = size
        self._by_id: dict[int, tuple[Schema, Any]] = {}
        self._lru: OrderedDict[Schema, Any] = OrderedDict()

    def get(self, schema: Schema, build: Callable[[Schema], Any]) -> Any:
        hit = self._by_id.get(id(schema))
        if hit is not None and hit[0] is schema:
            return hit[1]
        try:
            result = self._lru[schema]
            self._lru.move_to_end(schema)
        except KeyError:
            result = build(schema)
            self._lru[schema] = result
            if len(self._lru) > self.size:
                self._lru.popitem(last=False)
        if len(self._by_id) >= self.size:
            self._by_id.clear()
        self._by_id[id(schema)] = (schema, result)
        return result


# -- logical types ---------------------------------------------------------------------------------------


def trunc_div(a: int, b: int) -> int:
    """Integer division rounding toward zero, as Java's."""
    q = abs(a) // b
    return q if a >= 0 else -q


def to_epoch_ms(value: dt.datetime | dt.date | dt.time) -> int:
    """Milliseconds since the epoch, as Java's ``Date.getTime()`` (a date is its midnight UTC,
    a time is that time on 1970-01-01; naive datetimes are UTC)."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        delta = value - EPOCH
        return delta.days * MS_PER_DAY + delta.seconds * 1000 + delta.microseconds // 1000
    if isinstance(value, dt.date):
        return (value - dt.date(1970, 1, 1)).days * MS_PER_DAY
    if isinstance(value, dt.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000
    raise DataException(f"Expected a datetime, date or time, found: {java_class(value)}")


def ms_to_datetime(ms: int) -> dt.datetime:
    try:
        return EPOCH + dt.timedelta(milliseconds=ms)
    except OverflowError:
        raise DataException(f"Timestamp {ms} is out of the supported range (years 1-9999)") from None


# -- Key / Value sides ------------------------------------------------------------------------------------


class SideTransformation(Transformation):
    """A transform with ``$Key`` and ``$Value`` variants; mix in ``KeySide`` or ``ValueSide``."""

    side: ClassVar[str] = "value"

    @staticmethod
    @abstractmethod
    def operating_schema(record: ConnectRecord) -> Schema | None:
        """The key or value schema."""

    @staticmethod
    @abstractmethod
    def operating_value(record: ConnectRecord) -> Any:
        """The key or value."""

    @staticmethod
    @abstractmethod
    def new_record(record: Any, schema: Schema | None, value: Any, **changes: Any) -> Any:
        """A copy of the record with the key (or value) and its schema replaced."""


class KeySide:
    """Operates on the record key (Kafka's ``$Key`` classes)."""

    side: ClassVar[str] = "key"

    @staticmethod
    def operating_schema(record: ConnectRecord) -> Schema | None:
        return record.key_schema

    @staticmethod
    def operating_value(record: ConnectRecord) -> Any:
        return record.key

    @staticmethod
    def new_record(record: Any, schema: Schema | None, value: Any, **changes: Any) -> Any:
        return record.new_record(key_schema=schema, key=value, **changes)


class ValueSide:
    """Operates on the record value (Kafka's ``$Value`` classes)."""

    side: ClassVar[str] = "value"

    @staticmethod
    def operating_schema(record: ConnectRecord) -> Schema | None:
        return record.value_schema

    @staticmethod
    def operating_value(record: ConnectRecord) -> Any:
        return record.value

    @staticmethod
    def new_record(record: Any, schema: Schema | None, value: Any, **changes: Any) -> Any:
        return record.new_record(value_schema=schema, value=value, **changes)
