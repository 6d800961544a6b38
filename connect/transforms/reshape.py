"""Shape-changing transforms: Flatten, ReplaceField, MaskField, SetSchemaMetadata."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal, InvalidOperation
from typing import Any

from pydantic import Field as ConfigField
from pydantic import field_validator, model_validator

from ..api.data import Schema, SchemaType, Struct
from ..api.errors import ConfigException, DataException
from ..api.transforms import TransformConfig
from .util import (
    EPOCH,
    CsvList,
    KeySide,
    NonEmptyCsvList,
    ReplaceNullWithDefault,
    SchemaCache,
    SideTransformation,
    ValueSide,
    copy_schema_basics,
    invalid,
    java_class,
    kafka_aliases,
    require_map,
    require_schema,
    require_struct,
    require_struct_or_none,
    schema_type_of,
    struct_schema,
    struct_values,
)

__all__ = [
    "FlattenKey",
    "FlattenValue",
    "MaskFieldKey",
    "MaskFieldValue",
    "ReplaceFieldKey",
    "ReplaceFieldValue",
    "SetSchemaMetadataKey",
    "SetSchemaMetadataValue",
]

_PRIMITIVES = frozenset(
    {
        SchemaType.INT8,
        SchemaType.INT16,
        SchemaType.INT32,
        SchemaType.INT64,
        SchemaType.FLOAT32,
        SchemaType.FLOAT64,
        SchemaType.BOOLEAN,
        SchemaType.STRING,
        SchemaType.BYTES,
    }
)


# -- Flatten -----------------------------------------------------------------------------------------------


class FlattenConfig(TransformConfig):
    delimiter: str = ConfigField(
        ".",
        alias="delimiter",
        description="Delimiter to insert between field names from the input record when "
        "generating field names for the output record",
    )


class Flatten(SideTransformation):
    """Flatten nested Structs (or maps) into one level, joining names with the delimiter.
    Arrays are kept as they are; tombstones pass through.

    Keys: ``delimiter`` (default ``.``)."""

    config_class = FlattenConfig
    PURPOSE = "flattening"

    def configure(self, props: dict[str, Any]) -> None:
        super().configure(props)
        self.cache = SchemaCache()

    def _name(self, prefix: str, name: str) -> str:
        return name if not prefix else prefix + self.config.delimiter + name

    def apply(self, record: Any) -> Any:
        value = self.operating_value(record)
        if value is None:
            return record
        schema = self.operating_schema(record)
        if schema is None:
            out: dict[str, Any] = {}
            self._flatten_map(require_map(value, self.PURPOSE), "", out)
            return self.new_record(record, None, out)
        struct = require_struct_or_none(value, self.PURPOSE)
        updated = self.cache.get(schema, self._updated_schema)
        values: dict[str, Any] = {}
        self._flatten_struct(struct, "", values)
        return self.new_record(record, updated, Struct(updated, values))

    def _flatten_map(self, value: dict[str, Any], prefix: str, out: dict[str, Any]) -> None:
        for key, item in value.items():
            name = self._name(prefix, str(key))
            if item is None:
                out[name] = None
                continue
            kind = schema_type_of(item)
            if kind is None:
                raise DataException(
                    f"Flatten transformation was passed a value of type {java_class(item)} which "
                    "is not supported by Connect's data API"
                )
            if kind == SchemaType.MAP:
                self._flatten_map(item, name, out)
            elif kind in _PRIMITIVES or kind == SchemaType.ARRAY:
                out[name] = item
            else:
                raise DataException(
                    f"Flatten transformation does not support {java_class(item)} for record "
                    f"without schemas (for field {name})."
                )

    def _updated_schema(self, schema: Schema) -> Schema:
        fields: list[tuple[str, Schema]] = []
        default = schema.default if isinstance(schema.default, Struct) else None
        self._flatten_schema(schema, "", fields, schema.optional, default)
        return struct_schema(schema, fields)

    def _flatten_schema(
        self,
        schema: Schema,
        prefix: str,
        out: list[tuple[str, Schema]],
        optional: bool,
        parent_default: Struct | None,
    ) -> None:
        for f in schema.fields:
            name = self._name(prefix, f.name)
            field_optional = optional or f.schema.optional
            default = f.schema.default
            if default is None and parent_default is not None:
                default = parent_default.values.get(f.name)
            if f.schema.type == SchemaType.STRUCT:
                self._flatten_schema(
                    f.schema, name, out, field_optional, default if isinstance(default, Struct) else None
                )
            else:
                out.append(
                    (name, Schema(**copy_schema_basics(f.schema, optional=field_optional, default=default)))
                )

    def _flatten_struct(self, struct: Struct | None, prefix: str, out: dict[str, Any]) -> None:
        if struct is None:
            return
        for f in struct.schema.fields:
            name = self._name(prefix, f.name)
            if f.schema.type == SchemaType.STRUCT:
                self._flatten_struct(struct.get(f.name), name, out)
            else:
                out[name] = struct.get(f.name)


class FlattenKey(KeySide, Flatten):
    aliases = kafka_aliases("Flatten$Key")


class FlattenValue(ValueSide, Flatten):
    aliases = kafka_aliases("Flatten$Value")


# -- ReplaceField ------------------------------------------------------------------------------------------


def _parse_renames(mappings: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for mapping in mappings:
        parts = mapping.split(":")
        while len(parts) > 1 and parts[-1] == "":  # Java's split drops trailing empty strings
            parts.pop()
        if len(parts) != 2:
            raise invalid(f"Invalid rename mapping: {mapping}")
        out[parts[0]] = parts[1]
    return out


class ReplaceFieldConfig(TransformConfig):
    exclude: CsvList = ConfigField(
        [],
        alias="exclude",
        description="Fields to exclude. This takes precedence over the fields to include.",
    )
    include: CsvList = ConfigField(
        [], alias="include", description="Fields to include. If specified, only these fields will be used."
    )
    renames: CsvList = ConfigField(
        [], alias="renames", description="Field rename mappings, e.g. foo:bar,abc:xyz."
    )
    replace_null_with_default: ReplaceNullWithDefault = True

    @model_validator(mode="before")
    @classmethod
    def _legacy_names(cls, data: Any) -> Any:
        """``blacklist``/``whitelist`` are the deprecated names of ``exclude``/``include``."""
        if isinstance(data, dict):
            data = dict(data)
            for new, old in (("exclude", "blacklist"), ("include", "whitelist")):
                if new not in data and old in data:
                    data[new] = data[old]
        return data

    @field_validator("renames")
    @classmethod
    def _renames(cls, value: list[str]) -> list[str]:
        _parse_renames(value)
        return value


class ReplaceField(SideTransformation):
    """Keep, drop and rename fields; tombstones pass through.

    Keys: ``exclude`` (or legacy ``blacklist``), ``include`` (or ``whitelist``), ``renames``
    (``old:new,...``), ``replace.null.with.default``."""

    config_class = ReplaceFieldConfig
    PURPOSE = "field replacement"

    def configure(self, props: dict[str, Any]) -> None:
        super().configure(props)
        self.exclude = set(self.config.exclude)
        self.include = set(self.config.include)
        self.renames = _parse_renames(self.config.renames)
        self.reverse = {new: old for old, new in self.renames.items()}
        self.cache = SchemaCache()

    def keep(self, name: str) -> bool:
        return name not in self.exclude and (not self.include or name in self.include)

    def apply(self, record: Any) -> Any:
        value = self.operating_value(record)
        if value is None:
            return record
        schema = self.operating_schema(record)
        if schema is None:
            items = require_map(value, self.PURPOSE).items()
            return self.new_record(
                record, None, {self.renames.get(k, k): v for k, v in items if self.keep(k)}
            )
        struct = require_struct(value, self.PURPOSE)
        updated = self.cache.get(struct.schema, self._updated_schema)
        source = struct_values(struct, self.config.replace_null_with_default)
        values = {f.name: source[self.reverse.get(f.name, f.name)] for f in updated.fields}
        return self.new_record(record, updated, Struct(updated, values))

    def _updated_schema(self, schema: Schema) -> Schema:
        fields = [(self.renames.get(f.name, f.name), f.schema) for f in schema.fields if self.keep(f.name)]
        return struct_schema(schema, fields)


class ReplaceFieldKey(KeySide, ReplaceField):
    aliases = kafka_aliases("ReplaceField$Key")


class ReplaceFieldValue(ValueSide, ReplaceField):
    aliases = kafka_aliases("ReplaceField$Value")


# -- MaskField ---------------------------------------------------------------------------------------------

_INT_RANGES = {SchemaType.INT8: 8, SchemaType.INT16: 16, SchemaType.INT32: 32, SchemaType.INT64: 64}


class MaskFieldConfig(TransformConfig):
    fields: NonEmptyCsvList = ConfigField(alias="fields", description="Names of fields to mask.")
    replacement: str | None = ConfigField(
        None,
        alias="replacement",
        description="Custom value replacement, that will be applied to all "
        "'fields' values (numeric or non-empty string values only).",
    )
    replace_null_with_default: ReplaceNullWithDefault = True

    @field_validator("replacement")
    @classmethod
    def _non_empty(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise invalid("String must be non-empty")
        return value


def _null_equivalent(value: Any) -> Any:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return 0
    if isinstance(value, float):
        return 0.0
    if isinstance(value, Decimal):
        return Decimal(0)
    if isinstance(value, str):
        return ""
    if isinstance(value, dt.datetime):
        return EPOCH if value.tzinfo is not None else EPOCH.replace(tzinfo=None)
    if isinstance(value, dt.date):
        return dt.date(1970, 1, 1)
    if isinstance(value, dt.time):
        return dt.time(0)
    if isinstance(value, list):
        return []
    if isinstance(value, dict):
        return {}
    raise DataException(f"Cannot mask value of type: {java_class(value)}")


def _custom_replacement(value: Any, replacement: str, schema: Schema | None) -> Any:
    try:
        if isinstance(value, str):
            return replacement
        if isinstance(value, bool):
            pass
        elif isinstance(value, int):
            number = int(replacement.strip())
            bits = _INT_RANGES.get(schema.type) if schema is not None else None
            if bits is not None and not -(1 << (bits - 1)) <= number < (1 << (bits - 1)):
                raise ValueError(f'Value out of range. Value:"{replacement}"')
            return number
        elif isinstance(value, float):
            return float(replacement)
        elif isinstance(value, Decimal):
            return Decimal(replacement)
    except (ValueError, InvalidOperation):
        raise DataException(f"Unable to convert {replacement} (str) to number") from None
    raise DataException(f"Cannot mask value of type {java_class(value)} with custom replacement.")


class MaskField(SideTransformation):
    """Replace fields with their type's null-equivalent (0, false, "", empty list or map...) or a
    custom replacement (numbers and strings only).

    Keys: ``fields``, ``replacement``, ``replace.null.with.default``."""

    config_class = MaskFieldConfig
    PURPOSE = "mask fields"

    def configure(self, props: dict[str, Any]) -> None:
        super().configure(props)
        self.masked = set(self.config.fields)

    def _mask(self, value: Any, schema: Schema | None) -> Any:
        if value is None:
            return None
        if self.config.replacement is None:
            return _null_equivalent(value)
        return _custom_replacement(value, self.config.replacement, schema)

    def apply(self, record: Any) -> Any:
        schema = self.operating_schema(record)
        if schema is None:
            value = require_map(self.operating_value(record), self.PURPOSE)
            updated = dict(value)
            for name in self.config.fields:
                updated[name] = self._mask(value.get(name), None)
            return self.new_record(record, None, updated)
        struct = require_struct(self.operating_value(record), self.PURPOSE)
        values = struct_values(struct, self.config.replace_null_with_default)
        for f in struct.schema.fields:
            if f.name in self.masked:
                values[f.name] = self._mask(values[f.name], f.schema)
        return self.new_record(record, schema, Struct(struct.schema, values))


class MaskFieldKey(KeySide, MaskField):
    aliases = kafka_aliases("MaskField$Key")


class MaskFieldValue(ValueSide, MaskField):
    aliases = kafka_aliases("MaskField$Value")


# -- SetSchemaMetadata -------------------------------------------------------------------------------------


class SetSchemaMetadataConfig(TransformConfig):
    schema_name: str | None = ConfigField(None, alias="schema.name", description="Schema name to set.")
    schema_version: int | None = ConfigField(
        None, alias="schema.version", description="Schema version to set."
    )
    replace_null_with_default: ReplaceNullWithDefault = True


class SetSchemaMetadata(SideTransformation):
    """Set the name and/or version of the key or value schema (a Struct is rebuilt on the new schema).

    Keys: ``schema.name``, ``schema.version``, ``replace.null.with.default``."""

    config_class = SetSchemaMetadataConfig

    def configure(self, props: dict[str, Any]) -> None:
        super().configure(props)
        if self.config.schema_name is None and self.config.schema_version is None:
            raise ConfigException("Neither schema name nor version configured")
        self.cache = SchemaCache()

    def apply(self, record: Any) -> Any:
        schema = require_schema(self.operating_schema(record), "updating schema metadata")
        updated = self.cache.get(schema, self._updated_schema)
        value = self.operating_value(record)
        if isinstance(value, Struct):
            value = Struct(updated, struct_values(value, self.config.replace_null_with_default))
        return self.new_record(record, updated, value)

    def _updated_schema(self, schema: Schema) -> Schema:
        name = self.config.schema_name if self.config.schema_name is not None else schema.name
        version = self.config.schema_version if self.config.schema_version is not None else schema.version
        return Schema(
            type=schema.type,
            optional=schema.optional,
            name=name,
            version=version,
            doc=schema.doc,
            parameters=schema.parameters,
            default=schema.default,
            fields=schema.fields,
            key_schema=schema.key_schema,
            value_schema=schema.value_schema,
        )


class SetSchemaMetadataKey(KeySide, SetSchemaMetadata):
    aliases = kafka_aliases("SetSchemaMetadata$Key")


class SetSchemaMetadataValue(ValueSide, SetSchemaMetadata):
    aliases = kafka_aliases("SetSchemaMetadata$Value")
