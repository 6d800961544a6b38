"""Connect's data model: schemas and structs, as JsonConverter and Debezium use them.

Values are plain Python objects (``int``, ``str``, ``bytes``, ``list``, ``dict``,
``Decimal``, ``Struct``); a ``Schema`` optionally describes them, exactly like Kafka
Connect's ``Schema``/``Struct``.
"""

from __future__ import annotations

import datetime as _dt
import math
from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum
from typing import Any

__all__ = ["Field", "Schema", "SchemaType", "Struct", "SchemaBuilder", "java_double_str", "java_str"]


class SchemaType(StrEnum):
    INT8 = "int8"
    INT16 = "int16"
    INT32 = "int32"
    INT64 = "int64"
    FLOAT32 = "float"
    FLOAT64 = "double"
    BOOLEAN = "boolean"
    STRING = "string"
    BYTES = "bytes"
    ARRAY = "array"
    MAP = "map"
    STRUCT = "struct"


@dataclass(frozen=True)
class Field:
    name: str
    index: int
    schema: Schema


@dataclass(frozen=True, eq=True)
class Schema:
    type: SchemaType
    optional: bool = False
    name: str | None = None
    version: int | None = None
    doc: str | None = None
    parameters: tuple[tuple[str, str], ...] | None = None
    default: Any = None
    fields: tuple[Field, ...] = ()
    key_schema: Schema | None = None
    value_schema: Schema | None = None

    def field(self, name: str) -> Field | None:
        for f in self.fields:
            if f.name == name:
                return f
        return None

    @property
    def params(self) -> dict[str, str]:
        return dict(self.parameters or ())

    def __hash__(self) -> int:  # defaults may be unhashable (lists, dicts)
        return hash((self.type, self.optional, self.name, self.version, self.fields))


class SchemaBuilder:
    """Fluent construction, mirroring Kafka Connect's SchemaBuilder."""

    def __init__(self, type_: SchemaType) -> None:
        self._kw: dict[str, Any] = {"type": type_}
        self._fields: list[Field] = []

    @classmethod
    def struct(cls) -> SchemaBuilder:
        return cls(SchemaType.STRUCT)

    def name(self, name: str) -> SchemaBuilder:
        self._kw["name"] = name
        return self

    def version(self, version: int) -> SchemaBuilder:
        self._kw["version"] = version
        return self

    def doc(self, doc: str) -> SchemaBuilder:
        self._kw["doc"] = doc
        return self

    def optional(self) -> SchemaBuilder:
        self._kw["optional"] = True
        return self

    def parameter(self, key: str, value: str) -> SchemaBuilder:
        self._kw["parameters"] = (*(self._kw.get("parameters") or ()), (key, value))
        return self

    def default_value(self, value: Any) -> SchemaBuilder:
        self._kw["default"] = value
        return self

    def field(self, name: str, schema: Schema) -> SchemaBuilder:
        self._fields.append(Field(name, len(self._fields), schema))
        return self

    def build(self) -> Schema:
        return Schema(fields=tuple(self._fields), **self._kw)


def _primitive(type_: SchemaType, optional: bool = False) -> Schema:
    return Schema(type_, optional)


# Kafka Connect's predefined schemas.
INT8_SCHEMA = _primitive(SchemaType.INT8)
INT16_SCHEMA = _primitive(SchemaType.INT16)
INT32_SCHEMA = _primitive(SchemaType.INT32)
INT64_SCHEMA = _primitive(SchemaType.INT64)
FLOAT32_SCHEMA = _primitive(SchemaType.FLOAT32)
FLOAT64_SCHEMA = _primitive(SchemaType.FLOAT64)
BOOLEAN_SCHEMA = _primitive(SchemaType.BOOLEAN)
STRING_SCHEMA = _primitive(SchemaType.STRING)
BYTES_SCHEMA = _primitive(SchemaType.BYTES)
OPTIONAL_INT8_SCHEMA = _primitive(SchemaType.INT8, True)
OPTIONAL_INT16_SCHEMA = _primitive(SchemaType.INT16, True)
OPTIONAL_INT32_SCHEMA = _primitive(SchemaType.INT32, True)
OPTIONAL_INT64_SCHEMA = _primitive(SchemaType.INT64, True)
OPTIONAL_FLOAT32_SCHEMA = _primitive(SchemaType.FLOAT32, True)
OPTIONAL_FLOAT64_SCHEMA = _primitive(SchemaType.FLOAT64, True)
OPTIONAL_BOOLEAN_SCHEMA = _primitive(SchemaType.BOOLEAN, True)
OPTIONAL_STRING_SCHEMA = _primitive(SchemaType.STRING, True)
OPTIONAL_BYTES_SCHEMA = _primitive(SchemaType.BYTES, True)


