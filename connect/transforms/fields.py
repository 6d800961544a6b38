"""Field-level transforms: ExtractField, HoistField, InsertField, ValueToKey."""

from __future__ import annotations

from typing import Any

from pydantic import Field as ConfigField
from pydantic import field_validator

from ..api.data import (
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_INT32_SCHEMA,
    OPTIONAL_INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    Schema,
    SchemaType,
    Struct,
)
from ..api.errors import ConfigException, DataException
from ..api.records import ConnectRecord
from ..api.transforms import Transformation, TransformConfig
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
    ms_to_datetime,
    require_map,
    require_map_or_none,
    require_sink_record,
    require_struct,
    require_struct_or_none,
    struct_schema,
    struct_values,
    timestamp_schema,
)

__all__ = [
    "ExtractFieldKey",
    "ExtractFieldValue",
    "HoistFieldKey",
    "HoistFieldValue",
    "InsertFieldKey",
    "InsertFieldValue",
    "ValueToKey",
    "parse_field_path",
]

# -- ExtractField ------------------------------------------------------------------------------------------


def parse_field_path(path: str, version: str) -> list[str]:
    """KIP-821 field paths: V1 is the name as is; V2 splits on dots, with backticks around names
    that contain dots (a backtick right after a backslash is part of the name)."""
    if version == "V1":
        return [path]
    steps: list[str] = []
    idx, n = 0, len(path)
    while 0 <= idx < n:
        if path[idx] != "`":
            dot = path.find(".", idx)
            steps.append(path[idx:dot] if dot >= 0 else path[idx:])
            idx = dot + 1 if dot >= 0 else n
            continue
        backtick_at, idx = idx, idx + 1
        start, name = idx, []
        while True:
            idx = path.find("`", idx)
            if idx == -1:
                raise ValueError(_incomplete_backtick(path, backtick_at))
            escaped = path[idx - 1] == "\\"
            if idx >= n - 1:
                if escaped:
                    raise ValueError(_incomplete_backtick(path, backtick_at))
                name.append(path[start:idx])
                steps.append("".join(name))
                idx += 1
                break
            if path[idx + 1] != ".":
                idx += 1
                continue
            if escaped:
                name.append(path[start : idx - 1] + "`")
                idx += 1
                start = idx
                continue
            name.append(path[start:idx])
            steps.append("".join(name))
            idx += 2
            break
    if path.endswith("."):
        steps.append("")
    return steps


def _incomplete_backtick(path: str, at: int) -> str:
    return (
        f"Incomplete backtick pair in path: [{path}], consider adding a backslash before backtick at "
        f"position {at} to escape it"
    )


class ExtractFieldConfig(TransformConfig):
    field: str = ConfigField(alias="field", description="Field name to extract.")
    field_syntax_version: str = ConfigField(
        "V1",
        alias="field.syntax.version",
        description="V1: top-level names; V2: dotted paths with backticks.",
    )
    replace_null_with_default: ReplaceNullWithDefault = True

    @field_validator("field_syntax_version")
    @classmethod
    def _version(cls, value: str) -> str:
        if value.upper() not in ("V1", "V2"):
            raise invalid("String must be one of (case insensitive): V1, V2")
        return value.upper()


class ExtractField(SideTransformation):
    """Keep one field of a Struct or map; nulls pass through.

    Keys: ``field``, ``field.syntax.version`` (V1|V2), ``replace.null.with.default``."""

    config_class = ExtractFieldConfig
    PURPOSE = "field extraction"

    def configure(self, props: dict[str, Any]) -> None:
        super().configure(props)
        try:
            self.path = parse_field_path(self.config.field, self.config.field_syntax_version)
        except ValueError as exc:
            raise ConfigException(
                f"Invalid value {self.config.field} for configuration field: {exc}", field="field"
            ) from None

    def apply(self, record: Any) -> Any:
        schema = self.operating_schema(record)
        if schema is None:
            current = require_map_or_none(self.operating_value(record), self.PURPOSE)
            for step in self.path[:-1]:
                if current is None:
                    break
                current = require_map_or_none(current.get(step), "nested field access")
            return self.new_record(record, None, None if current is None else current.get(self.path[-1]))
        value = require_struct_or_none(self.operating_value(record), self.PURPOSE)
        field_schema = self._field_schema(schema)
        if field_schema is None:
            raise DataException(f"Unknown field: {self.config.field}")
        return self.new_record(record, field_schema, None if value is None else self._value_from(value))

    def _field_schema(self, schema: Schema) -> Schema | None:
        current: Schema | None = schema
        for step in self.path:
            if current is None or current.type != SchemaType.STRUCT:
                return None
            f = current.field(step)
            current = f.schema if f is not None else None
        return current

    def _value_from(self, struct: Struct) -> Any:
        current: Struct | None = struct
        for step in self.path[:-1]:
            if current is None or current.schema.field(step) is None:
                return None
            current = require_struct_or_none(current.get(step), "nested field access")
        if current is None or current.schema.field(self.path[-1]) is None:
            return None
        return field_value(current, self.path[-1], self.config.replace_null_with_default)


