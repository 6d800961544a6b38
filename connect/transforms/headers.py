"""Header transforms: DropHeaders, HeaderFrom ($Key/$Value), InsertHeader."""

from __future__ import annotations

import copy
from typing import Any

from pydantic import Field as ConfigField
from pydantic import field_validator

from ..api.data import (
    Schema,
    SchemaType,
    Struct,
)
from ..api.errors import ConfigException, DataException
from ..api.records import Header
from ..api.transforms import Transformation, TransformConfig
from ..api.values import parse_string
from .util import (
    KeySide,
    NonEmptyCsvList,
    ReplaceNullWithDefault,
    SchemaCache,
    SideTransformation,
    ValueSide,
    field_value,
    invalid,
    kafka_aliases,
    require_map,
    require_struct,
    struct_schema,
)

__all__ = ["DropHeaders", "HeaderFromKey", "HeaderFromValue", "InsertHeader"]


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
        self.schema, self.value = parse_string(self.config.value_literal)

    def apply(self, record: Any) -> Any:
        value = copy.deepcopy(self.value) if isinstance(self.value, (list, dict)) else self.value
        return record.new_record(headers=[*record.headers, Header(self.config.header, value, self.schema)])
