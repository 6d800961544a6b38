"""Header transforms: DropHeaders, HeaderFrom ($Key/$Value), InsertHeader."""

from __future__ import annotations

import copy
import json
import re
from decimal import Decimal
from typing import Any

from pydantic import Field as ConfigField
from pydantic import field_validator

from ..api.data import (
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
    map_schema,
)
from ..api.errors import ConfigException, DataException
from ..api.records import Header
from ..api.transforms import Transformation, TransformConfig
from .dateformat import JavaDateFormat
from .util import (
    DECIMAL_NAME,
    KeySide,
    NonEmptyCsvList,
    ReplaceNullWithDefault,
    SchemaCache,
    SideTransformation,
    ValueSide,
    date_schema,
    field_value,
    invalid,
    kafka_aliases,
    ms_to_datetime,
    require_map,
    require_struct,
    struct_schema,
    time_schema,
    timestamp_schema,
)

__all__ = ["DropHeaders", "HeaderFromKey", "HeaderFromValue", "InsertHeader", "parse_literal"]


# -- DropHeaders -------------------------------------------------------------------------------------------


class DropHeadersConfig(TransformConfig):
    headers: NonEmptyCsvList = ConfigField(
        alias="headers", description="The name of the headers to be removed."
    )


class DropHeaders(Transformation):
    """Remove every header with one of the given names.

    Keys: ``headers``."""

    config_class = DropHeadersConfig
    aliases = kafka_aliases("DropHeaders")

    def configure(self, props: dict[str, Any]) -> None:
        super().configure(props)
        self.names = frozenset(self.config.headers)

    def apply(self, record: Any) -> Any:
        return record.new_record(headers=[h for h in record.headers if h.key not in self.names])


# -- HeaderFrom --------------------------------------------------------------------------------------------


class HeaderFromConfig(TransformConfig):
    fields: NonEmptyCsvList = ConfigField(
        alias="fields",
        description="Field names in the record whose values are to be copied or moved to headers.",
    )
    headers: NonEmptyCsvList = ConfigField(
        alias="headers",
        description="Header names, in the same order as the field names listed "
        "in the fields configuration property.",
    )
    operation: str = ConfigField(
        alias="operation",
        description="Either move if the fields are to be moved to the headers (removed "
        "from the key/value), or copy if the fields are to be copied to the "
        "headers (retained in the key/value).",
    )
    replace_null_with_default: ReplaceNullWithDefault = True

    @field_validator("operation")
    @classmethod
    def _operation(cls, value: str) -> str:
        if value not in ("move", "copy"):
            raise invalid("String must be one of: move, copy")
        return value


class HeaderFrom(SideTransformation):
    """Copy or move fields of the key/value into headers (the header carries the field's schema).

    Keys: ``fields``, ``headers`` (same length), ``operation`` (move|copy), ``replace.null.with.default``."""

    config_class = HeaderFromConfig

    def configure(self, props: dict[str, Any]) -> None:
        super().configure(props)
        if len(self.config.fields) != len(self.config.headers):
            raise ConfigException(
                "Invalid value for configuration headers: 'fields' config must have the same "
                "number of elements as 'headers' config.",
                field="headers",
            )
        self.pairs = list(zip(self.config.fields, self.config.headers, strict=True))
        self.move = self.config.operation == "move"
        self.cache = SchemaCache()

    def apply(self, record: Any) -> Any:
        schema = self.operating_schema(record)
        value = self.operating_value(record)
        purpose = f"header {self.config.operation}"
        headers = list(record.headers)
        if schema is None:
            mapping = require_map(value, purpose)
            updated = dict(mapping)
            for field, header in self.pairs:
                if self.move:
                    updated.pop(field, None)
                headers.append(Header(header, mapping.get(field), None))
            return self.new_record(record, None, updated, headers=headers)
        struct = require_struct(value, purpose)
        rnd = self.config.replace_null_with_default
        for field, header in self.pairs:
            f = schema.field(field) if schema.type == SchemaType.STRUCT else None
            if f is None:
                raise DataException(f"Field does not exist: {field}")
            headers.append(
                Header(
                    header, field_value(struct, field, rnd) if struct.schema.field(field) else None, f.schema
                )
            )
        if not self.move:
            return self.new_record(record, schema, struct, headers=headers)
        updated_schema = self.cache.get(struct.schema, self._moved_schema)
        values = {f.name: struct.get(f.name) for f in updated_schema.fields}
        return self.new_record(record, updated_schema, Struct(updated_schema, values), headers=headers)

    def _moved_schema(self, schema: Schema) -> Schema:
        moved = set(self.config.fields)
        return struct_schema(schema, [(f.name, f.schema) for f in schema.fields if f.name not in moved])