class ExtractFieldKey(KeySide, ExtractField):
    aliases = kafka_aliases("ExtractField$Key")


class ExtractFieldValue(ValueSide, ExtractField):
    aliases = kafka_aliases("ExtractField$Value")


# -- HoistField --------------------------------------------------------------------------------------------


class HoistFieldConfig(TransformConfig):
    field: str = ConfigField(
        alias="field",
        description="Field name for the single field that will be created in the resulting Struct or Map.",
    )


class HoistField(SideTransformation):
    """Wrap the key or value in a one-field Struct (with a schema) or map (without).

    Keys: ``field``."""

    config_class = HoistFieldConfig

    def configure(self, props: dict[str, Any]) -> None:
        super().configure(props)
        self.cache = SchemaCache()

    def apply(self, record: Any) -> Any:
        schema = self.operating_schema(record)
        value = self.operating_value(record)
        name = self.config.field
        if schema is None:
            return self.new_record(record, None, {name: value})
        updated = self.cache.get(schema, lambda s: struct_schema(None, [(name, s)]))
        return self.new_record(record, updated, Struct(updated, {name: value}))


class HoistFieldKey(KeySide, HoistField):
    aliases = kafka_aliases("HoistField$Key")


class HoistFieldValue(ValueSide, HoistField):
    aliases = kafka_aliases("HoistField$Value")


# -- InsertField -------------------------------------------------------------------------------------------

OPTIONALITY_DOC = "Suffix with ! to make this a required field, or ? to keep it optional (the default)."


class InsertFieldConfig(TransformConfig):
    topic_field: str | None = ConfigField(
        None, alias="topic.field", description="Field name for Kafka topic. " + OPTIONALITY_DOC
    )
    partition_field: str | None = ConfigField(
        None, alias="partition.field", description="Field name for Kafka partition. " + OPTIONALITY_DOC
    )
    offset_field: str | None = ConfigField(
        None,
        alias="offset.field",
        description="Field name for Kafka offset - only applicable to sink connectors. " + OPTIONALITY_DOC,
    )
    timestamp_field: str | None = ConfigField(
        None, alias="timestamp.field", description="Field name for record timestamp. " + OPTIONALITY_DOC
    )
    static_field: str | None = ConfigField(
        None, alias="static.field", description="Field name for static data field. " + OPTIONALITY_DOC
    )
    static_value: str | None = ConfigField(
        None, alias="static.value", description="Static field value, if field name configured."
    )
    replace_null_with_default: ReplaceNullWithDefault = True


def _insertion_spec(spec: str | None) -> tuple[str, bool] | None:
    """``name?`` optional (the default), ``name!`` required."""
    if spec is None:
        return None
    if spec.endswith("?"):
        return spec[:-1], True
    if spec.endswith("!"):
        return spec[:-1], False
    return spec, True