def array_schema(items: Schema, optional: bool = False) -> Schema:
    return Schema(SchemaType.ARRAY, optional, value_schema=items)


def map_schema(keys: Schema, values: Schema, optional: bool = False) -> Schema:
    return Schema(SchemaType.MAP, optional, key_schema=keys, value_schema=values)


@dataclass
class Struct:
    """A structured value with its schema; fields are read and set by name."""

    schema: Schema
    values: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.schema.type != SchemaType.STRUCT:
            raise ValueError(f"a Struct needs a struct schema, got {self.schema.type}")

    def get(self, name: str) -> Any:
        f = self.schema.field(name)
        if f is None:
            raise KeyError(f"{name!r} is not a field of {self.schema.name or 'the struct'}")
        value = self.values.get(name)
        return f.schema.default if value is None else value

    def put(self, name: str, value: Any) -> Struct:
        if self.schema.field(name) is None:
            raise KeyError(f"{name!r} is not a field of {self.schema.name or 'the struct'}")
        self.values[name] = value
        return self

    def __getitem__(self, name: str) -> Any:
        return self.get(name)

    def __setitem__(self, name: str, value: Any) -> None:
        self.put(name, value)

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dicts (nested structs converted too)."""
        return {f.name: _plain(self.values.get(f.name)) for f in self.schema.fields}

    def validate(self) -> None:
        for f in self.schema.fields:
            if self.values.get(f.name) is None and not f.schema.optional and f.schema.default is None:
                raise ValueError(f"field {f.name!r} is required")


def _plain(value: Any) -> Any:
    if isinstance(value, Struct):
        return value.to_dict()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


# Java's toString of Connect values: what Kafka's tools print (FileStreamSink, StringConverter).


def java_double_str(x: float) -> str:
    """Java's ``Double.toString``: decimal notation in [1e-3, 1e7), else ``d.dddE±n``."""
    if x != x:
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    r = repr(x)
    if 1e-3 <= abs(x) < 1e7:
        return r  # Python's repr uses the same shortest digits and the same ".0" for integral values
    sign, digit_tuple, exponent = Decimal(r).as_tuple()
    digits = list(digit_tuple)
    exp10 = len(digits) - 1 + int(exponent)  # finite here: NaN and infinities returned above
    while len(digits) > 1 and digits[-1] == 0:
        digits.pop()
    mantissa = f"{digits[0]}." + ("".join(map(str, digits[1:])) or "0")
    return f"{'-' if sign else ''}{mantissa}E{exp10}"


def java_str(value: Any, encoding: str = "utf-8") -> str:
    """Roughly Java's ``String.valueOf`` of the Java value a Python value stands for."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, float):
        return java_double_str(value)
    if isinstance(value, int | Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode(encoding, "replace")
    if isinstance(value, list | tuple):
        return "[" + ", ".join(java_str(v, encoding) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{java_str(k, encoding)}={java_str(v, encoding)}" for k, v in value.items()) + "}"
    if isinstance(value, Struct):
        parts = [f"{f.name}={java_str(value.values[f.name], encoding)}" for f in value.schema.fields
                 if value.values.get(f.name) is not None]
        return "Struct{" + ",".join(parts) + "}"
    if isinstance(value, _dt.date | _dt.time):
        return value.isoformat()
    return str(value)