class HeaderFromKey(KeySide, HeaderFrom):
    aliases = kafka_aliases("HeaderFrom$Key")


class HeaderFromValue(ValueSide, HeaderFrom):
    aliases = kafka_aliases("HeaderFrom$Value")


# -- InsertHeader ------------------------------------------------------------------------------------------

_INT = re.compile(r"[+-]?[0-9]+")
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)(?:[eE][+-]?[0-9]+)?")
_ISO = [
    (
        re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z"),
        JavaDateFormat("yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"),
        "timestamp",
    ),
    (re.compile(r"\d{4}-\d{2}-\d{2}"), JavaDateFormat("yyyy-MM-dd"), "date"),
    (re.compile(r"\d{2}:\d{2}:\d{2}\.\d{3}Z"), JavaDateFormat("HH:mm:ss.SSS'Z'"), "time"),
]


def _integer_schema(value: int) -> Schema | None:
    for schema, bits in ((INT8_SCHEMA, 8), (INT16_SCHEMA, 16), (INT32_SCHEMA, 32), (INT64_SCHEMA, 64)):
        if -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
            return schema
    return None


def _infer(value: Any) -> Schema | None:
    """The schema Values.parseString would give a JSON-parsed element (None when mixed or null)."""
    if isinstance(value, bool):
        return BOOLEAN_SCHEMA
    if isinstance(value, int):
        return _integer_schema(value)
    if isinstance(value, float):
        return FLOAT64_SCHEMA
    if isinstance(value, str):
        return STRING_SCHEMA
    if isinstance(value, list):
        schemas = {_infer(v) for v in value}
        return array_schema(schemas.pop()) if len(schemas) == 1 and None not in schemas else None
    if isinstance(value, dict):
        schemas = {_infer(v) for v in value.values()}
        return map_schema(STRING_SCHEMA, schemas.pop()) if len(schemas) == 1 and None not in schemas else None
    return None


def parse_literal(text: str) -> tuple[Schema | None, Any]:
    """A subset of Kafka's ``Values.parseString``: booleans, the narrowest integer type, floats, ISO
    timestamps/dates/times, JSON arrays and maps, ``null``; anything else is a string."""
    stripped = text.strip()
    lower = stripped.lower()
    if lower in ("true", "false"):
        return BOOLEAN_SCHEMA, lower == "true"
    if lower == "null":
        return None, None
    if _INT.fullmatch(stripped):
        number = int(stripped)
        schema = _integer_schema(number)
        if schema is None:
            return Schema(
                SchemaType.BYTES, name=DECIMAL_NAME, version=1, parameters=(("scale", "0"),)
            ), Decimal(number)
        return schema, number
    if _FLOAT.fullmatch(stripped):
        number = float(stripped)
        if abs(number) <= 3.4028234663852886e38:
            return FLOAT32_SCHEMA, number
        return FLOAT64_SCHEMA, number
    if stripped[:1] in "[{" and stripped[-1:] in "]}":
        try:
            parsed = json.loads(stripped)
        except ValueError:
            parsed = None
        if isinstance(parsed, (list, dict)):
            return _infer(parsed), parsed
    for regex, fmt, kind in _ISO:
        if regex.fullmatch(stripped):
            try:
                ms = fmt.parse(stripped)
            except ValueError:
                break
            if kind == "timestamp":
                return timestamp_schema(), ms_to_datetime(ms)
            if kind == "date":
                return date_schema(), ms_to_datetime(ms).date()
            return time_schema(), ms_to_datetime(ms).time()
    return STRING_SCHEMA, text


class InsertHeaderConfig(TransformConfig):
    header: str = ConfigField(alias="header", description="The name of the header.")
    value_literal: str = ConfigField(
        alias="value.literal",
        description="The literal value that is to be set as the header value on all records.",
    )


class InsertHeader(Transformation):
    """Add a header with a literal value (parsed like Kafka's ``Values.parseString``) to every record.

    Keys: ``header``, ``value.literal``."""

    config_class = InsertHeaderConfig
    aliases = kafka_aliases("InsertHeader")

    def configure(self, props: dict[str, Any]) -> None:
        super().configure(props)
        self.schema, self.value = parse_literal(self.config.value_literal)

    def apply(self, record: Any) -> Any:
        value = copy.deepcopy(self.value) if isinstance(self.value, (list, dict)) else self.value
        return record.new_record(headers=[*record.headers, Header(self.config.header, value, self.schema)])