class InsertField(SideTransformation):
    """Insert the topic, partition, offset (sink records only), timestamp or a static value as fields.
    Tombstones pass through.

    Keys: ``topic.field``, ``partition.field``, ``offset.field``, ``timestamp.field``, ``static.field``,
    ``static.value``, ``replace.null.with.default``."""

    config_class = InsertFieldConfig
    PURPOSE = "field insertion"

    def configure(self, props: dict[str, Any]) -> None:
        super().configure(props)
        c = self.config
        self.topic = _insertion_spec(c.topic_field)
        self.partition = _insertion_spec(c.partition_field)
        self.offset = _insertion_spec(c.offset_field)
        self.timestamp = _insertion_spec(c.timestamp_field)
        self.static = _insertion_spec(c.static_field)
        if not any((self.topic, self.partition, self.offset, self.timestamp, self.static)):
            raise ConfigException("No field insertion configured")
        if self.static is not None and c.static_value is None:
            raise ConfigException(
                f"Invalid value null for configuration static.value: No value specified for "
                f"static field: {c.static_field}",
                field="static.value",
            )
        self.cache = SchemaCache()

    def _inserted(self, record: ConnectRecord, with_schema: bool) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.topic:
            out[self.topic[0]] = record.topic
        if self.partition and record.kafka_partition is not None:
            out[self.partition[0]] = record.kafka_partition
        if self.offset:
            out[self.offset[0]] = require_sink_record(record, self.PURPOSE).kafka_offset
        if self.timestamp and record.timestamp is not None:
            out[self.timestamp[0]] = ms_to_datetime(record.timestamp) if with_schema else record.timestamp
        if self.static and self.config.static_value is not None:
            out[self.static[0]] = self.config.static_value
        return out

    def apply(self, record: Any) -> Any:
        value = self.operating_value(record)
        if value is None:
            return record
        schema = self.operating_schema(record)
        if schema is None:
            updated = dict(require_map(value, self.PURPOSE))
            updated.update(self._inserted(record, with_schema=False))
            return self.new_record(record, None, updated)
        struct = require_struct(value, self.PURPOSE)
        new_schema = self.cache.get(struct.schema, self._updated_schema)
        values = struct_values(struct, self.config.replace_null_with_default)
        values.update(self._inserted(record, with_schema=True))
        return self.new_record(record, new_schema, Struct(new_schema, values))

    def _updated_schema(self, schema: Schema) -> Schema:
        fields = [(f.name, f.schema) for f in schema.fields]
        for spec, optional_schema, required_schema in (
            (self.topic, OPTIONAL_STRING_SCHEMA, STRING_SCHEMA),
            (self.partition, OPTIONAL_INT32_SCHEMA, INT32_SCHEMA),
            (self.offset, OPTIONAL_INT64_SCHEMA, INT64_SCHEMA),
            (self.timestamp, timestamp_schema(True), timestamp_schema(False)),
            (self.static, OPTIONAL_STRING_SCHEMA, STRING_SCHEMA),
        ):
            if spec is not None:
                fields.append((spec[0], optional_schema if spec[1] else required_schema))
        return struct_schema(schema, fields)


class InsertFieldKey(KeySide, InsertField):
    aliases = kafka_aliases("InsertField$Key")


class InsertFieldValue(ValueSide, InsertField):
    aliases = kafka_aliases("InsertField$Value")


# -- ValueToKey --------------------------------------------------------------------------------------------


class ValueToKeyConfig(TransformConfig):
    fields: NonEmptyCsvList = ConfigField(
        alias="fields", description="Field names on the record value to extract as the record key."
    )
    replace_null_with_default: ReplaceNullWithDefault = True

    @field_validator("fields")
    @classmethod
    def _no_duplicates(cls, value: list[str]) -> list[str]:
        duplicates = sorted({v for v in value if value.count(v) > 1})
        if duplicates:
            raise invalid(f"Values must not be duplicated: {', '.join(duplicates)}")
        return value


class ValueToKey(Transformation):
    """Replace the key with a Struct (or map) of some value fields.

    Keys: ``fields``, ``replace.null.with.default``."""

    config_class = ValueToKeyConfig
    aliases = kafka_aliases("ValueToKey")
    PURPOSE = "copying fields from value to key"

    def configure(self, props: dict[str, Any]) -> None:
        super().configure(props)
        self.cache = SchemaCache()

    def apply(self, record: Any) -> Any:
        fields = self.config.fields
        if record.value_schema is None:
            value = require_map(record.value, self.PURPOSE)
            return record.new_record(key_schema=None, key={f: value.get(f) for f in fields})
        struct = require_struct(record.value, self.PURPOSE)
        key_schema = self.cache.get(struct.schema, self._key_schema)
        rnd = self.config.replace_null_with_default
        key = Struct(key_schema, {f: field_value(struct, f, rnd) for f in fields})
        return record.new_record(key_schema=key_schema, key=key)

    def _key_schema(self, schema: Schema) -> Schema:
        out = []
        for name in self.config.fields:
            f = schema.field(name)
            if f is None:
                raise DataException(f"Field does not exist: {name}")
            out.append((name, f.schema))
        return struct_schema(None, out)
